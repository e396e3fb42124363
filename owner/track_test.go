package owner_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
)

func readClock(k *owner.DeathClock) (uint64, bool) { return k.Read() }

// A death ticks exactly the clocks its token is tracked on, once each
// however often it was tracked, and no others.
func TestTrackTicksOnlyTrackedClocks(t *testing.T) {
	var mine, both, other owner.DeathClock
	tok, stranger := owner.New(), owner.New()
	for range 3 {
		if !tok.Ref().Track(&mine) {
			t.Fatal("tok.Ref().Track(&mine) = false, want true")
		}
		if !tok.Ref().Track(&both) {
			t.Fatal("tok.Ref().Track(&both) = false, want true")
		}
	}
	if !stranger.Ref().Track(&both) {
		t.Fatal("stranger.Ref().Track(&both) = false, want true")
	}
	if !stranger.Ref().Track(&other) {
		t.Fatal("stranger.Ref().Track(&other) = false, want true")
	}
	owner.New().Release() // tracked nowhere

	tok.Release()
	for _, tc := range []struct {
		name string
		k    *owner.DeathClock
		want uint64
	}{{"mine", &mine, 1}, {"both", &both, 1}, {"other", &other, 0}} {
		completed, settled := readClock(tc.k)
		if completed != tc.want {
			t.Errorf("%s: completed = %v, want %v", tc.name, completed, tc.want)
		}
		if !settled {
			t.Errorf("%s: settled = false, want true", tc.name)
		}
	}
	stranger.Release()
	completed, _ := readClock(&both)
	if completed != 2 {
		t.Errorf("completed = %v, want 2", completed)
	}
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
		if !tok.Ref().Track(&k) {
			t.Fatal("tok.Ref().Track(&k) = false, want true")
		}
		h := &askHolder{k: &k, ref: tok.Ref()}
		if !tok.Ref().Hold(h) {
			t.Fatal("tok.Ref().Hold(h) = false, want true")
		}

		var atFlip struct{ settled, alive bool }
		restore := owner.SetDeathFlippedHook(func() {
			_, atFlip.settled = k.Read()
			atFlip.alive = tok.Ref().Alive()
		})
		tok.Release()
		restore()

		if !h.alive {
			t.Errorf("token %d: before the flip the token reads alive: h.alive = false, want true", i)
		}
		if h.settled {
			t.Errorf("token %d: the death must be in progress on the clock before the token reads dead: h.settled = true, want false", i)
		}
		if atFlip.alive {
			t.Errorf("token %d: after the flip the token reads dead: atFlip.alive = true, want false", i)
		}
		if atFlip.settled {
			t.Errorf("token %d: the death must not count as completed before the token reads dead: atFlip.settled = true, want false", i)
		}
		completed, settled := k.Read()
		if completed != i+1 {
			t.Errorf("token %d: completed = %v, want %v", i, completed, i+1)
		}
		if !settled {
			t.Errorf("token %d: settled = false, want true", i)
		}
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
				if !dying.Ref().Track(&other) {
					t.Fatal("dying.Ref().Track(&other) = false, want true")
				}
			}
			if !dying.Ref().Enter() {
				t.Fatal("hold the death in progress: dying.Ref().Enter() = false, want true")
			}
			var wg sync.WaitGroup
			wg.Go(dying.Release)
			for dying.Ref().Enter() { // until the death has begun
				dying.Ref().Exit()
			}
			if dying.Ref().Track(&k) {
				t.Error("dying: dying.Ref().Track(&k) = true, want false")
			}
			if dying.Ref().Track(&k) {
				t.Error("dying, asked again: dying.Ref().Track(&k) = true, want false")
			}
			dying.Ref().Exit()
			wg.Wait()

			var late owner.DeathClock
			if dying.Ref().Track(&late) {
				t.Error("dead: dying.Ref().Track(&late) = true, want false")
			}
			dead := owner.New()
			dead.Release()
			if dead.Ref().Track(&late) {
				t.Error("dead: dead.Ref().Track(&late) = true, want false")
			}
			if (owner.Ref{}.Track(&late)) {
				t.Error("zero Ref: owner.Ref{}.Track(&late) = true, want false")
			}
			completed, settled := late.Read()
			if completed != 0 {
				t.Errorf("a token tracked after its death ticked the clock: completed = %v, want 0", completed)
			}
			if !settled {
				t.Error("settled = false, want true")
			}
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
			if !tok.Ref().Track(&other) {
				t.Fatal("tok.Ref().Track(&other) = false, want true")
			}
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
		if !settled {
			t.Fatal("k.Read(): settled = false, want true")
		}
		if tracked {
			attached.Add(1)
			if completed != 1 {
				t.Fatalf("Track reported the clock attached, but the death did not tick it: completed = %v, want 1", completed)
			}
		} else {
			if completed > uint64(1) {
				t.Fatalf("the death ticked the clock more than once: completed = %v, want <= 1", completed)
			}
		}
	}
	t.Logf("%d of %d rounds tracked before the death", attached.Load(), rounds)
}
