package etcdfleet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newCapped joins the fleet at ep as replica name with a fleet cap.
func newCapped(t testing.TB, ep, name string, cap int) replica {
	t.Helper()
	return newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second, Replica: name, Cap: cap}))
}

// capWatch follows the tool keys from revision rev+1 and records the most
// keys held at any revision. Every event is counted as it comes, so a
// revision at which the fleet held more than the cap is seen even if the
// next one takes it back.
type capWatch struct {
	mu   sync.Mutex
	held map[string]bool
	max  int
	at   int64 // the revision of max's first occurrence
	rev  int64 // the last revision seen
	stop context.CancelFunc
	done chan struct{}
}

func watchCount(t *testing.T, cli *clientv3.Client) *capWatch {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), toolKey(""), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &capWatch{held: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	for _, kv := range resp.Kvs {
		w.held[string(kv.Key)] = true
	}
	w.max, w.rev = len(w.held), resp.Header.Revision
	wch := cli.Watch(ctx, toolKey(""), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		defer close(w.done)
		for resp := range wch {
			w.mu.Lock()
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					w.held[string(ev.Kv.Key)] = true
				} else {
					delete(w.held, string(ev.Kv.Key))
				}
				if len(w.held) > w.max {
					w.max, w.at = len(w.held), ev.Kv.ModRevision
				}
				w.rev = ev.Kv.ModRevision
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// settle waits until the watch has seen every revision so far, and
// returns the most keys it saw held and how many are held now. Every
// revision of the tests that use it is a tool key's, so the last one is an
// event the watch delivers.
func (w *capWatch) settle(t *testing.T, cli *clientv3.Client) (most, now int) {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), toolKey(""), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for {
		w.mu.Lock()
		rev, n, most := w.rev, len(w.held), w.max
		w.mu.Unlock()
		if rev >= resp.Header.Revision {
			if int64(n) != resp.Count {
				t.Fatalf("watch holds %d keys at revision %d, etcd %d", n, rev, resp.Count)
			}
			return most, n
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch at revision %d, etcd at %d, after %v", rev, resp.Header.Revision, patience)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The cap holds at every revision while three replicas race to claim, and
// release, more names than it allows; a round that was refused for the
// cap ends with the fleet exactly at it.
func TestFleetCapHoldsUnderRaces(t *testing.T) {
	const (
		capN   = 4
		names  = 12
		racers = 6 // per replica
		rounds = 8
	)
	ep := startEtcd(t)
	cli := client(t, ep)
	rs := []replica{newCapped(t, ep, "a", capN), newCapped(t, ep, "b", capN), newCapped(t, ep, "c", capN)}
	w := watchCount(t, cli)
	ctx, life := ctxFor(t), lifeFor(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var held []*catalog.Consumer
	capRefusals := 0
	for round := range rounds {
		// Some of the winners of the last round stop while the next races.
		var stopping []*catalog.Consumer
		rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
		if len(held) > 0 {
			n := 1 + rng.IntN(len(held))
			stopping, held = held[:n], held[n:]
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     []*catalog.Consumer
			refused int
		)
		gate := make(chan struct{})
		for _, k := range stopping {
			wg.Go(func() {
				<-gate
				if err := k.Stop(ctx); err != nil {
					t.Errorf("stop %s: %v", k.Name(), err)
				}
			})
		}
		for _, r := range rs {
			for range racers {
				name := fmt.Sprintf("n%d", rng.IntN(names))
				wg.Go(func() {
					<-gate
					k, err := r.start(life, name)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won = append(won, k)
					case errors.Is(err, catalog.ErrCapReached):
						refused++
					case errors.Is(err, catalog.ErrDuplicate):
					default:
						t.Errorf("%s: start %s: %v", r.Name(), name, err)
					}
				})
			}
		}
		close(gate)
		wg.Wait()
		held = append(held, won...)
		capRefusals += refused
		most, now := w.settle(t, cli)
		if most > capN {
			t.Fatalf("round %d: %d tools held fleet-wide at revision %d, cap %d", round, most, w.at, capN)
		}
		if now != len(held) {
			t.Fatalf("round %d: %d keys for %d live consumers", round, now, len(held))
		}
		// In a round without stops the count only grows, so a refusal
		// for the cap, full at its revision, leaves the fleet at it.
		if refused > 0 && len(stopping) == 0 && now != capN {
			t.Fatalf("round %d: %d refused for the cap, but %d of %d held", round, refused, now, capN)
		}
	}
	if capRefusals == 0 {
		t.Fatal("no claim was ever refused for the cap: the test raced nothing")
	}
	t.Logf("%d rounds: %d refusals for the cap; at most %d tools held", rounds, capRefusals, w.max)
}

// A full cap refuses a new name with ErrCapReached, a held name still with
// ErrDuplicate, and counts each kind apart; a stop, and a death, free a
// slot for any replica.
func TestFleetCapReleaseFreesSlot(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newCapped(t, ep, "a", 2), newCapped(t, ep, "b", 2)
	ctx, life := ctxFor(t), lifeFor(t)
	kx := a.mustStart(t, life, "x")
	dying, die := context.WithCancel(life)
	a.mustStart(t, dying, "y")
	if _, err := b.start(life, "z"); !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("start at a full cap: %v, want ErrCapReached", err)
	}
	if _, err := b.start(life, "x"); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("start of a held name at a full cap: %v, want ErrDuplicate", err)
	}
	read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil }
	kr, err := b.cat.StartResource(life, catalog.Resource{URI: "file:///r"}, bindsec.Plan{Public: true}, read)
	if err != nil {
		t.Fatalf("a resource while the tools are at their cap: %v", err)
	}
	b.keep(kr)
	if got := holder(t, cli, toolKey("z")); got != "" {
		t.Fatalf("a refused claim left a key held by %q", got)
	}
	if err := kx.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b.mustStart(t, life, "z")
	if _, err := a.start(life, "w"); !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("start at a full cap: %v, want ErrCapReached", err)
	}
	die()
	waitGone(t, cli, toolKey("y"))
	a.mustStart(t, life, "w")
}

// A crashed replica's keys hold their slots until its lease expires; then
// the slots are free.
func TestFleetCapCrashedReplicaSlots(t *testing.T) {
	ep := startEtcd(t)
	a, b := newCapped(t, ep, "a", 2), newCapped(t, ep, "b", 2)
	life := lifeFor(t)
	a.mustStart(t, life, "x")
	a.mustStart(t, life, "y")
	lease := a.Lease()
	a.Crash()
	crashed := time.Now()
	// As in TestReplicaCrash: a claim that got a slot while a's lease is
	// still granted got it early.
	if _, err := b.start(life, "z"); err == nil && leaseGranted(t, client(t, ep), lease) {
		t.Fatal("a crashed replica's slot was free while its lease was still granted")
	} else if err != nil && !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("start at a full cap: %v, want ErrCapReached", err)
	}
	deadline := time.Now().Add(patience)
	for {
		_, err := b.start(life, "z")
		if err == nil {
			break
		}
		if !errors.Is(err, catalog.ErrCapReached) {
			t.Fatalf("start: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("cap still full %v after the crash", patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a crashed replica's slots were free after %v (TTL 1 s)", time.Since(crashed).Round(time.Millisecond))
	b.mustStart(t, life, "w")
}
