package shardreg_test

import (
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reading is a death clock reading a test presents to the registry.
type reading struct {
	completed uint64
	settled   bool
}

// A cached listing never serves a dead owner's entry while that owner's
// death is in progress on the registry's clock: between the owner's flip
// to dead and its completion tick, the clock reads the old count,
// unsettled. A real death holds that reading for nanoseconds, so the test
// presents it. The cache may trust the count only with its settled mark;
// otherwise it must look at the listed owners. It catches a cache that
// compares the count alone.
func TestCachedListingDropsAnOwnerWhoseDeathIsInProgress(t *testing.T) {
	r := newReg(t)
	dying := owner.New()
	defer dying.Release()
	start(t, r, "a", dying)
	start(t, r, "b", live(t))
	var fake atomic.Pointer[reading]
	r.SetDeathClock(func() (uint64, bool) {
		if f := fake.Load(); f != nil {
			return f.completed, f.settled
		}
		return r.OwnerDeaths()
	})
	require.Equal(t, []string{"a", "b"}, names(r.ListReady()))
	c, settled := r.OwnerDeaths()
	require.True(t, settled)
	require.Equal(t, []string{"a", "b"}, names(r.ListReady()), "served from the cache")

	fake.Store(&reading{completed: c, settled: false})
	dying.Release()
	assert.Equal(t, []string{"b"}, names(r.ListReady()), "the cache served an owner that reads dead")
}

// A listing reads the registry's death clock before its liveness pass, so
// that the reading it stamps the cache with was taken before it saw the
// listed owners alive. The test kills a listed owner inside that reading.
// Read first, the pass then finds the owner dead and leaves it out; read
// after the pass, the reading counts the death, the cache is stamped with
// it, and the next listing serves the dead owner's entry in O(1). It
// catches a listing that reads the clock after its pass.
func TestListingReadsTheDeathClockBeforeItsPass(t *testing.T) {
	r := newReg(t)
	victim := owner.New()
	defer victim.Release()
	start(t, r, "a", victim)
	start(t, r, "b", live(t))
	var kill atomic.Bool
	r.SetDeathClock(func() (uint64, bool) {
		if kill.CompareAndSwap(true, false) {
			victim.Release()
		}
		return r.OwnerDeaths()
	})
	kill.Store(true)
	r.ListReady() // a listing of an instant before or after the death: both are right
	require.False(t, kill.Load(), "the listing read the death clock")
	assert.Equal(t, []string{"b"}, names(r.ListReady()), "the cache served an owner that died before it was stamped")
}
