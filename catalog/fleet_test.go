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
	"github.com/stretchr/testify/require"
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
		require.LessOrEqual(t, n, 1, "released more than once")
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
		require.ErrorIs(t, err, catalog.ErrDuplicate)
		// ...but not ready: not callable.
		_, err = c.CallTool(bg, cl.Name, nil, "")
		require.ErrorIs(t, err, catalog.ErrNotFound)
	}
	rec.held["taken"] = 0
	_, err := c.StartTool(bg, catalog.Tool{Name: "taken"}, public, fleetEcho)
	require.ErrorIs(t, err, catalog.ErrDuplicate)
	require.Empty(t, c.Tools().List())
	require.Equal(t, 0, c.ToolEntries())

	rec.during = nil
	delete(rec.held, "taken")
	k, err := c.StartTool(bg, catalog.Tool{Name: "taken"}, public, fleetEcho)
	require.NoError(t, err)
	require.NoError(t, k.Stop(bg))
}

// Every death releases the claim exactly once; Stop returns after it.
func TestClaimerReleasedOncePerDeath(t *testing.T) {
	rec := newRecorder()
	c := newCatalog(t, catalog.Config{Claimer: rec})

	k, err := c.StartTool(bg, catalog.Tool{Name: "stop"}, public, fleetEcho)
	require.NoError(t, err)
	require.NoError(t, k.Stop(bg))
	held, n := rec.state("stop")
	require.False(t, held, "Stop returned with the name still claimed")
	require.Equal(t, 1, n)
	require.NoError(t, k.Stop(bg))

	ctx, cancel := context.WithCancel(bg)
	_, err = c.StartTool(ctx, catalog.Tool{Name: "cancel"}, public, fleetEcho)
	require.NoError(t, err)
	cancel()
	waitReleased(t, rec, "cancel")

	boom := func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") }
	_, err = c.StartTool(bg, catalog.Tool{Name: "panic"}, public, boom)
	require.NoError(t, err)
	_, err = c.CallTool(bg, "panic", nil, "")
	require.ErrorIs(t, err, catalog.ErrRoutePanicked)
	waitReleased(t, rec, "panic")

	func() {
		_, err := c.StartTool(bg, catalog.Tool{Name: "drop"}, public, fleetEcho)
		require.NoError(t, err)
	}()
	waitReleased(t, rec, "drop")

	// Kill, as a claimer that lost its claims calls it: the consumer dies.
	k, err = c.StartTool(bg, catalog.Tool{Name: "kill"}, public, fleetEcho)
	require.NoError(t, err)
	rec.mu.Lock()
	kill := rec.kills["kill"]
	rec.mu.Unlock()
	kill()
	<-k.Done()
	waitReleased(t, rec, "kill")
	_, err = c.CallTool(bg, "kill", nil, "")
	require.True(t, errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone), "%v", err)
}

// An owner that dies after its claim succeeded, before the route is ready,
// fails the start, and the claim is released before Start returns.
func TestClaimerReleasedWhenStartFailsLate(t *testing.T) {
	rec := newRecorder()
	c := newCatalog(t, catalog.Config{Claimer: rec})
	rec.during = func(cl catalog.Claim) { cl.Kill() }
	_, err := c.StartTool(bg, catalog.Tool{Name: "late"}, public, fleetEcho)
	require.ErrorIs(t, err, catalog.ErrDeadOwner)
	held, n := rec.state("late")
	require.False(t, held, "a failed start left its name claimed")
	require.Equal(t, 1, n)
	require.Equal(t, 0, c.ToolEntries())
}

func fleetEcho(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil }
