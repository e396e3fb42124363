package shardreg_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below pin down what a listing promises under owner deaths and
// how it treats the other operations: it completes however often owners
// die, it never makes a lookup wait, listers share one rebuild, and the
// cache keeps nothing a change removed.

// An owner somewhere in the process dies between every two reads of the
// death clock: the pace no scan can outrun if it is validated against that
// clock. The listing must still return, with the right snapshot, after a
// handful of clock reads, and the cache must keep serving it while the
// listed owners live. The clock goes back to the real pace after a bound,
// so that a listing that does chase it fails here instead of hanging.
func TestListingCompletesWhileTheDeathClockTicks(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1000))
	const bound = 10_000
	reads := r.TickDeathClock(bound)
	toks := []*owner.Token{live(t), live(t), live(t)}
	var want []string
	for i := range 300 {
		name := fmt.Sprintf("t%03d", i)
		start(t, r, name, toks[i%len(toks)])
		want = append(want, name)
	}
	require.NoError(t, r.Register("starting", "", live(t).Ref()))
	dead := owner.New()
	start(t, r, "dead", dead)
	dead.Release()
	var scans atomic.Int32
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookListScanned {
			scans.Add(1)
		}
	})

	got := r.ListReady()
	assert.Equal(t, want, names(got), "the live, ready entries")
	assert.Equal(t, int32(1), scans.Load(), "one scan: no write landed")
	assert.Less(t, reads(), uint64(10), "the listing read the death clock %d times", reads())
	assert.Equal(t, 301, r.Len(), "the dead entry was reclaimed")

	for range 5 {
		again := r.ListReady()
		assert.Same(t, &got[0], &again[0], "no listed owner died: the cache serves")
	}
	assert.Equal(t, int32(1), scans.Load(), "deaths elsewhere do not make the cache rebuild")
	assert.Less(t, reads(), uint64(bound), "the clock was still ticking")
}

// Two owners die, one after the other, while a listing scans: the first
// scanned entry's owner first, then the other's. The scan read the first
// owner alive and the second dead, and no instant has that: when the
// second died the first was dead already. Trusting the scan's own liveness
// reads would list the first entry; the pass over the owners after the
// scan finds its owner dead and passes again, and the listing is of the
// instant after both deaths.
func TestListingOwnersDyingInScanOrder(t *testing.T) {
	w := newLinRun(t, 3)
	defer w.close()
	s := &script{t: t, w: w}
	s.do(0, linInput{op: linRegisterReady, name: 0, owner: 0})
	s.do(0, linInput{op: linRegisterReady, name: 1, owner: 1})
	fired := false
	w.r.SetScanHook(func(name string) {
		if fired {
			return
		}
		fired = true
		first := int8(slices.Index(linNameStrs[:], name))
		s.do(1, linInput{op: linRelease, owner: first})
		s.do(1, linInput{op: linRelease, owner: 1 - first})
	})
	list := s.do(0, linInput{op: linList})
	w.r.SetScanHook(nil)
	require.True(t, fired)
	assert.Equal(t, [linNames]linSlot{}, list.list, "both owners were dead at the end of the scan")
	checkHistory(t, linModel(3), s.ops, "owners dying in scan order")
}

// Every owner in the registry dies while a listing runs, one more at each
// of its passes over the owners, and the death clock ticks on every read
// besides. Each pass that finds an owner newly dead forces another, but
// deaths are permanent: the listing completes once they run out, within
// twice as many passes as there are owners, plus one, and lists nothing.
func TestListingCompletesWhileEveryOwnerDies(t *testing.T) {
	const owners = 8
	r := newReg(t)
	r.TickDeathClock(1 << 20)
	toks := make([]*owner.Token, owners)
	for i := range toks {
		toks[i] = owner.New()
		for j := range 3 {
			start(t, r, fmt.Sprintf("o%d-%d", i, j), toks[i])
		}
	}
	passes, died := 0, 0
	r.SetHook(func(p shardreg.HookPoint) {
		if p != shardreg.HookLivenessPass {
			return
		}
		passes++
		if died < owners {
			toks[died].Release()
			died++
		}
	})
	got := r.ListReady()
	r.SetHook(nil)
	assert.Empty(t, got, "every owner died before the listing's instant")
	assert.Equal(t, owners, died)
	assert.LessOrEqual(t, passes, 2*owners+1)
	assert.Equal(t, 0, r.Len(), "the listing reclaimed every entry")
}

// A lookup that meets a dead entry while a listing holds writes off must
// not wait for the listing: it misses at once, leaves the entry for later,
// and a later write or listing reclaims it. A lookup that waited would
// reach the gate, which fails the test rather than hang it.
func TestLookupNeverWaitsForAFrozenListing(t *testing.T) {
	r := newReg(t)
	start(t, r, "live", live(t))
	dead := owner.New()
	start(t, r, "dead", dead)
	dead.Release()
	inLookups, checked := false, false
	scans := 0
	r.SetHook(func(p shardreg.HookPoint) {
		switch {
		case p == shardreg.HookGateWait && inLookups:
			t.Fatal("a lookup waited for a listing that holds writes off")
		case p != shardreg.HookListScanned || checked:
		case !r.Frozen():
			// Writes during the scans make the listing freeze.
			scans++
			require.NoError(t, r.RegisterReady(fmt.Sprintf("w%d", scans), "", live(t).Ref()))
		default:
			checked, inLookups = true, true
			_, _, ok := r.Lookup("dead")
			assert.False(t, ok, "Lookup of the dead entry")
			_, ok = r.Resolve("dead")
			assert.False(t, ok, "Resolve of the dead entry")
			v, _, ok := r.Lookup("live")
			assert.True(t, ok, "Lookup of a live entry")
			assert.Equal(t, "v:live", v)
			inLookups = false
			assert.Equal(t, 2+scans, r.Entries(), "the dead entry is left for later")
		}
	})
	got := r.ListReady()
	r.SetHook(nil)
	require.True(t, checked, "the listing must freeze")
	assert.NotContains(t, names(got), "dead")
	assert.Equal(t, 1+scans, r.Len(), "the listing reclaimed the dead entry after its instant")
}

// Listers that find the cache stale together share one rebuild: one scans,
// the others wait for it and take its result, so that writers meet one
// listing, not one per lister. They take it even when a write has made it
// stale by the time they get it: the rebuild began after they started
// waiting, so its listing is of an instant during their calls.
func TestListersShareOneRebuild(t *testing.T) {
	const listers = 4
	r := newReg(t)
	first := live(t)
	start(t, r, "t00", first)
	for i := 1; i < 50; i++ {
		start(t, r, fmt.Sprintf("t%02d", i), live(t))
	}
	var waiting, scans atomic.Int32
	var wrote atomic.Bool
	r.SetHook(func(p shardreg.HookPoint) {
		switch p {
		case shardreg.HookListWait:
			// Every lister has found the cache stale before any rebuild
			// begins.
			waiting.Add(1)
			for waiting.Load() < listers {
				runtime.Gosched()
			}
		case shardreg.HookListScanned:
			scans.Add(1)
		case shardreg.HookBeforeCacheStore:
			if !wrote.Swap(true) {
				require.True(t, r.UnregisterOwned("t00", first.Ref()))
			}
		}
	})
	lists := make([][]shardreg.Entry[string], listers)
	var wg sync.WaitGroup
	for i := range listers {
		wg.Go(func() { lists[i] = r.ListReady() })
	}
	wg.Wait()
	r.SetHook(nil)
	assert.Equal(t, int32(1), scans.Load(), "one rebuild for every waiting lister")
	for _, l := range lists {
		require.NotEmpty(t, l)
		assert.Same(t, &lists[0][0], &l[0])
		assert.Equal(t, "t00", l[0].Name, "the listing of the rebuild's instant")
	}
	assert.False(t, r.SharedListing(), "the last lister served lets go of the shared listing")
	assert.NotContains(t, names(r.ListReady()), "t00")
}

// A lister that comes to wait while a rebuild is already under way cannot
// use that rebuild's result as it is (it began before the call), but when
// no write has landed since, the rebuild has cached what it needs: it takes
// the cache rather than rebuild again.
func TestListerArrivingMidRebuildTakesItsCache(t *testing.T) {
	r := newReg(t)
	for i := range 50 {
		start(t, r, fmt.Sprintf("t%02d", i), live(t))
	}
	var scans atomic.Int32
	var late []shardreg.Entry[string]
	arrived := make(chan struct{})
	var wg sync.WaitGroup
	r.SetHook(func(p shardreg.HookPoint) {
		switch p {
		case shardreg.HookListScanned:
			if scans.Add(1) == 1 {
				wg.Go(func() { late = r.ListReady() })
				<-arrived
			}
		case shardreg.HookListWait:
			if scans.Load() == 1 {
				close(arrived)
			}
		}
	})
	first := r.ListReady()
	wg.Wait()
	r.SetHook(nil)
	assert.Equal(t, int32(1), scans.Load(), "the late lister rebuilt what was cached")
	assert.Same(t, &first[0], &late[0])
}

// The cached listing keeps the values and owners of its entries reachable.
// The first change drops it, so a removed entry does not outlive its
// removal there; that includes a change that lands after a listing was
// taken and before it was cached.
func TestCachedListingDropsRemovedEntries(t *testing.T) {
	r := newReg(t)
	a := live(t)
	start(t, r, "a", a)
	start(t, r, "b", live(t))
	_ = r.ListReady()
	require.True(t, r.Cached())
	require.False(t, r.MarkReady("zzz", a.Ref()), "a write that changes nothing...")
	require.True(t, r.Cached(), "...keeps the cache")
	require.True(t, r.UnregisterOwned("a", a.Ref()))
	assert.False(t, r.Cached(), "an unregister drops the cache")

	fired := false
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookBeforeCacheStore && !fired {
			fired = true
			require.NoError(t, r.RegisterReady("c", "", live(t).Ref()))
		}
	})
	got := r.ListReady()
	r.SetHook(nil)
	require.True(t, fired)
	assert.Equal(t, []string{"b"}, names(got))
	assert.False(t, r.Cached(), "a write that overtook the listing before it was cached drops it")
	assert.Equal(t, []string{"b", "c"}, names(r.ListReady()))
	assert.True(t, r.Cached())
}

// The random check with owners dying elsewhere in the process all along,
// as consumers come and go in other registries: the process-wide death
// clock moves between any two reads, and the registry's own must not.
func TestLinearizabilityUnrelatedDeaths(t *testing.T) {
	histories := 1000
	if *long {
		histories = 10000
	} else if testing.Short() {
		histories = 50
	}
	var stop atomic.Bool
	var deaths atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for !stop.Load() {
			owner.New().Release()
			if deaths.Add(1)%16 == 0 {
				runtime.Gosched()
			}
		}
	})
	defer func() { stop.Store(true); killer.Wait() }()
	base := rand.Uint64()
	unknown := 0
	for h := range histories {
		seed := base + uint64(h)
		p := linParams{clients: 4 + h%3, opsPerClient: 12 + h%12, capacity: 1 + h%linNames}
		history := recordHistory(t, seed, p)
		switch checkHistory(t, linModel(p.capacity), history, fmt.Sprintf("seed %d, %+v", seed, p)) {
		case porcupine.Illegal:
			t.FailNow()
		case porcupine.Unknown:
			unknown++
		}
	}
	t.Logf("%d histories, %d unrelated deaths, %d undecided", histories, deaths.Load(), unknown)
	require.LessOrEqual(t, unknown, histories/20, "histories the checker could not decide in time")
}
