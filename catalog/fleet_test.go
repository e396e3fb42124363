package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// recorder is an in-process Claimer that holds names in a map, the way a
// fleet would across processes, and counts releases.
type recorder struct {
	mu       sync.Mutex
	held     map[string]uint64 // name -> owner id
	claims   int
	released map[string]int
	kills    map[string]func()
	during   func(cl catalog.Claim) // runs inside Claim, before it decides
}

func newRecorder() *recorder {
	return &recorder{held: map[string]uint64{}, released: map[string]int{}, kills: map[string]func(){}}
}

func (r *recorder) Claim(ctx context.Context, cl catalog.Claim) (func(), error) {
	if r.during != nil {
		r.during(cl)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[cl.Name]; ok {
		return nil, fmt.Errorf("recorder: %w", catalog.ErrDuplicate)
	}
	id := cl.Owner.ID()
	r.held[cl.Name] = id
	r.claims++
	r.kills[cl.Name] = cl.Kill
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.released[cl.Name]++
		if r.held[cl.Name] == id { // fenced, as a real claimer must be
			delete(r.held, cl.Name)
		}
	}, nil
}

func (r *recorder) state(name string) (held bool, released int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, held = r.held[name]
	return held, r.released[name]
}

func waitReleased(t *testing.T, r *recorder, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		held, n := r.state(name)
		if !held && n == 1 {
			return
		}
		if n > 1 {
			t.Fatalf("released more than once: n = %v, want <= %v", n, 1)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: held %v, released %d times after 30 s", name, held, n)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// The claim comes after the local registration and before the route is
// ready; a refusal fails the start and leaves nothing behind.
func TestClaimerRefusalLeavesNothing(t *testing.T) {
	rec := newRecorder()
	c := newCatalog(t, catalog.Config{Claimer: rec})
	rec.during = func(cl catalog.Claim) {
		// Registered locally: a second local start is a duplicate...
		_, err := c.StartTool(bg, catalog.Tool{Name: cl.Name}, public, fleetEcho)
		if !errors.Is(err, catalog.ErrDuplicate) {
			t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
		}
		// ...but not ready: not callable.
		_, err = c.CallTool(bg, cl.Name, nil, "")
		if !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("err = %v, want catalog.ErrNotFound", err)
		}
	}
	rec.held["taken"] = 0
	_, err := c.StartTool(bg, catalog.Tool{Name: "taken"}, public, fleetEcho)
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}
	if len(c.Tools().List()) != 0 {
		t.Fatalf("c.Tools().List() = %v, want empty", c.Tools().List())
	}
	if got := c.ToolEntries(); got != 0 {
		t.Fatalf("c.ToolEntries() = %v, want 0", got)
	}

	rec.during = nil
	delete(rec.held, "taken")
	k, err := c.StartTool(bg, catalog.Tool{Name: "taken"}, public, fleetEcho)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
}

// Every death releases the claim exactly once; Stop returns after it.
func TestClaimerReleasedOncePerDeath(t *testing.T) {
	rec := newRecorder()
	c := newCatalog(t, catalog.Config{Claimer: rec})

	k, err := c.StartTool(bg, catalog.Tool{Name: "stop"}, public, fleetEcho)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	held, n := rec.state("stop")
	if held {
		t.Fatalf("Stop returned with the name still claimed: held is true")
	}
	if n != 1 {
		t.Fatalf("n = %v, want 1", n)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(bg)
	_, err = c.StartTool(ctx, catalog.Tool{Name: "cancel"}, public, fleetEcho)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitReleased(t, rec, "cancel")

	boom := func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") }
	_, err = c.StartTool(bg, catalog.Tool{Name: "panic"}, public, boom)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CallTool(bg, "panic", nil, "")
	if !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	waitReleased(t, rec, "panic")

	func() {
		_, err := c.StartTool(bg, catalog.Tool{Name: "drop"}, public, fleetEcho)
		if err != nil {
			t.Fatal(err)
		}
	}()
	waitReleased(t, rec, "drop")

	// Kill, as a claimer that lost its claims calls it: the consumer dies.
	k, err = c.StartTool(bg, catalog.Tool{Name: "kill"}, public, fleetEcho)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	kill := rec.kills["kill"]
	rec.mu.Unlock()
	kill()
	<-k.Done()
	waitReleased(t, rec, "kill")
	_, err = c.CallTool(bg, "kill", nil, "")
	if !(errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone)) {
		t.Fatalf("%v: errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone) is false", err)
	}
}

// An owner that dies after its claim succeeded, before the route is ready,
// fails the start, and the claim is released before Start returns.
func TestClaimerReleasedWhenStartFailsLate(t *testing.T) {
	rec := newRecorder()
	c := newCatalog(t, catalog.Config{Claimer: rec})
	rec.during = func(cl catalog.Claim) { cl.Kill() }
	_, err := c.StartTool(bg, catalog.Tool{Name: "late"}, public, fleetEcho)
	if !errors.Is(err, catalog.ErrDeadOwner) {
		t.Fatalf("err = %v, want catalog.ErrDeadOwner", err)
	}
	held, n := rec.state("late")
	if held {
		t.Fatalf("a failed start left its name claimed: held is true")
	}
	if n != 1 {
		t.Fatalf("n = %v, want 1", n)
	}
	if got := c.ToolEntries(); got != 0 {
		t.Fatalf("c.ToolEntries() = %v, want 0", got)
	}
}

func fleetEcho(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil }
