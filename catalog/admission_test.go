package catalog_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// pause is a test hook that stops the first goroutine to reach it until the
// test lets it go; later arrivals pass straight through.
type pause struct {
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func newPause() *pause {
	p := &pause{reached: make(chan struct{}), release: make(chan struct{})}
	p.armed.Store(true)
	return p
}

func (p *pause) hook() {
	if p.armed.CompareAndSwap(true, false) {
		close(p.reached)
		<-p.release
	}
}

func (p *pause) hookName(string) { p.hook() }

// signal is a hook that tells the test, once, that it ran.
func signal() (hook func(), ran <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }, ch
}

// countingBody counts its runs and answers "ran".
func countingBody(runs *atomic.Int64) catalog.ToolHandler {
	return func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.TextResult("ran"), nil
	}
}

// callAsync calls name in a goroutine of its own and returns where its
// error arrives.
func callAsync(c *catalog.Catalog, name, credential string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(bg, name, nil, credential)
		errc <- err
	}()
	return errc
}

// The Dekker race between a starting call and a draining Stop: the call has
// announced itself and not yet read the owner's state when Stop closes the
// gate. Stop must wait for it, and the call must then see the gate closed
// and not run its body. It catches a gate that reads its flags before it
// announces the call (Stop finds nothing to wait for, returns, and the body
// starts after Stop returned) and a drain that does not wait.
func TestStopWaitsForAnnouncedCall(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetAdmittingHook(p.hook)
	draining, waits := signal()
	c.SetDrainingHook(draining)
	// Without the drain's wait, Stop goes straight on to kill the owner,
	// whose death then waits for the paused admission: that is the failure
	// this hook reports, instead of a hang.
	held, killing := signal()
	c.SetHeldHook(held)
	var runs atomic.Int64
	k := startTool(t, c, bg, "t", public, countingBody(&runs))

	call := callAsync(c, "t", "")
	<-p.reached
	stopped := make(chan error, 1)
	go func() { stopped <- k.Stop(bg) }()
	select {
	case <-waits:
	case <-killing:
		close(p.release)
		<-call
		<-stopped
		t.Fatalf("Stop killed the owner without waiting for a call being admitted; the body ran %d times", runs.Load())
	case err := <-stopped:
		close(p.release)
		<-call
		t.Fatalf("Stop returned (%v) while a call was being admitted; the body then ran %d times", err, runs.Load())
	}
	close(p.release)
	if err := <-call; !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("a body started for a call Stop had closed the gate on: runs.Load() = %v, want 0", got)
	}
}

// A call resolved and guarded the route before Stop began and reaches the
// gate after Stop returned: its body must not run. It catches a gate that
// checks neither its closing flag nor the owner.
func TestCallResolvedBeforeStopNeverRuns(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetBeforeAdmitHook(p.hookName)
	var runs atomic.Int64
	k := startTool(t, c, bg, "t", public, countingBody(&runs))

	call := callAsync(c, "t", "")
	<-p.reached
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	if err := <-call; !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("a body started after Stop returned: runs.Load() = %v, want 0", got)
	}
}

// A death waits out an admission in progress, so that every admitted body
// was admitted before the death completed: the owner must still read alive
// while the admission is paused, and the body, admitted, runs. It catches a
// gate that is not attached to its owner's death (the weak form: the death
// completes under a call that already read the owner alive).
func TestDeathWaitsForAdmission(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetAdmittingHook(p.hook)
	held, waits := signal()
	c.SetHeldHook(held)
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k := startTool(t, c, ctx, "t", public, countingBody(&runs))

	call := callAsync(c, "t", "")
	<-p.reached
	go cancel()
	select {
	case <-waits:
	case <-k.Done():
		close(p.release)
		<-call
		t.Fatal("the owner's death completed during an admission in progress")
	}
	if !k.Owner().Alive() {
		t.Errorf("a death waiting for an admission reads alive: k.Owner().Alive() is false")
	}
	close(p.release)
	if err := recvErr(t, call, "the call"); err != nil {
		t.Fatalf("the call was admitted before the death: %v", err)
	}
	waitClosed(t, k.Done(), "the death")
	if got := runs.Load(); got != int64(1) {
		t.Errorf("runs.Load() = %v, want %v", got, int64(1))
	}
}

// A death completes after a call's guard admitted it and before the gate:
// the body must not run. It catches a gate that does not re-check the
// owner (the guard, which a dead owner's plan would also stop, is behind).
func TestDeathBetweenGuardAndGate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetBeforeAdmitHook(p.hookName)
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k := startTool(t, c, ctx, "t", public, countingBody(&runs))

	call := callAsync(c, "t", "")
	<-p.reached
	cancel()
	<-k.Done()
	close(p.release)
	if err := <-call; !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("a body started after its owner's death completed: runs.Load() = %v, want 0", got)
	}
}

// A call waits for a slot while its owner dies; when the slot frees, the
// body must not run. It catches a limiter whose waiter runs the body on the
// slot it finally gets without passing the gate again.
func TestDeathWhileWaitingForSlot(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	started := make(chan struct{}, 1)
	k, err := c.StartTool(ctx, catalog.Tool{Name: "t"}, public, func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return catalog.TextResult("ran"), nil
	}, catalog.WithMaxConcurrent(1))
	if err != nil {
		t.Fatal(err)
	}

	first := callAsync(c, "t", "")
	<-started
	waiting := callAsync(c, "t", "")
	for k.Waiting() != 1 {
		// The waiter has not reached the waiting room yet.
		<-yield()
	}
	cancel()
	waitClosed(t, k.Done(), "the death")
	err = recvErr(t, waiting, "the waiting call")
	close(release)
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if err := recvErr(t, first, "the first call"); err != nil {
		t.Fatalf("the body admitted before the death completes: %v", err)
	}
	if got := runs.Load(); got != int64(1) {
		t.Errorf("the waiting call's body ran after the death: runs.Load() = %v, want %v", got, int64(1))
	}
}

// yield returns a channel that is ready after the scheduler has run others.
func yield() <-chan struct{} {
	ch := make(chan struct{})
	go close(ch)
	return ch
}

// planWindow sets up the window the plan binding must hold in: owner A, with
// a plan that requires role a, is alive while its Stop is paused between
// removing its entry and closing its gate, and a call without credentials
// that resolved A's entry before the Stop is paused between its lookup and
// its guard. between runs in that window; then the call goes on, and the
// test returns how often A's body ran and the call's error.
func planWindow(t *testing.T, cfg catalog.Config, between func(c *catalog.Catalog)) (runs int64, err error) {
	t.Helper()
	cfg.Authenticator = tokens
	c := newCatalog(t, cfg)
	lookup, drain := newPause(), newPause()
	c.SetAfterLookupHook(lookup.hookName)
	c.SetBeforeDrainHook(drain.hookName)
	var runsA atomic.Int64
	a := startTool(t, c, bg, "t", bindsec.Plan{Roles: []string{"a"}}, countingBody(&runsA))

	call := callAsync(c, "t", "")
	<-lookup.reached
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop(bg) }()
	<-drain.reached
	if !a.Owner().Alive() {
		t.Fatalf("A is alive while its Stop drains: a.Owner().Alive() is false")
	}
	between(c)
	close(lookup.release)
	err = <-call
	close(drain.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	return runsA.Load(), err
}

// In the window, successor B takes the name with a public plan. The call
// resolved A's entry, so A's plan judges it: it has no credential, and A's
// route has left the name, so it gets ErrRouteGone (retry), not a denial.
// It catches dispatch that judges a call by whatever plan the name holds:
// B's public plan would let A's role-protected body run for a caller
// without credentials.
func TestPlanBoundToEntryOwnerNotSuccessor(t *testing.T) {
	runs, err := planWindow(t, catalog.Config{}, func(c *catalog.Catalog) {
		b := startTool(t, c, bg, "t", public, reply("b"))
		t.Cleanup(func() { _ = b.Stop(bg) })
	})
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Errorf("err = %v, want catalog.ErrRouteGone", err)
	}
	if runs != 0 {
		t.Errorf("A's role-protected body ran without credentials, under B's public plan: runs = %v, want 0", runs)
	}
}

// In the window, successor B takes the name with a role plan and stops, so
// that no plan is left at all. A registered a plan, so the missing-plan
// mode (pass-through here) must not apply: the call gets ErrRouteGone. It
// catches dispatch that falls back to the missing-plan mode whenever no
// plan is found.
func TestPlanGoneIsNotMissingPlan(t *testing.T) {
	runs, err := planWindow(t, catalog.Config{MissingPlan: bindsec.PassThrough}, func(c *catalog.Catalog) {
		b := startTool(t, c, bg, "t", bindsec.Plan{Roles: []string{"b"}}, reply("b"))
		if err := b.Stop(bg); err != nil {
			t.Fatal(err)
		}
	})
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Errorf("err = %v, want catalog.ErrRouteGone", err)
	}
	if runs != 0 {
		t.Errorf("A's role-protected body ran without credentials, passed through: runs = %v, want 0", runs)
	}
}

// Thousands of callers give up while waiting for a slot: each gets its
// ctx's error, and not one slot leaks, so the route still runs n bodies at
// once, and no more.
func TestWaitingCancellationsLeakNoSlot(t *testing.T) {
	const n, waves, perWave = 4, 10, 300
	c := newCatalog(t, catalog.Config{})
	var gate atomic.Pointer[chan struct{}]
	block := func() chan struct{} {
		ch := make(chan struct{})
		gate.Store(&ch)
		return ch
	}
	started := make(chan struct{}, n+1)
	k, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
		ch := *gate.Load()
		started <- struct{}{}
		<-ch
		return catalog.TextResult("ran"), nil
	}, catalog.WithMaxConcurrent(n), catalog.WithWaitingRoom(perWave))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopBounded(k) })

	// fill starts n calls and waits until all n bodies run.
	fill := func() []<-chan error {
		calls := make([]<-chan error, n)
		for i := range calls {
			calls[i] = callAsync(c, "t", "")
		}
		for range n {
			waitFor(t, started, "a body to start")
		}
		return calls
	}
	open := block()
	busy := fill()
	for wave := range waves {
		ctx, cancel := context.WithCancel(bg)
		errs := make(chan error, perWave)
		for range perWave {
			go func() {
				_, err := c.CallTool(ctx, "t", nil, "")
				errs <- err
			}()
		}
		until(t, func() bool { return k.Waiting() == perWave }, "every call of the wave to wait")
		cancel()
		for range perWave {
			if err := recvErr(t, errs, "a cancelled call"); !errors.Is(err, context.Canceled) {
				t.Fatalf("wave %d: err = %v, want context.Canceled", wave, err)
			}
		}
	}
	if got := k.Waiting(); got != 0 {
		t.Fatalf("k.Waiting() = %v, want 0", got)
	}
	if got := k.Running(); got != int64(n) {
		t.Fatalf("k.Running() = %v, want %v", got, int64(n))
	}
	close(open)
	for _, e := range busy {
		if err := recvErr(t, e, "a running call"); err != nil {
			t.Fatal(err)
		}
	}

	// Every slot came back: n new calls run at once, one more waits.
	open = block()
	calls := make([]<-chan error, n)
	for i := range calls {
		calls[i] = callAsync(c, "t", "")
	}
	deadline := time.After(guard)
	for ran := 0; ran < n; {
		select {
		case <-deadline:
			t.Fatalf("%d of %d bodies ran within %v", ran, n, guard)
		case <-started:
			ran++
		default:
			if got := k.Waiting(); got != 0 {
				t.Fatalf("a call waits with %d of %d bodies running: a slot leaked: k.Waiting() = %v, want 0", ran, n, got)
			}
			<-yield()
		}
	}
	extra := callAsync(c, "t", "")
	until(t, func() bool { return k.Waiting() == 1 }, "one call to wait")
	if got := k.Running(); got != int64(n) {
		t.Fatalf("k.Running() = %v, want %v", got, int64(n))
	}
	close(open)
	for _, e := range calls {
		if err := recvErr(t, e, "a call"); err != nil {
			t.Fatal(err)
		}
	}
	if err := recvErr(t, extra, "the call that waited"); err != nil {
		t.Fatal(err)
	}
}

// waitFor fails the test unless ch delivers within the guard.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("%s did not happen within %v", what, guard)
	}
}

// until yields until cond holds, and fails the test unless it does within
// the guard.
func until(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", guard, what)
		}
		<-yield()
	}
}
