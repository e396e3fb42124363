package owner_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
)

// completed reads the completed half of the death clock once it settles.
// Tests in this package never run in parallel and wait for every token
// they drop, so the clock moves only by the deaths each test causes; but a
// death counts itself completed a moment after its token reads dead (on
// the cleanup goroutine, for a dropped one), so the read waits for that,
// within a bound.
func completed(t *testing.T) uint64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		c, settled := owner.Deaths()
		if settled {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("the death clock still reads unsettled after 10s: a death stays in progress")
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// awaitDeath collects garbage until r reads dead, and fails the test if it
// never does. Cleanups run asynchronously after a collection, so one GC is
// not enough; the bound is generous because CI machines are slow.
func awaitDeath(t *testing.T, r owner.Ref) {
	t.Helper()
	for range 1000 {
		runtime.GC()
		select {
		case <-r.Done():
			if r.Alive() {
				t.Fatal("Done is closed but the Ref reads alive")
			}
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("a dropped token's Ref still reads alive after 1000 garbage collections")
}

// eventually polls cond every millisecond until it holds, and fails the
// test with what if it does not hold within timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still false after %v: %s", timeout, what)
		}
	}
}

// recovered calls f and returns the value it panicked with, or nil if it
// returned. Since Go 1.21 panic(nil) recovers as a *runtime.PanicNilError,
// so nil means f did not panic.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}
