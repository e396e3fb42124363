package inproc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
)

// Invariant 13: a Stop returns only once the bodies it admitted have
// ended. The drain probe holds a body inside while Stop begins; a Stop
// that does not wait for it returns while it runs.
func TestCheckerStopDrain(t *testing.T) {
	for _, k := range kinds(bugNoDrain) {
		for _, public := range []bool{true, false} {
			t.Run(k.name+map[bool]string{true: "/public", false: "/planned"}[public], func(t *testing.T) {
				w := newTestWorld(t, k, testConfig())
				w.drainEvery = 1
				// Long enough that a Stop that does not wait returns
				// with the body still inside however loaded the machine.
				w.drain.hold = 500 * time.Millisecond
				h := mustStart(t, w, w.names[0], public)
				endBy(t, w, h, shapeStop)
				verdict(t, w, k, InvStopDrain)
			})
		}
	}
}

// Invariant 13, the other half: a Stop whose drain misses its wake-up
// never returns; it is judged once its bound has passed.
func TestCheckerStopHangs(t *testing.T) {
	for _, k := range kinds(bugDrainHangs) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			w.drain.bound = 100 * time.Millisecond
			h := mustStart(t, w, w.names[1], true)
			if got, want := w.call(context.Background(), w.names[1], credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.call(context.Background(), w.names[1], credValid, allOps()) = %v, want %v", got, want)
			}
			endBy(t, w, h, shapeStop)
			verdict(t, w, k, InvStopDrain)
		})
	}
}

// earlyHooks is package owner with an AfterDeath that runs its function at
// once, dead or not.
type earlyHooks struct{ ownerHooks }

func (earlyHooks) AfterDeath(_ owner.Ref, f func()) { go f() }

// dyingEarlyHooks runs the function at once only when the token is already
// dying, as an AfterDeath that took "sealed" for "dead" would: only the
// dying probe sees it.
type dyingEarlyHooks struct{ ownerHooks }

type neverHeld struct{}

func (neverHeld) Held() bool { return false }

func (dyingEarlyHooks) AfterDeath(r owner.Ref, f func()) {
	// Hold refuses a token that has begun dying, which still reads alive.
	if r.Alive() && !r.Hold(neverHeld{}) {
		go f()
		return
	}
	r.AfterDeath(f)
}

// Invariant 14: an after-death function never runs while its token reads
// alive, not even one given to a token that is dying.
func TestCheckerAfterDeathOrder(t *testing.T) {
	tests := []struct {
		name  string
		real  bool
		hooks deathHooks
		buggy bool
	}{
		{"catalog", true, ownerHooks{}, false},
		{"fake", false, ownerHooks{}, false},
		{"runs at once", false, earlyHooks{}, true},
		{"runs at once when dying", true, dyingEarlyHooks{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := systemKind{name: tt.name, real: tt.real, buggy: tt.buggy}
			w := newTestWorld(t, k, testConfig())
			w.after.hooks = tt.hooks
			w.after.wait = 200 * time.Millisecond // however slow the scheduler, a function run at once runs by then
			w.dyingEvery = 1
			h := mustStart(t, w, w.names[2], true)
			endBy(t, w, h, shapeCancel)
			if tt.buggy {
				// Give a function run at once the moment it needs.
				for deadline := time.Now().Add(time.Second); w.t.Violations(InvAfterDeathOrder) == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the function run at once was not seen within 1s")
					}
				}
			}
			verdict(t, w, k, InvAfterDeathOrder)
		})
	}
}

// Invariant 15: a listing shows one instant. The torn listing reads half
// the names, lets a Stop and a start happen, and reads the rest: it lists
// the stopped route beside the one started after the Stop returned.
func TestCheckerListingInstant(t *testing.T) {
	for _, k := range kinds(bugTornListing) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			a := mustStart(t, w, w.names[0], true)
			c := mustStart(t, w, w.names[1], true)
			var b *held
			between := func() {
				endBy(t, w, a, shapeStop)
				b = mustStart(t, w, w.names[3], true)
			}
			if f, ok := w.sys.(*fakeSystem); ok {
				var once sync.Once
				f.listHook = func() { once.Do(between) }
			}
			w.list(allOps())
			if b == nil {
				between()
				w.list(allOps())
			}
			verdict(t, w, k, InvListingInstant)
			endBy(t, w, b, shapeStop)
			endBy(t, w, c, shapeStop)
		})
	}
}

// Invariant 16: a listing that begins after an owner reads dead does not
// list its route, even before anyone has observed the death. The fake's
// reaper is held so that the dead owner's entry stays in its map.
func TestCheckerListedDeadOwner(t *testing.T) {
	for _, k := range kinds(bugListDying) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			gate := make(chan struct{})
			if f, ok := w.sys.(*fakeSystem); ok {
				f.reapGate = gate
			}
			h := mustStart(t, w, w.names[0], true)
			w.list(allOps())
			h.cancel()
			<-h.done // dead, and not observed: invariant 5 has nothing to say
			w.list(allOps())
			if k.buggy {
				if got := w.t.Violations(InvDeadEntryReturned); got != 0 {
					t.Errorf("invariant 5 is not what sees this: w.t.Violations(InvDeadEntryReturned) = %v, want 0", got)
				}
			}
			close(gate)
			w.observeDeath(h.rec, shapeCancel)
			verdict(t, w, k, InvListedDeadOwner)
		})
	}
}

// Invariant 10 in process: every change is announced. The fake that
// reclaims a dead owner's entry silently leaves the follower behind.
func TestCheckerChangesAnnounced(t *testing.T) {
	for _, k := range kinds(bugDeathSilent) {
		for _, sh := range []shape{shapeStop, shapeCancel, shapePanic, shapeDrop} {
			if k.buggy && sh == shapeStop {
				continue // a Stop announces itself
			}
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, testConfig())
				w.changes.within = 200 * time.Millisecond
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { w.changes.follow(ctx) })
				defer wg.Wait()
				defer cancel()
				h := mustStart(t, w, w.names[1], true)
				w.changes.drain() // the follower has read the start and waits
				endBy(t, w, h, sh)
				w.changes.drain()
				verdict(t, w, k, InvListChanged)
			})
		}
	}
}

// The checker on a scripted history with a fake clock: a change the
// follower reaches before its deadline is checked and passes, one it never
// reaches fails only once the deadline has passed.
func TestCheckerChangesDeadline(t *testing.T) {
	tl := &tally{}
	f := newFake(4, 0)
	defer f.Close()
	c := newChangeChecker(tl, f, time.Second)
	clock := &fakeNow{t: time.Unix(1000, 0)}
	c.now = clock.now
	rec := &record{id: 1, ns: &nameState{name: "t0"}, tag: tagFor(1)}
	c.expect(rec, "start", 1)
	c.expect(rec, "end", 2)
	clock.advance(999 * time.Millisecond)
	if got, want := c.judge(), 2; got != want {
		t.Errorf("c.judge() = %v, want %v", got, want)
	}
	c.seen.Store(1)
	if got, want := c.judge(), 1; got != want {
		t.Errorf("c.judge() = %v, want %v", got, want)
	}
	if got := tl.Violations(InvListChanged); got != 0 {
		t.Errorf("tl.Violations(InvListChanged) = %v, want 0", got)
	}
	clock.advance(2 * time.Millisecond)
	if got := c.judge(); got != 0 {
		t.Errorf("c.judge() = %v, want 0", got)
	}
	if got, want := tl.Checks(InvListChanged), int64(2); got != want {
		t.Errorf("tl.Checks(InvListChanged) = %v, want %v", got, want)
	}
	if got, want := tl.Violations(InvListChanged), int64(1); got != want {
		t.Errorf("%v: tl.Violations(InvListChanged) = %v, want %v", tl.Examples(InvListChanged), got, want)
	}
}
