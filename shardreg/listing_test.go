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
	if err := r.Register("starting", "", live(t).Ref()); err != nil {
		t.Fatalf("r.Register: %v", err)
	}
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
	if got := names(got); !slices.Equal(got, want) {
		t.Errorf("the live, ready entries: names(got) = %v, want %v", got, want)
	}
	if got := scans.Load(); got != 1 {
		t.Errorf("one scan: no write landed: scans.Load() = %v, want 1", got)
	}
	if got := reads(); got >= 10 {
		t.Errorf("the listing read the death clock %d times, want < 10", got)
	}
	if got := r.Len(); got != 301 {
		t.Errorf("the dead entry was reclaimed: r.Len() = %v, want 301", got)
	}

	for range 5 {
		again := r.ListReady()
		if &again[0] != &got[0] {
			t.Errorf("no listed owner died: the cache serves: &again[0] = %p, want the same pointer as &got[0] = %p", &again[0], &got[0])
		}
	}
	if got := scans.Load(); got != 1 {
		t.Errorf("deaths elsewhere do not make the cache rebuild: scans.Load() = %v, want 1", got)
	}
	if got := reads(); got >= uint64(bound) {
		t.Errorf("the clock was still ticking: %d reads, want < %d", got, bound)
	}
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
	if !fired {
		t.Fatal("fired = false, want true")
	}
	if list.list != ([linNames]linSlot{}) {
		t.Errorf("both owners were dead at the end of the scan: list.list = %v, want %v", list.list, [linNames]linSlot{})
	}
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
	if len(got) != 0 {
		t.Errorf("every owner died before the listing's instant: got = %v, want empty", got)
	}
	if died != owners {
		t.Errorf("died = %v, want %v", died, owners)
	}
	if passes > 2*owners+1 {
		t.Errorf("passes = %d, want at most %d", passes, 2*owners+1)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("the listing reclaimed every entry: r.Len() = %v, want 0", got)
	}
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
			if err := r.RegisterReady(fmt.Sprintf("w%d", scans), "", live(t).Ref()); err != nil {
				t.Fatalf("r.RegisterReady: %v", err)
			}
		default:
			checked, inLookups = true, true
			_, _, ok := r.Lookup("dead")
			if ok {
				t.Error("Lookup of the dead entry: ok = true, want false")
			}
			_, ok = r.Resolve("dead")
			if ok {
				t.Error("Resolve of the dead entry: ok = true, want false")
			}
			v, _, ok := r.Lookup("live")
			if !ok {
				t.Error("Lookup of a live entry: ok = false, want true")
			}
			if v != "v:live" {
				t.Errorf(`v = %q, want "v:live"`, v)
			}
			inLookups = false
			if got := r.Entries(); got != 2+scans {
				t.Errorf("the dead entry is left for later: r.Entries() = %v, want %v", got, 2+scans)
			}
		}
	})
	got := r.ListReady()
	r.SetHook(nil)
	if !checked {
		t.Fatal("the listing must freeze: checked = false, want true")
	}
	if n := names(got); slices.Contains(n, "dead") {
		t.Errorf("the listing %v holds \"dead\", whose owner died before its instant", n)
	}
	if got := r.Len(); got != 1+scans {
		t.Errorf("the listing reclaimed the dead entry after its instant: r.Len() = %v, want %v", got, 1+scans)
	}
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
				if !r.UnregisterOwned("t00", first.Ref()) {
					t.Fatal(`r.UnregisterOwned("t00", first.Ref()) = false, want true`)
				}
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
	if got := scans.Load(); got != 1 {
		t.Errorf("one rebuild for every waiting lister: scans.Load() = %v, want 1", got)
	}
	for _, l := range lists {
		if len(l) == 0 {
			t.Fatal("a waiting lister got an empty listing, want the rebuild's")
		}
		if &l[0] != &lists[0][0] {
			t.Errorf("&l[0] = %p, want the same pointer as &lists[0][0] = %p", &l[0], &lists[0][0])
		}
		if got := l[0].Name; got != "t00" {
			t.Errorf(`the listing of the rebuild's instant: l[0].Name = %q, want "t00"`, got)
		}
	}
	if r.SharedListing() {
		t.Error("the last lister served lets go of the shared listing: r.SharedListing() = true, want false")
	}
	if n := names(r.ListReady()); slices.Contains(n, "t00") {
		t.Errorf("the listing %v holds \"t00\", want it gone", n)
	}
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
	if got := scans.Load(); got != 1 {
		t.Errorf("the late lister rebuilt what was cached: scans.Load() = %v, want 1", got)
	}
	if &late[0] != &first[0] {
		t.Errorf("&late[0] = %p, want the same pointer as &first[0] = %p", &late[0], &first[0])
	}
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
	if !r.Cached() {
		t.Fatal("r.Cached() = false, want true")
	}
	if r.MarkReady("zzz", a.Ref()) {
		t.Fatal(`a write that changes nothing...: r.MarkReady("zzz", a.Ref()) = true, want false`)
	}
	if !r.Cached() {
		t.Fatal("...keeps the cache: r.Cached() = false, want true")
	}
	if !r.UnregisterOwned("a", a.Ref()) {
		t.Fatal(`r.UnregisterOwned("a", a.Ref()) = false, want true`)
	}
	if r.Cached() {
		t.Error("an unregister drops the cache: r.Cached() = true, want false")
	}

	fired := false
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookBeforeCacheStore && !fired {
			fired = true
			if err := r.RegisterReady("c", "", live(t).Ref()); err != nil {
				t.Fatalf(`r.RegisterReady("c", "", live(t).Ref()): %v`, err)
			}
		}
	})
	got := r.ListReady()
	r.SetHook(nil)
	if !fired {
		t.Fatal("fired = false, want true")
	}
	if got := names(got); !slices.Equal(got, []string{"b"}) {
		t.Errorf("names(got) = %v, want %v", got, []string{"b"})
	}
	if r.Cached() {
		t.Error("a write that overtook the listing before it was cached drops it: r.Cached() = true, want false")
	}
	if got := names(r.ListReady()); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("names(r.ListReady()) = %v, want %v", got, []string{"b", "c"})
	}
	if !r.Cached() {
		t.Error("r.Cached() = false, want true")
	}
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
	if unknown > histories/20 {
		t.Fatalf("the checker could not decide %d of %d histories in time, want at most %d", unknown, histories, histories/20)
	}
}
