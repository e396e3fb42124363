package owner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
)

// heldDeath starts the death of a fresh token held off by a holder, and
// returns once the death has begun and waits for it. let lets it complete;
// released is closed when the Release that started it returns. Each setup
// runs on the token's Ref before the death begins.
func heldDeath(t *testing.T, setup ...func(owner.Ref)) (tok *owner.Token, let func(), released <-chan struct{}) {
	t.Helper()
	tok = owner.New()
	for _, f := range setup {
		f(tok.Ref())
	}
	h := newFlagHolder()
	if !tok.Ref().Hold(h) {
		t.Fatal("tok.Ref().Hold(h) = false, want true")
	}
	h.held.Store(true)
	done := make(chan struct{})
	go func() { tok.Release(); close(done) }()
	waitFor(t, h.asked, "the death asking its holder")
	return tok, func() { h.held.Store(false) }, done
}

// A Release that loses to a death in progress returns only once the token
// reads dead, as Release promises, even when that death is held up. It
// catches a losing Release that returns as soon as it finds the token
// dying.
func TestLosingReleaseWaitsForAHeldDeath(t *testing.T) {
	tok, let, released := heldDeath(t)
	second := make(chan bool, 1)
	go func() {
		tok.Release()
		second <- tok.Alive()
	}()
	select {
	case alive := <-second:
		let()
		<-released
		if alive {
			t.Fatal("a losing Release returned while the token still read alive: alive = true, want false")
		}
	case <-time.After(quiet):
	}
	let()
	waitFor(t, released, "the death")
	select {
	case alive := <-second:
		if alive {
			t.Error("a losing Release returned while the token still read alive: alive = true, want false")
		}
	case <-time.After(guard):
		t.Fatal("a losing Release never returned")
	}
}

// Hold refuses a dying token: a holder attached after the death took its
// list of holders would never be waited for, and a dispatcher relying on
// it would admit calls the death does not wait out. It catches a Hold that
// checks only for a dead token.
func TestHoldRefusesDyingToken(t *testing.T) {
	tok, let, released := heldDeath(t)
	if tok.Ref().Hold(newFlagHolder()) {
		t.Error("Hold attached a holder to a dying token: tok.Ref().Hold(newFlagHolder()) = true, want false")
	}
	let()
	waitFor(t, released, "the death")
}

// A death waits for every holder attached, not just the first: two routes
// of one owner each attach their gate. It catches a death that stops
// asking after its first holder.
func TestDeathWaitsForEveryHolder(t *testing.T) {
	tok := owner.New()
	ref := tok.Ref()
	first, second := newFlagHolder(), newFlagHolder()
	if !ref.Hold(first) {
		t.Fatal("ref.Hold(first) = false, want true")
	}
	if !ref.Hold(second) {
		t.Fatal("ref.Hold(second) = false, want true")
	}
	second.held.Store(true)
	released := make(chan struct{})
	go func() { tok.Release(); close(released) }()
	select {
	case <-second.asked:
	case <-released:
		t.Fatal("the death completed without asking its second holder")
	case <-time.After(guard):
		t.Fatal("the death never asked its second holder")
	}
	if !ref.Alive() {
		t.Error("held by the second holder: the token still reads alive: ref.Alive() = false, want true")
	}
	second.held.Store(false)
	waitFor(t, released, "the death")
}

// Enter announces its hold before it reads the token's state, and a death
// flips the token to dying before it looks at the holds, so one of the two
// always sees the other. The test starts a death inside that window, after
// the announcement and before the read, and lets it run as far as it can.
// Either Enter then refuses, or its hold is one the death waits for: a
// hold taken on a token that has died makes a registry publish an entry
// after its owner's death. It catches an Enter that reads the state before
// it announces itself.
func TestEnterRacingADeathInItsWindow(t *testing.T) {
	tok := owner.New()
	ref := tok.Ref()
	released := make(chan struct{})
	var once sync.Once
	restore := owner.SetEnteringHook(func() {
		once.Do(func() {
			go func() { tok.Release(); close(released) }()
			// A death that sees the hold waits for it; one that missed it
			// runs to its end at once.
			select {
			case <-released:
			case <-time.After(quiet):
			}
		})
	})
	entered := ref.Enter()
	restore()
	if entered {
		if !ref.Alive() {
			t.Error("Enter took a hold that the death did not wait for: the token is dead under it: ref.Alive() = false, want true")
		}
		ref.Exit()
	}
	waitFor(t, released, "the death")
	if ref.Alive() {
		t.Error("ref.Alive() = true, want false")
	}
}
