package owner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.True(t, settled)
	if tracked {
		assert.Equal(t, uint64(1), completed, "Track reported true for a token whose death never ticked its clock")
	}
	assert.False(t, tracked, "Track reported a dead token alive")
}

// Track refuses a dying token on every path, its own clock's and a further
// clock's fast path alike, even for a clock the death will tick: a register
// that is told the owner is tracked goes on to publish its entry. It
// catches a fast path that reports true without reading the state.
func TestTrackRefusesDyingTokenOnEveryPath(t *testing.T) {
	var first, second owner.DeathClock
	tok, let, released := heldDeath(t, func(r owner.Ref) {
		require.True(t, r.Track(&first))
		require.True(t, r.Track(&second))
	})
	assert.False(t, tok.Ref().Track(&first), "the token's own clock")
	assert.False(t, tok.Ref().Track(&second), "a further clock it is tracked on")
	let()
	waitFor(t, released, "the death")
	for _, k := range []*owner.DeathClock{&first, &second} {
		completed, settled := k.Read()
		assert.Equal(t, uint64(1), completed)
		assert.True(t, settled)
	}
}
