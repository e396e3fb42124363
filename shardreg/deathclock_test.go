package shardreg_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
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
	if err := r.Register("new", "", newcomer.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf(`r.Register("new", "", newcomer.Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	if got := sweeps.Load(); got != 1 {
		t.Fatalf("the first full register sweeps: sweeps.Load() = %v, want 1", got)
	}
	if !r.SweepIsCurrent() {
		t.Fatal("r.SweepIsCurrent() = false, want true")
	}

	other := newReg(t)
	for i := range 50 {
		owner.New().Release()
		tok := owner.New()
		if err := other.RegisterReady(fmt.Sprintf("o%d", i), "", tok.Ref()); err != nil {
			t.Fatalf("other.RegisterReady: %v", err)
		}
		tok.Release()
		if !r.SweepIsCurrent() {
			t.Fatalf("after %d unrelated deaths: r.SweepIsCurrent() = false, want true", 2*(i+1))
		}
		if err := r.Register("new", "", newcomer.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
			t.Fatalf(`r.Register("new", "", newcomer.Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
		}
	}
	if got := sweeps.Load(); got != 1 {
		t.Errorf("unrelated deaths made a full register sweep: sweeps.Load() = %v, want 1", got)
	}
	completed, settled := r.OwnerDeaths()
	if completed != 0 {
		t.Errorf("unrelated deaths ticked the registry's clock: completed = %v, want 0", completed)
	}
	if !settled {
		t.Error("settled = false, want true")
	}

	// A death of one of its own owners does tick it.
	toks[3].Release()
	completed, settled = r.OwnerDeaths()
	if completed != 1 {
		t.Errorf("completed = %v, want 1", completed)
	}
	if !settled {
		t.Error("settled = false, want true")
	}
	if r.SweepIsCurrent() {
		t.Error("r.SweepIsCurrent() = true, want false")
	}
	if err := r.Register("new", "", newcomer.Ref()); err != nil {
		t.Fatalf("the dead owner's slot is reclaimed: %v", err)
	}
	if got := sweeps.Load(); got != 2 {
		t.Errorf("sweeps.Load() = %v, want 2", got)
	}
}

// An owner that holds many entries, some of them replaced and removed, is
// tracked once: its death ticks the clock once.
func TestAnOwnerTicksTheClockOnce(t *testing.T) {
	r := newReg(t)
	tok := owner.New()
	for i := range 10 {
		if err := r.RegisterReady(fmt.Sprintf("t%d", i), "", tok.Ref()); err != nil {
			t.Fatalf("r.RegisterReady: %v", err)
		}
		if err := r.Overwrite(fmt.Sprintf("t%d", i), "again", tok.Ref()); err != nil {
			t.Fatalf("r.Overwrite: %v", err)
		}
	}
	if !r.UnregisterOwned("t0", tok.Ref()) {
		t.Fatal(`r.UnregisterOwned("t0", tok.Ref()) = false, want true`)
	}
	tok.Release()
	completed, settled := r.OwnerDeaths()
	if completed != 1 {
		t.Errorf("completed = %v, want 1", completed)
	}
	if !settled {
		t.Error("settled = false, want true")
	}
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
	if err := r.Register("new", "", live(t).Ref()); err != nil {
		t.Fatalf("the owner that died after the sweep must free its slot: %v", err)
	}
	if got := sweeps.Load(); got != 2 {
		t.Errorf("a sweep before the death, one after: sweeps.Load() = %v, want 2", got)
	}
	_, ok := r.Resolve("t2")
	if ok {
		t.Error(`r.Resolve("t2"): ok = true, want false`)
	}
	if got := r.Len(); got != 4 {
		t.Errorf("r.Len() = %v, want 4", got)
	}
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
	if err := r.Register("b", "", b.Ref()); err != nil {
		t.Fatalf(`r.Register("b", "", b.Ref()): %v`, err)
	}
	r.SetHook(nil)
	if r.SweepIsCurrent() {
		t.Error("b's death did not tick the clock: r.SweepIsCurrent() = true, want false")
	}
	if err := r.Register("c", "", live(t).Ref()); err != nil {
		t.Fatalf("b's dead entry must yield its slot: %v", err)
	}
	if got := r.Len(); got != 2 {
		t.Errorf("r.Len() = %v, want 2", got)
	}
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
				if err := r.Register("first", "", tok.Ref()); err != nil {
					t.Fatalf(`r.Register("first", "", tok.Ref()): %v`, err)
				}
			}
			var refused atomic.Bool
			r.SetHook(func(p shardreg.HookPoint) {
				if p == shardreg.HookTrackRefused {
					refused.Store(true)
				}
			})
			if !tok.Ref().Enter() {
				t.Fatal("hold tok, as a concurrent register would: tok.Ref().Enter() = false, want true")
			}
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
			if err := <-errc; !errors.Is(err, shardreg.ErrDeadOwner) {
				t.Fatalf("<-errc = %v, want %v", err, shardreg.ErrDeadOwner)
			}
			if tok.Alive() {
				t.Error("tok.Alive() = true, want false")
			}
			wg.Wait()
			if !refused.Load() {
				t.Error("the tracking refused the dying owner: refused.Load() = false, want true")
			}
			_, held := r.Resolve("tool")
			if held {
				t.Error("held = true, want false")
			}
			if tc.trackedFirst {
				if got := r.Len(); got != 1 {
					t.Errorf("r.Len() = %v, want 1", got)
				}
			} else {
				if got := r.Len(); got != 0 {
					t.Errorf("r.Len() = %v, want 0", got)
				}
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
	if err := r.Register("tool", "", tok.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Fatalf(`r.Register("tool", "", tok.Ref()) = %v, want %v`, err, shardreg.ErrDeadOwner)
	}
	r.SetHook(nil)
	if !tracked.Load() {
		t.Error("tracked.Load() = false, want true")
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
	if got := r.Entries(); got != 0 {
		t.Errorf("r.Entries() = %v, want 0", got)
	}
	if err := r.Register("other", "", live(t).Ref()); err != nil {
		t.Fatalf("the slot was given back: %v", err)
	}
}
