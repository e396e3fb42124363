package shardreg_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// The owner dies between Register's first liveness check and its insert:
// the tracking of the owner refuses, and nothing is left behind. (When the
// owner dies after the tracking, the check under the bucket lock refuses:
// TestOwnerDiesAfterItsTracking.)
func TestOwnerDiesBeforeInsert(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1))
	tok := owner.New()
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookBeforeInsert {
			tok.Release()
		}
	})
	if err := r.Register("tool", "", tok.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Fatalf(`r.Register("tool", "", tok.Ref()) = %v, want %v`, err, shardreg.ErrDeadOwner)
	}
	r.SetHook(nil)
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
	if got := r.Entries(); got != 0 {
		t.Errorf("r.Entries() = %v, want 0", got)
	}
}

// The owner's death begins in the instructions between the check under
// the bucket lock and the entry becoming visible. The register holds its
// owner over that window, so the death waits until the entry is visible:
// the register succeeds, and its entry is then an ordinary dead entry that
// the next full register reclaims. Had the death completed first, no sweep
// would be bound to revisit the entry (its owner died before that sweep's
// clock reading) and it would hold its slot for good.
func TestOwnerDiesInsideInsert(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1))
	tok := owner.New()
	released := make(chan struct{})
	r.SetHook(func(p shardreg.HookPoint) {
		if p != shardreg.HookInsideInsert {
			return
		}
		go func() { tok.Release(); close(released) }()
		waitDying(t, tok.Ref())
		if !tok.Alive() {
			t.Error("a held owner reads alive while its death waits: tok.Alive() = false, want true")
		}
		select {
		case <-released:
			t.Error("the death completed while the register held its owner")
		case <-time.After(10 * time.Millisecond):
		}
	})
	if err := r.Register("tool", "", tok.Ref()); err != nil {
		t.Fatalf("the register is linearized before the death: %v", err)
	}
	r.SetHook(nil)
	<-released

	if got := r.Len(); got != 1 {
		t.Errorf("the dead entry holds its slot until reclaimed: r.Len() = %v, want 1", got)
	}
	_, ok := r.Resolve("tool")
	if ok {
		t.Error(`r.Resolve("tool"): ok = true, want false`)
	}
	if err := r.Register("other", "", live(t).Ref()); err != nil {
		t.Fatalf("the full register reclaims the dead entry's slot: %v", err)
	}
	if got := r.Len(); got != 1 {
		t.Errorf("r.Len() = %v, want 1", got)
	}
}

// A register whose owner is dying refuses with ErrDeadOwner (its tracking
// of the owner refuses first; the hold under the bucket lock would too),
// and returns only once the death is complete: no one may see the owner
// alive after the register called it dead.
func TestRegisterRefusedByDyingOwnerReturnsAfterDeath(t *testing.T) {
	r := newReg(t)
	holder, tok := live(t), owner.New()
	if err := r.Register("held", "", holder.Ref()); err != nil {
		t.Fatalf(`r.Register("held", "", holder.Ref()): %v`, err)
	}
	var wg sync.WaitGroup
	// Hold tok from outside, as a concurrent register would, so that its
	// death starts and then waits.
	if !tok.Ref().Enter() {
		t.Fatal("tok.Ref().Enter() = false, want true")
	}
	wg.Go(tok.Release)
	waitDying(t, tok.Ref())
	errc := make(chan error, 1)
	go func() { errc <- r.Register("tool", "", tok.Ref()) }()
	select {
	case err := <-errc:
		t.Fatalf("Register returned %v while its owner's death was still in progress", err)
	case <-time.After(20 * time.Millisecond):
	}
	tok.Ref().Exit()
	if err := <-errc; !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Fatalf("<-errc = %v, want %v", err, shardreg.ErrDeadOwner)
	}
	if tok.Alive() {
		t.Error("tok.Alive() = true, want false")
	}
	wg.Wait()
	if got := r.Len(); got != 1 {
		t.Errorf("r.Len() = %v, want 1", got)
	}
}

// MarkReady by an owner that has begun to die: the owner still reads alive
// to everyone else, so MarkReady may say false only once the death is
// complete. The random check found MarkReady(c, o3) returning false while
// a concurrent full Register still saw o3 alive and refused with
// ErrCapReached, which no order of the two explains.
func TestMarkReadyRefusedByDyingOwnerReturnsAfterDeath(t *testing.T) {
	r := newReg(t)
	tok := owner.New()
	if err := r.Register("tool", "", tok.Ref()); err != nil {
		t.Fatalf(`r.Register("tool", "", tok.Ref()): %v`, err)
	}
	if !tok.Ref().Enter() {
		t.Fatal("hold tok, as a concurrent register would: tok.Ref().Enter() = false, want true")
	}
	var wg sync.WaitGroup
	wg.Go(tok.Release)
	waitDying(t, tok.Ref())
	marked := make(chan bool, 1)
	go func() { marked <- r.MarkReady("tool", tok.Ref()) }()
	select {
	case m := <-marked:
		t.Fatalf("MarkReady returned %v while its owner's death was still in progress", m)
	case <-time.After(20 * time.Millisecond):
	}
	tok.Ref().Exit()
	if <-marked {
		t.Error("received true from marked, want false")
	}
	if tok.Alive() {
		t.Error("tok.Alive() = true, want false")
	}
	wg.Wait()
}

// The owner dies while its own Register sweeps, and the sweep reclaims the
// owner's other entry, the one holding the only slot. While the owner
// lived the registry was full; once it is dead the answer is ErrDeadOwner.
// Succeeding would fit neither.
func TestOwnerDiesDuringItsOwnSweep(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1))
	tok := owner.New()
	if err := r.RegisterReady("a", "", tok.Ref()); err != nil {
		t.Fatalf(`r.RegisterReady("a", "", tok.Ref()): %v`, err)
	}
	// The registry has never swept, so the full register sweeps.
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookSweepBegan {
			tok.Release()
		}
	})
	if err := r.Register("b", "", tok.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Fatalf(`r.Register("b", "", tok.Ref()) = %v, want %v`, err, shardreg.ErrDeadOwner)
	}
	r.SetHook(nil)
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
}

// An owner's stop racing its own Overwrite must not leave its entry behind:
// whichever goes first, the other finds an entry of the same owner.
func TestUnregisterRacingOwnOverwrite(t *testing.T) {
	for round := range 500 {
		r := newReg(t)
		tok := live(t)
		if err := r.RegisterReady("tool", "v1", tok.Ref()); err != nil {
			t.Fatalf(`r.RegisterReady("tool", "v1", tok.Ref()): %v`, err)
		}
		start := make(chan struct{})
		var removed bool
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			if err := r.Overwrite("tool", "v2", tok.Ref()); err != nil {
				t.Fatalf(`r.Overwrite("tool", "v2", tok.Ref()): %v`, err)
			}
		})
		wg.Go(func() { <-start; removed = r.UnregisterOwned("tool", tok.Ref()) })
		close(start)
		wg.Wait()
		// Stop first: it removes v1 and v2 stays. Overwrite first: the
		// stop removes v2. Either way the stop found an entry of its own.
		if !removed {
			t.Fatalf("round %d: the owner's stop found no entry of its own: removed = false, want true", round)
		}
	}
}

// fakeClock stands in for the registry's death clock so that a test can
// hold readings that a real death shows only for nanoseconds.
type fakeClock struct {
	mu        sync.Mutex
	completed uint64
	settled   bool
}

func (c *fakeClock) read() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.completed, c.settled
}

func (c *fakeClock) set(completed uint64, settled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completed, c.settled = completed, settled
}

// fullRegistry returns a registry at its cap of live entries, with a fake
// death clock and a count of the sweeps it runs.
func fullRegistry(t *testing.T, capacity int) (*shardreg.Registry[string], *fakeClock, *atomic.Int32, []*owner.Token) {
	r := newReg(t, shardreg.WithCap(capacity))
	clock := &fakeClock{completed: 5, settled: true}
	r.SetDeathClock(clock.read)
	sweeps := new(atomic.Int32)
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookSweepBegan {
			sweeps.Add(1)
		}
	})
	toks := make([]*owner.Token, capacity)
	for i := range toks {
		toks[i] = live(t)
		start(t, r, fmt.Sprintf("t%d", i), toks[i])
	}
	return r, clock, sweeps, toks
}

func TestSweepSkippedWhileClockUnchanged(t *testing.T) {
	r, _, sweeps, _ := fullRegistry(t, 4)
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	if got := sweeps.Load(); got != 1 {
		t.Fatalf("the first full register sweeps: sweeps.Load() = %v, want 1", got)
	}
	for range 100 {
		if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
			t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
		}
	}
	if got := sweeps.Load(); got != 1 {
		t.Errorf("no owner died since: no further sweep: sweeps.Load() = %v, want 1", got)
	}
}

// A death that has flipped its owner to dead but not completed yet leaves
// the completed count unchanged. A registry that trusted the count alone
// would refuse this register; the clock reads unsettled, so it must sweep.
func TestSweepWhenDeathInProgress(t *testing.T) {
	r, clock, sweeps, toks := fullRegistry(t, 4)
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}

	toks[2].Release()   // the flip...
	clock.set(5, false) // ...while the clock still shows it in progress
	if err := r.Register("x", "", live(t).Ref()); err != nil {
		t.Fatalf("the dead entry's slot must be reclaimed: %v", err)
	}
	if got := sweeps.Load(); got != 2 {
		t.Errorf("sweeps.Load() = %v, want 2", got)
	}
}

func TestSweepWhenDeathCompleted(t *testing.T) {
	r, clock, sweeps, toks := fullRegistry(t, 4)
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	toks[0].Release()
	clock.set(6, true)
	if err := r.Register("x", "", live(t).Ref()); err != nil {
		t.Fatalf(`r.Register("x", "", live(t).Ref()): %v`, err)
	}
	if got := sweeps.Load(); got != 2 {
		t.Errorf("sweeps.Load() = %v, want 2", got)
	}
}

// A sweep that began while a death was in progress may have read that owner
// alive, so it must not vouch for the state it began in.
func TestUnsettledSweepIsNotTrusted(t *testing.T) {
	r, clock, sweeps, _ := fullRegistry(t, 4)
	clock.set(5, false)
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	// Each unsettled sweep leaves the next one due; one register sweeps
	// at most twice.
	if got := sweeps.Load(); got != 2 {
		t.Fatalf("sweeps.Load() = %v, want 2", got)
	}
	clock.set(5, true)
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	if got := sweeps.Load(); got != 3 {
		t.Errorf("the next register must sweep again: sweeps.Load() = %v, want 3", got)
	}
	if err := r.Register("x", "", live(t).Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("x", "", live(t).Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	if got := sweeps.Load(); got != 3 {
		t.Errorf("the settled sweep is trusted: sweeps.Load() = %v, want 3", got)
	}
}

// Concurrent registers at full cap after a death: one sweeps, the others
// wait for it and take its result.
func TestConcurrentFullRegistersSweepOnce(t *testing.T) {
	r, clock, sweeps, _ := fullRegistry(t, 16)
	clock.set(6, true) // some owner, holding no entry here, died
	const racers = 8
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			tok := live(t)
			<-barrier
			name := fmt.Sprintf("new-%d", tok.ID())
			if err := r.Register(name, "", tok.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
				t.Errorf("Register(%q) = %v, want %v", name, err, shardreg.ErrCapReached)
			}
		})
	}
	close(barrier)
	wg.Wait()
	if got := sweeps.Load(); got != 1 {
		t.Errorf("sweeps.Load() = %v, want 1", got)
	}
}

// A write that lands during a listing's scan makes the scan retry; writes
// that keep landing make the listing freeze writers and still return one
// consistent view that includes them all.
func TestListingRetriesThenFreezes(t *testing.T) {
	r := newReg(t)
	start(t, r, "a", live(t))
	scans := 0
	var frozenSeen bool
	blocked := make(chan error, 1)
	r.SetHook(func(p shardreg.HookPoint) {
		if p != shardreg.HookListScanned {
			return
		}
		scans++
		if !r.Frozen() {
			if err := r.RegisterReady(fmt.Sprintf("w%d", scans), "", live(t).Ref()); err != nil {
				t.Fatalf("r.RegisterReady: %v", err)
			}
			return
		}
		frozenSeen = true
		go func() { blocked <- r.RegisterReady("late", "", live(t).Ref()) }()
		select {
		case err := <-blocked:
			t.Errorf("a write completed while listing froze writes: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	})
	got := names(r.ListReady())
	// Only a frozen scan starts the held-off write.
	if !frozenSeen {
		t.Fatal("four disturbed scans must lead to a frozen one: frozenSeen = false, want true")
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the held-off write proceeds after the listing: %v", err)
	}
	r.SetHook(nil)

	if !slices.Equal(got, []string{"a", "w1", "w2", "w3", "w4"}) {
		t.Errorf("got = %v, want %v", got, []string{"a", "w1", "w2", "w3", "w4"})
	}
	if n := names(r.ListReady()); !slices.Contains(n, "late") {
		t.Errorf("the listing %v lacks \"late\"", n)
	}
}

// Writers, killers and listers hammer a small registry. The cap counter is
// watched the whole time and must never pass the cap; once quiet it must
// equal the entries held, and no listing may ever show a dead owner.
func TestStressCapAndListing(t *testing.T) {
	const capacity, names, workers = 8, 24, 6
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	r := newReg(t, shardreg.WithCap(capacity))
	stop := make(chan struct{})
	var over atomic.Int64
	var watchers sync.WaitGroup
	watchers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := r.Count(); n > capacity {
				over.Store(n)
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []*owner.Token
			for range rounds {
				name := fmt.Sprintf("n%02d", rng.IntN(names))
				switch rng.IntN(6) {
				case 0, 1:
					tok := owner.New()
					err := r.Register(name, "", tok.Ref())
					if err != nil && !errors.Is(err, shardreg.ErrDuplicate) && !errors.Is(err, shardreg.ErrCapReached) {
						t.Errorf("register: %v", err)
					}
					r.MarkReady(name, tok.Ref())
					mine = append(mine, tok)
				case 2:
					if len(mine) > 0 {
						i := rng.IntN(len(mine))
						mine[i].Release()
						mine = append(mine[:i], mine[i+1:]...)
					}
				case 3:
					if len(mine) > 0 {
						r.UnregisterOwned(name, mine[rng.IntN(len(mine))].Ref())
					}
				case 4:
					if e, ok := r.Resolve(name); ok {
						if !e.Ready {
							t.Error("e.Ready = false, want true")
						}
					}
				case 5:
					// A dead entry is never listed: check owners that were
					// dead before the listing began.
					deadBefore := map[owner.Ref]bool{}
					for _, tok := range mine {
						if !tok.Alive() {
							deadBefore[tok.Ref()] = true
						}
					}
					for _, e := range r.ListReady() {
						if deadBefore[e.Owner] {
							t.Error("listed a dead owner's entry: deadBefore[e.Owner] = true, want false")
						}
					}
				}
			}
			for _, tok := range mine {
				tok.Release()
			}
		})
	}
	wg.Wait()
	close(stop)
	watchers.Wait()

	if got := over.Load(); got != 0 {
		t.Errorf("the cap counter passed the cap: over.Load() = %v, want 0", got)
	}
	if got, want := r.Count(), int64(r.Entries()); got != want {
		t.Errorf("quiet: the count equals the entries held: r.Count() = %v, want %v", got, want)
	}
	r.Prune()
	if got := r.Len(); got != 0 {
		t.Errorf("every owner is dead: r.Len() = %v, want 0", got)
	}
	if l := r.ListReady(); len(l) != 0 {
		t.Errorf("every owner is dead: ListReady() = %v, want empty", l)
	}
}
