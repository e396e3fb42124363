package owner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.True(t, tok.Ref().Hold(h))
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
		require.False(t, alive, "a losing Release returned while the token still read alive")
	case <-time.After(quiet):
	}
	let()
	waitFor(t, released, "the death")
	select {
	case alive := <-second:
		assert.False(t, alive, "a losing Release returned while the token still read alive")
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
	assert.False(t, tok.Ref().Hold(newFlagHolder()), "Hold attached a holder to a dying token")
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
	require.True(t, ref.Hold(first))
	require.True(t, ref.Hold(second))
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
	assert.True(t, ref.Alive(), "held by the second holder: the token still reads alive")
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
		assert.True(t, ref.Alive(), "Enter took a hold that the death did not wait for: the token is dead under it")
		ref.Exit()
	}
	waitFor(t, released, "the death")
	assert.False(t, ref.Alive())
}
