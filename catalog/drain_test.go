package catalog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// quiet is how long a test gives a goroutine that must not move yet to show
// itself: a broken order moves it at once, so only a passing run waits the
// whole of it.
const quiet = 100 * time.Millisecond

// guard bounds every wait for something that must happen, so that a broken
// drain fails its test within seconds instead of hanging it.
const guard = 2 * time.Second

// waitClosed fails the test unless ch closes within the guard.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("%s did not happen within %v", what, guard)
	}
}

// recvErr returns what ch delivers, and fails the test unless it does
// within the guard.
func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(guard):
		t.Fatalf("%s did not return within %v", what, guard)
		return nil
	}
}

// stopBounded stops k at the end of a test, and gives up after twice the
// guard: a test that failed may leave a body running, or a gate or a death
// that never ends, and its cleanup must not hang the run. A Stop given up
// on is left behind, for goleak to report.
func stopBounded(k *catalog.Consumer) {
	ctx, cancel := context.WithTimeout(bg, guard)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		_ = k.Stop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(2 * guard):
	}
}

// blockingBody returns a tool body that closes entered when it starts and
// returns once proceed is closed. It is for one call.
func blockingBody(entered, proceed chan struct{}) catalog.ToolHandler {
	return func(context.Context, catalog.Call) (catalog.Result, error) {
		close(entered)
		<-proceed
		return catalog.TextResult("done"), nil
	}
}

// The last body to leave wakes a draining Stop. A body leaving the gate
// takes itself off its stripe and then looks whether the gate is closing;
// Stop closes the gate and then looks at the stripes: one of the two sees
// the other. The test starts the Stop between the body's two steps and lets
// it go as far as it can, either to its end (it saw the body gone) or to
// its wait (it saw the body still counted, and the body must then wake it).
// It catches a body that reads closing before it subtracts itself: Stop
// then waits for a wake-up that never comes (in a plain run, 8 hangs in
// 20,000 tries; here, every time).
func TestStopDrainSeesTheLastBodyLeave(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	draining, waits := signal()
	c.SetDrainingHook(draining)
	stopCtx, cancelStop := context.WithCancel(bg)
	defer cancelStop()
	stopped := make(chan error, 1)
	var k *catalog.Consumer
	var armed atomic.Bool
	c.SetLeavingHook(func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		go func() { stopped <- k.Stop(stopCtx) }()
		select {
		case <-waits:
		case err := <-stopped:
			stopped <- err
		case <-time.After(guard):
		}
	})
	entered, proceed := make(chan struct{}), make(chan struct{})
	k = startTool(t, c, bg, "t", public, blockingBody(entered, proceed))
	call := callAsync(c, "t", "")
	waitClosed(t, entered, "the body starting")
	armed.Store(true)
	close(proceed)
	select {
	case err := <-call:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("the call never returned")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		cancelStop()
		<-stopped
		t.Fatal("Stop never returned: its drain missed the wake-up of the last body to leave")
	}
}

// A call that reaches the gate after Stop began draining is refused, or
// else Stop waits for its body: once Stop returns nil no body runs. The
// call resolved the route before Stop removed it, and is let through to the
// gate at the point where the drain has closed the gate and not yet looked
// for calls. It catches a drain that looks at the stripes before it closes
// the gate: it finds nothing to wait for, and the call slips in behind the
// look.
func TestCallDuringDrainIsRefusedOrWaitedFor(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetBeforeAdmitHook(p.hookName)
	entered, proceed := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	var refused error
	call := make(chan error, 1)
	c.SetClosedHook(func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		close(p.release)
		select {
		case <-entered:
		case refused = <-call:
		case <-time.After(guard):
		}
	})
	k := startTool(t, c, bg, "t", public, blockingBody(entered, proceed))
	go func() {
		_, err := c.CallTool(bg, "t", nil, "")
		call <- err
	}()
	waitClosed(t, p.reached, "the call resolving the route")
	armed.Store(true)
	stopped := make(chan error, 1)
	go func() { stopped <- k.Stop(bg) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-entered:
			close(proceed)
			<-call
			t.Fatal("Stop returned nil while a body it admitted during its drain still ran")
		default:
		}
		if !errors.Is(refused, catalog.ErrRouteGone) {
			t.Fatalf("err = %v, want catalog.ErrRouteGone", refused)
		}
	case <-time.After(quiet):
		// Stop waits for a body: it must be the one that slipped in, and
		// Stop must end once that body does.
		close(proceed)
		if err := <-call; err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(guard):
			t.Fatal("Stop never returned after the body it waited for")
		}
	}
}

// A second Stop is a no-op that returns nil at once, even while bodies that
// the first Stop gave up waiting for still run. It catches a Stop that
// drains again on every call.
func TestSecondStopReturnsAtOnce(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	entered, proceed := make(chan struct{}), make(chan struct{})
	k := startTool(t, c, bg, "t", public, blockingBody(entered, proceed))
	call := callAsync(c, "t", "")
	waitClosed(t, entered, "the body starting")
	expired, cancel := context.WithCancel(bg)
	cancel()
	if err := k.Stop(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("the first Stop gives up on the running body: err = %v, want context.Canceled", err)
	}
	second := make(chan error, 1)
	go func() { second <- k.Stop(bg) }()
	select {
	case err := <-second:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(guard):
		close(proceed)
		<-second
		<-call
		t.Fatal("a second Stop waited for the bodies the first left running")
	}
	close(proceed)
	if err := <-call; err != nil {
		t.Fatal(err)
	}
}
