package owner_test

import (
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
)

// quiet is how long a test gives a goroutine that must not run yet to show
// itself. A broken order starts it at once, so it runs well within this;
// only the passing run waits the whole of it.
const quiet = 100 * time.Millisecond

// guard bounds every wait for something that must happen: a broken death
// fails the test within it instead of hanging until the test binary's
// timeout.
const guard = 2 * time.Second

// waitFor fails the test unless ch closes within the guard.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("%s did not happen within %v", what, guard)
	}
}

// An AfterDeath on a token that is dying (sealed, waiting for a holder)
// must not run its function while the token still reads alive: the
// function stands for a registry reclaiming the owner's entries, which
// would find the owner alive and keep them. It runs once the death
// completes. It catches an AfterDeath that, finding the hooks sealed, runs
// the function at once instead of after Done, and one that appends it to a
// list the death has already taken (it never runs).
func TestAfterDeathOnDyingTokenRunsAfterTheDeath(t *testing.T) {
	tok := owner.New()
	ref := tok.Ref()
	h := newFlagHolder()
	if !ref.Hold(h) {
		t.Fatal("ref.Hold(h) = false, want true")
	}
	h.held.Store(true)
	released := make(chan struct{})
	go func() { tok.Release(); close(released) }()
	waitFor(t, h.asked, "the death asking its holder")

	ran := make(chan bool, 1)
	ref.AfterDeath(func() { ran <- ref.Alive() })
	select {
	case alive := <-ran:
		h.held.Store(false)
		<-released
		t.Fatalf("an after-death function registered on a dying token ran before the death completed (token read alive: %v)", alive)
	case <-time.After(quiet):
	}
	if !ref.Alive() {
		t.Error("held: the token still reads alive: ref.Alive() = false, want true")
	}
	h.held.Store(false)
	waitFor(t, released, "the death")
	select {
	case alive := <-ran:
		if alive {
			t.Error("ran while the token read alive: alive = true, want false")
		}
	case <-time.After(guard):
		t.Fatal("an after-death function registered on a dying token never ran")
	}
}

// The functions a death runs start only once the token reads dead, whether
// they were registered before the death began or while it was under way.
// The death is held just before its flip, the last instant the token reads
// alive: no function may have run by then. It catches a death that starts
// its after-death functions before it waits out its holders or before the
// flip.
func TestAfterDeathFunctionsStartAfterTheFlip(t *testing.T) {
	tok := owner.New()
	ref := tok.Ref()
	ran := make(chan bool, 2)
	ref.AfterDeath(func() { ran <- ref.Alive() })
	early := 0
	restore := owner.SetBeforeFlipHook(func() {
		ref.AfterDeath(func() { ran <- ref.Alive() }) // sealed and dying now
		select {
		case <-ran:
			early++
		case <-time.After(quiet):
		}
	})
	tok.Release()
	restore()
	if early != 0 {
		t.Fatalf("an after-death function ran before the token read dead: early = %v, want 0", early)
	}
	for range 2 {
		select {
		case alive := <-ran:
			if alive {
				t.Error("ran while the token read alive: alive = true, want false")
			}
		case <-time.After(guard):
			t.Fatal("an after-death function never ran")
		}
	}
}
