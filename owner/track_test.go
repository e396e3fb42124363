package owner_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readClock(k *owner.DeathClock) (uint64, bool) { return k.Read() }

// A death ticks exactly the clocks its token is tracked on, once each
// however often it was tracked, and no others.
func TestTrackTicksOnlyTrackedClocks(t *testing.T) {
	var mine, both, other owner.DeathClock
	tok, stranger := owner.New(), owner.New()
	for range 3 {
		require.True(t, tok.Ref().Track(&mine))
		require.True(t, tok.Ref().Track(&both))
	}
	require.True(t, stranger.Ref().Track(&both))
	require.True(t, stranger.Ref().Track(&other))
	owner.New().Release() // tracked nowhere

	tok.Release()
	for _, tc := range []struct {
		name string
		k    *owner.DeathClock
		want uint64
	}{{"mine", &mine, 1}, {"both", &both, 1}, {"other", &other, 0}} {
		completed, settled := readClock(tc.k)
		assert.Equal(t, tc.want, completed, tc.name)
		assert.True(t, settled, tc.name)
	}
	stranger.Release()
	completed, _ := readClock(&both)
	assert.Equal(t, uint64(2), completed)
}

// askHolder reads a clock and its token's liveness the first time a death
// asks whether it is held: the moment between the death's start and its
// flip to dead.
type askHolder struct {
	once    sync.Once
	k       *owner.DeathClock
	ref     owner.Ref
	settled bool
	alive   bool
}

func (h *askHolder) Held() bool {
	h.once.Do(func() {
		_, h.settled = h.k.Read()
		h.alive = h.ref.Alive()
	})
	return false
}

// A tracked death is in progress on the clock while the token still reads
// alive, and completes only after it reads dead: the order that lets two
// equal settled readings prove no tracked token died in between.
//
// The clock is striped by token ID; successive tokens cover every stripe.
func TestTrackedDeathInProgressAroundTheFlip(t *testing.T) {
	var k owner.DeathClock
	for i := range uint64(32) {
		tok := owner.New()
		require.True(t, tok.Ref().Track(&k))
		h := &askHolder{k: &k, ref: tok.Ref()}
		require.True(t, tok.Ref().Hold(h))

		var atFlip struct{ settled, alive bool }
		restore := owner.SetDeathFlippedHook(func() {
			_, atFlip.settled = k.Read()
			atFlip.alive = tok.Ref().Alive()
		})
		tok.Release()
		restore()

		assert.True(t, h.alive, "token %d: before the flip the token reads alive", i)
		assert.False(t, h.settled, "token %d: the death must be in progress on the clock before the token reads dead", i)
		assert.False(t, atFlip.alive, "token %d: after the flip the token reads dead", i)
		assert.False(t, atFlip.settled, "token %d: the death must not count as completed before the token reads dead", i)
		completed, settled := k.Read()
		assert.Equal(t, i+1, completed, "token %d", i)
		assert.True(t, settled, "token %d", i)
	}
}

// Track refuses a token whose death has begun, a dead one and the zero Ref.
// A dead token's clock list is final: tracking it afterwards ticks nothing.
// (A token refused while dying may still tick the clock: one sweep too many
// for its registry, never one too few.)
func TestTrackRefusesDyingAndDead(t *testing.T) {
	for _, second := range []bool{false, true} {
		name := "first clock"
		if second {
			name = "second clock"
		}
		t.Run(name, func(t *testing.T) {
			var other, k owner.DeathClock
			dying := owner.New()
			if second {
				require.True(t, dying.Ref().Track(&other))
			}
			require.True(t, dying.Ref().Enter(), "hold the death in progress")
			var wg sync.WaitGroup
			wg.Go(dying.Release)
			for dying.Ref().Enter() { // until the death has begun
				dying.Ref().Exit()
			}
			assert.False(t, dying.Ref().Track(&k), "dying")
			assert.False(t, dying.Ref().Track(&k), "dying, asked again")
			dying.Ref().Exit()
			wg.Wait()

			var late owner.DeathClock
			assert.False(t, dying.Ref().Track(&late), "dead")
			dead := owner.New()
			dead.Release()
			assert.False(t, dead.Ref().Track(&late), "dead")
			assert.False(t, owner.Ref{}.Track(&late), "zero Ref")
			completed, settled := late.Read()
			assert.Equal(t, uint64(0), completed, "a token tracked after its death ticked the clock")
			assert.True(t, settled)
		})
	}
}

// Track races the death, as the token's first clock and as a further one:
// whenever it reports the clock attached, the death ticks it, once.
func TestTrackRacingDeath(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	var attached atomic.Int64
	for round := range rounds {
		var k, other owner.DeathClock
		tok := owner.New()
		if round%4 >= 2 { // then k is the token's second clock
			require.True(t, tok.Ref().Track(&other))
		}
		var tracked bool
		var wg sync.WaitGroup
		barrier := make(chan struct{})
		// Stagger one side or the other, so that both orders come up.
		wait := func(side int) {
			if round%2 == side {
				for range round % 16 {
					runtime.Gosched()
				}
			}
		}
		wg.Go(func() { <-barrier; wait(0); tok.Release() })
		wg.Go(func() { <-barrier; wait(1); tracked = tok.Ref().Track(&k) })
		close(barrier)
		wg.Wait()
		completed, settled := k.Read()
		require.True(t, settled)
		if tracked {
			attached.Add(1)
			require.Equal(t, uint64(1), completed, "Track reported the clock attached, but the death did not tick it")
		} else {
			require.LessOrEqual(t, completed, uint64(1), "the death ticked the clock more than once")
		}
	}
	t.Logf("%d of %d rounds tracked before the death", attached.Load(), rounds)
}
