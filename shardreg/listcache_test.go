package shardreg_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
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
	if got := names(r.ListReady()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names(r.ListReady()) = %v, want %v", got, []string{"a", "b"})
	}
	c, settled := r.OwnerDeaths()
	if !settled {
		t.Fatal("r.OwnerDeaths(): settled = false, want true")
	}
	if got := names(r.ListReady()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("served from the cache: names(r.ListReady()) = %v, want %v", got, []string{"a", "b"})
	}

	fake.Store(&reading{completed: c, settled: false})
	dying.Release()
	if got := names(r.ListReady()); !slices.Equal(got, []string{"b"}) {
		t.Errorf("the cache served an owner that reads dead: names(r.ListReady()) = %v, want %v", got, []string{"b"})
	}
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
	if kill.Load() {
		t.Fatal("the listing read the death clock: kill.Load() = true, want false")
	}
	if got := names(r.ListReady()); !slices.Equal(got, []string{"b"}) {
		t.Errorf("the cache served an owner that died before it was stamped: names(r.ListReady()) = %v, want %v", got, []string{"b"})
	}
}

// A lister that finds the cache stale counts itself a waiter before it
// reads how many rebuilds have begun: a rebuild that begins after the read
// then finds it counted and keeps its listing for it. The test runs a whole
// rebuild between the lister's two steps. It catches a lister that reads
// the rebuilds first: the rebuild, finding no waiter, keeps nothing, and
// the lister, seeing that a rebuild began, takes the empty shared listing.
func TestListerCountsItselfBeforeReadingTheRebuilds(t *testing.T) {
	r := newReg(t)
	start(t, r, "a", live(t))
	start(t, r, "b", live(t))
	var armed atomic.Bool
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookListCounted && armed.CompareAndSwap(true, false) {
			other := make(chan []string, 1)
			go func() { other <- names(r.ListReady()) }()
			select {
			case got := <-other:
				if !slices.Equal(got, []string{"a", "b"}) {
					t.Errorf("the rebuild in between: got = %v, want %v", got, []string{"a", "b"})
				}
			case <-time.After(guard):
				t.Error("a rebuild run while a lister waits never returned")
			}
		}
	})
	armed.Store(true)
	got := r.ListReady()
	r.SetHook(nil)
	if armed.Load() {
		t.Fatal("the lister found the cache stale: armed.Load() = true, want false")
	}
	if got := names(got); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the lister took a listing no rebuild kept for it: names(got) = %v, want %v", got, []string{"a", "b"})
	}
}

// A sweep reads the registry's death clock before it scans, so that the
// reading it vouches for was taken before it saw any owner alive. The test
// kills an owner at the first read of the clock after the sweep began. Read
// first, that read comes after the scan, which found the owner alive, and
// the sweep vouches for the older reading: the death moves the clock past
// it, and the register sweeps again and takes the freed slot. Read after
// the scan, the sweep vouches for a reading that counts a death it never
// saw, and the register is refused at full cap while a dead entry holds a
// slot. It catches a sweep that reads the clock after its scan.
func TestSweepReadsTheDeathClockBeforeItsScan(t *testing.T) {
	r, toks, _ := fullOf(t, 4)
	var began, killed atomic.Bool
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookSweepBegan {
			began.Store(true)
		}
	})
	r.SetDeathClock(func() (uint64, bool) {
		if began.Load() && killed.CompareAndSwap(false, true) {
			toks[1].Release()
		}
		return r.OwnerDeaths()
	})
	if err := r.Register("new", "", live(t).Ref()); err != nil {
		t.Fatalf("the dead owner's slot must be swept and taken: %v", err)
	}
	if !killed.Load() {
		t.Fatal("the owner was killed during the register: killed.Load() = false, want true")
	}
	_, ok := r.Resolve("t1")
	if ok {
		t.Error(`r.Resolve("t1"): ok = true, want false`)
	}
	if got := r.Len(); got != 4 {
		t.Errorf("r.Len() = %v, want 4", got)
	}
}
