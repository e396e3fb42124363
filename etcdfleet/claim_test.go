package etcdfleet_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/owner"
)

// A name held by a live owner on one replica is refused on every other,
// every time, and the refused start leaves nothing behind there.
func TestDuplicateAcrossReplicas(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	ka := a.mustStart(t, life, "search")
	for range 20 {
		if _, err := b.start(life, "search"); !errors.Is(err, catalog.ErrDuplicate) {
			t.Fatalf("second replica's start: %v, want ErrDuplicate", err)
		}
		if _, err := a.start(life, "search"); !errors.Is(err, catalog.ErrDuplicate) {
			t.Fatalf("same replica's second start: %v, want ErrDuplicate", err)
		}
	}
	if got := holder(t, cli, toolKey("search")); got != "a" {
		t.Fatalf("holder %q, want a", got)
	}
	// b lists a's tool (its catalog merges the fleet's), but holds nothing.
	if st := b.cat.Stats(); st.Tools != 0 || st.ToolSlots != 0 {
		t.Fatalf("refused replica holds %d tools in %d slots", st.Tools, st.ToolSlots)
	}
	if _, err := b.cat.CallTool(ctx, "search", nil, ""); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("refused replica's call: %v", err)
	}
	if _, err := a.cat.CallTool(ctx, "search", nil, ""); err != nil {
		t.Fatalf("holder's call: %v", err)
	}
	if err := ka.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b.mustStart(t, life, "search")
}

// Stop frees the name fleet-wide before it returns; Close frees every name
// of the replica and kills its consumers.
func TestCleanStopAndClose(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	// Releases are slowed down, so that the reclaim the owner's death
	// starts in the background cannot finish before Stop returns: Stop
	// itself must wait for the release.
	slow, err := catalog.New(catalog.Config{Claimer: slowRelease{a.Replica}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		k, err := slow.StartTool(life, catalog.Tool{Name: "search"}, bindsec.Plan{Public: true}, echo)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// No wait: Stop returns once the fenced delete has committed.
		if got := holder(t, cli, toolKey("search")); got != "" {
			t.Fatalf("after Stop the key is still held by %q", got)
		}
	}
	b.mustStart(t, life, "search")

	k1 := a.mustStart(t, life, "one")
	k2 := a.mustStart(t, life, "two")
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*catalog.Consumer{k1, k2} {
		select {
		case <-k.Done():
		default:
			t.Fatalf("%s alive after its replica closed", k.Name())
		}
	}
	for _, n := range []string{"one", "two"} {
		if got := holder(t, cli, toolKey(n)); got != "" {
			t.Fatalf("after Close %s is still held by %q", n, got)
		}
	}
	if _, err := a.start(life, "three"); !errors.Is(err, etcdfleet.ErrClosed) {
		t.Fatalf("start on a closed replica: %v, want ErrClosed", err)
	}
}

// A consumer's death by any path frees its name fleet-wide.
func TestConsumerDeathFreesName(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(life)
		a.mustStart(t, cctx, "cancelled")
		cancel()
		waitGone(t, cli, toolKey("cancelled"))
		b.mustStart(t, life, "cancelled")
	})
	t.Run("panic", func(t *testing.T) {
		boom := func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") }
		k, err := a.cat.StartTool(life, catalog.Tool{Name: "panics"}, bindsec.Plan{Public: true}, boom)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.cat.CallTool(ctx, "panics", nil, ""); !errors.Is(err, catalog.ErrRoutePanicked) {
			t.Fatalf("call: %v", err)
		}
		waitDone(t, k)
		waitGone(t, cli, toolKey("panics"))
		b.mustStart(t, life, "panics")
	})
	t.Run("drop", func(t *testing.T) {
		func() {
			if _, err := a.cat.StartTool(life, catalog.Tool{Name: "dropped"}, bindsec.Plan{Public: true}, echo); err != nil {
				t.Fatal(err)
			}
		}()
		deadline := ctxFor(t)
		for holder(t, cli, toolKey("dropped")) != "" {
			runtime.GC()
			if deadline.Err() != nil {
				t.Fatal("a dropped consumer's name is still claimed")
			}
		}
		b.mustStart(t, life, "dropped")
	})
	t.Run("stop", func(t *testing.T) {
		k := a.mustStart(t, life, "stopped")
		if err := k.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		b.mustStart(t, life, "stopped")
	})
}

// A release that comes late, after the key was lost and claimed by a
// successor, must not delete the successor's key.
func TestStaleReleaseKeepsSuccessor(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	tok := owner.New()
	defer tok.Release()
	release, err := a.Claim(ctx, catalog.Claim{Kind: "tool", Name: "x", Owner: tok.Ref(), Kill: tok.Releaser(), Tool: catalog.Tool{Name: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	// The key goes behind a's back (an operator, or an expiry a's session
	// has not noticed yet), and b claims the name.
	if _, err := cli.Delete(ctx, toolKey("x")); err != nil {
		t.Fatal(err)
	}
	b.mustStart(t, life, "x")
	release()
	if got := holder(t, cli, toolKey("x")); got != "b" {
		t.Fatalf("after a's late release the key is held by %q, want b", got)
	}
}

// Three replicas race for a name whose owner just died: exactly one wins,
// the others get ErrDuplicate; round after round.
func TestRaceAfterOwnerDeath(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	rs := []replica{newReplica(t, ep, "a"), newReplica(t, ep, "b"), newReplica(t, ep, "c"), newReplica(t, ep, "d")}
	life := lifeFor(t)
	cctx, kill := context.WithCancel(life)
	rs[0].mustStart(t, cctx, "x")
	for round := range 10 {
		kill()
		waitGone(t, cli, toolKey("x"))
		racers := rs[1:]
		if round%2 == 1 {
			racers = rs[:3]
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			next    context.CancelFunc
		)
		gate := make(chan struct{})
		for _, r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, cancel := context.WithCancel(life)
				<-gate
				_, err := r.start(c, "x")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, r.Name())
					next = cancel
				case errors.Is(err, catalog.ErrDuplicate):
					cancel()
				default:
					cancel()
					t.Errorf("%s: %v", r.Name(), err)
				}
			}()
		}
		close(gate)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", round, winners)
		}
		if got := holder(t, cli, toolKey("x")); got != winners[0] {
			t.Fatalf("round %d: key held by %q, winner %q", round, got, winners[0])
		}
		kill = next
	}
	kill()
}

// slowRelease delays every release of the claims it makes.
type slowRelease struct{ *etcdfleet.Replica }

func (s slowRelease) Claim(ctx context.Context, cl catalog.Claim) (func(), error) {
	rel, err := s.Replica.Claim(ctx, cl)
	if err != nil {
		return nil, err
	}
	return func() {
		time.Sleep(100 * time.Millisecond)
		rel()
	}, nil
}
