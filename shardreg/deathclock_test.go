package shardreg_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below pin down the registry's own death clock: only the deaths
// of its owners tick it, every one of them does, and a full register
// trusts it to skip the sweep.

// fullOf fills a registry of the given cap with ready entries, one owner
// each, and counts the sweeps it runs from then on.
func fullOf(t *testing.T, capacity int) (*shardreg.Registry[string], []*owner.Token, *atomic.Int32) {
	r := newReg(t, shardreg.WithCap(capacity))
	toks := make([]*owner.Token, capacity)
	for i := range toks {
		toks[i] = live(t)
		start(t, r, fmt.Sprintf("t%d", i), toks[i])
	}
	sweeps := new(atomic.Int32)
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookSweepBegan {
			sweeps.Add(1)
		}
	})
	return r, toks, sweeps
}

// Owners that hold nothing in the registry die, some of them owners of
// another registry's entries: the registry's sweep stays current, and a
// register at full cap is refused without sweeping. A registry that asked
// the process-wide death clock would sweep after each of them.
func TestUnrelatedDeathsLeaveTheSweepCurrent(t *testing.T) {
	r, toks, sweeps := fullOf(t, 8)
	newcomer := live(t)
	require.ErrorIs(t, r.Register("new", "", newcomer.Ref()), shardreg.ErrCapReached)
	require.Equal(t, int32(1), sweeps.Load(), "the first full register sweeps")
	require.True(t, r.SweepIsCurrent())

	other := newReg(t)
	for i := range 50 {
		owner.New().Release()
		tok := owner.New()
		require.NoError(t, other.RegisterReady(fmt.Sprintf("o%d", i), "", tok.Ref()))
		tok.Release()
		require.True(t, r.SweepIsCurrent(), "after %d unrelated deaths", 2*(i+1))
		require.ErrorIs(t, r.Register("new", "", newcomer.Ref()), shardreg.ErrCapReached)
	}
	assert.Equal(t, int32(1), sweeps.Load(), "unrelated deaths made a full register sweep")
	completed, settled := r.OwnerDeaths()
	assert.Equal(t, uint64(0), completed, "unrelated deaths ticked the registry's clock")
	assert.True(t, settled)

	// A death of one of its own owners does tick it.
	toks[3].Release()
	completed, settled = r.OwnerDeaths()
	assert.Equal(t, uint64(1), completed)
	assert.True(t, settled)
	assert.False(t, r.SweepIsCurrent())
	require.NoError(t, r.Register("new", "", newcomer.Ref()), "the dead owner's slot is reclaimed")
	assert.Equal(t, int32(2), sweeps.Load())
}

// An owner that holds many entries, some of them replaced and removed, is
// tracked once: its death ticks the clock once.
func TestAnOwnerTicksTheClockOnce(t *testing.T) {
	r := newReg(t)
	tok := owner.New()
	for i := range 10 {
		require.NoError(t, r.RegisterReady(fmt.Sprintf("t%d", i), "", tok.Ref()))
		require.NoError(t, r.Overwrite(fmt.Sprintf("t%d", i), "again", tok.Ref()))
	}
	require.True(t, r.UnregisterOwned("t0", tok.Ref()))
	tok.Release()
	completed, settled := r.OwnerDeaths()
	assert.Equal(t, uint64(1), completed)
	assert.True(t, settled)
}

// One of the registry's owners dies after a full register's sweep has
// scanned, before the register decides. The register must see that death
// and sweep again, reclaiming the slot: refusing would be ErrCapReached at
// an instant at which a slot was held by a dead entry.
func TestDeathBetweenSweepAndRefusalIsSeen(t *testing.T) {
	r, toks, sweeps := fullOf(t, 4)
	var once sync.Once
	r.SetHook(func(p shardreg.HookPoint) {
		switch p {
		case shardreg.HookSweepBegan:
			sweeps.Add(1)
		case shardreg.HookSweepEnded:
			once.Do(toks[2].Release)
		}
	})
	require.NoError(t, r.Register("new", "", live(t).Ref()), "the owner that died after the sweep must free its slot")
	assert.Equal(t, int32(2), sweeps.Load(), "a sweep before the death, one after")
	_, ok := r.Resolve("t2")
	assert.False(t, ok)
	assert.Equal(t, 4, r.Len())
}

// An owner's entry becomes visible, a sweep passes with the owner alive,
// and then the owner dies. Its death must tick the registry's clock, so the
// owner has to be tracked before its entry can be seen: tracked after, it
// would die untracked here, and the next full register would trust the
// sweep and refuse although a slot is dead.
func TestOwnerDyingRightAfterItsInsertTicksTheClock(t *testing.T) {
	r := newReg(t, shardreg.WithCap(2))
	start(t, r, "a", live(t))
	b := owner.New()
	var once sync.Once
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookInserted {
			once.Do(func() {
				r.Prune() // finds b alive and vouches for the clock's reading
				b.Release()
			})
		}
	})
	require.NoError(t, r.Register("b", "", b.Ref()))
	r.SetHook(nil)
	assert.False(t, r.SweepIsCurrent(), "b's death did not tick the clock")
	require.NoError(t, r.Register("c", "", live(t).Ref()), "b's dead entry must yield its slot")
	assert.Equal(t, 2, r.Len())
}

// A register whose owner is dying is refused by the tracking, with
// ErrDeadOwner, and only once the death is complete, whether the owner is
// new to the registry or tracked already.
func TestDyingOwnerRefusedByTracking(t *testing.T) {
	for _, tc := range []struct {
		name         string
		trackedFirst bool
	}{
		{"new to the registry", false},
		{"tracked already", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t)
			tok := owner.New()
			if tc.trackedFirst {
				require.NoError(t, r.Register("first", "", tok.Ref()))
			}
			var refused atomic.Bool
			r.SetHook(func(p shardreg.HookPoint) {
				if p == shardreg.HookTrackRefused {
					refused.Store(true)
				}
			})
			require.True(t, tok.Ref().Enter(), "hold tok, as a concurrent register would")
			var wg sync.WaitGroup
			wg.Go(tok.Release)
			waitDying(t, tok.Ref())
			errc := make(chan error, 1)
			go func() { errc <- r.Register("tool", "", tok.Ref()) }()
			select {
			case err := <-errc:
				t.Fatalf("Register returned %v while its owner's death was in progress", err)
			case <-time.After(20 * time.Millisecond):
			}
			tok.Ref().Exit()
			require.ErrorIs(t, <-errc, shardreg.ErrDeadOwner)
			assert.False(t, tok.Alive())
			wg.Wait()
			assert.True(t, refused.Load(), "the tracking refused the dying owner")
			_, held := r.Resolve("tool")
			assert.False(t, held)
			if tc.trackedFirst {
				assert.Equal(t, 1, r.Len())
			} else {
				assert.Equal(t, 0, r.Len())
			}
		})
	}
}

// The owner dies after the register tracked it, before its Compute: the
// check under the bucket lock refuses, nothing is left behind, and the
// slot it reserved is given back.
func TestOwnerDiesAfterItsTracking(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1))
	tok := owner.New()
	var tracked atomic.Bool
	r.SetHook(func(p shardreg.HookPoint) {
		switch p {
		case shardreg.HookTrackRefused:
			t.Error("the tracking refused an owner that was alive")
		case shardreg.HookTracked:
			tracked.Store(true)
			tok.Release()
		}
	})
	require.ErrorIs(t, r.Register("tool", "", tok.Ref()), shardreg.ErrDeadOwner)
	r.SetHook(nil)
	assert.True(t, tracked.Load())
	assert.Equal(t, 0, r.Len())
	assert.Equal(t, 0, r.Entries())
	require.NoError(t, r.Register("other", "", live(t).Ref()), "the slot was given back")
}
