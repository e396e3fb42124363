package owner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
)

// Track attaches its clock and then reads the token's state; a death flips
// the token to dying and then reads the clocks attached. So a Track that
// reports true is one whose clock the death ticks. The test runs a whole
// death between Track's two steps. It catches a Track that reads the state
// before it attaches the clock: it reports a token alive whose death never
// ticked the clock, and a registry trusting that clock keeps a dead entry
// it believes swept.
func TestTrackRacingADeathInItsWindow(t *testing.T) {
	var k owner.DeathClock
	tok := owner.New()
	ref := tok.Ref()
	released := make(chan struct{})
	var once sync.Once
	restore := owner.SetTrackingHook(func() {
		once.Do(func() {
			go func() { tok.Release(); close(released) }()
			select {
			case <-released:
			case <-time.After(guard):
			}
		})
	})
	tracked := ref.Track(&k)
	restore()
	waitFor(t, released, "the death")
	completed, settled := k.Read()
	if !settled {
		t.Fatal("k.Read(): settled = false, want true")
	}
	if tracked {
		if completed != 1 {
			t.Errorf("Track reported true for a token whose death never ticked its clock: completed = %v, want 1", completed)
		}
	}
	if tracked {
		t.Error("Track reported a dead token alive: tracked = true, want false")
	}
}

// Track refuses a dying token on every path, its own clock's and a further
// clock's fast path alike, even for a clock the death will tick: a register
// that is told the owner is tracked goes on to publish its entry. It
// catches a fast path that reports true without reading the state.
func TestTrackRefusesDyingTokenOnEveryPath(t *testing.T) {
	var first, second owner.DeathClock
	tok, let, released := heldDeath(t, func(r owner.Ref) {
		if !r.Track(&first) {
			t.Fatal("r.Track(&first) = false, want true")
		}
		if !r.Track(&second) {
			t.Fatal("r.Track(&second) = false, want true")
		}
	})
	if tok.Ref().Track(&first) {
		t.Error("the token's own clock: tok.Ref().Track(&first) = true, want false")
	}
	if tok.Ref().Track(&second) {
		t.Error("a further clock it is tracked on: tok.Ref().Track(&second) = true, want false")
	}
	let()
	waitFor(t, released, "the death")
	for _, k := range []*owner.DeathClock{&first, &second} {
		completed, settled := k.Read()
		if completed != 1 {
			t.Errorf("completed = %v, want 1", completed)
		}
		if !settled {
			t.Error("settled = false, want true")
		}
	}
}
