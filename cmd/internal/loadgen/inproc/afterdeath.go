package inproc

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
	"github.com/livereg/livereg/owner"
)

// Invariant 14, after_death_order: a function given to owner.Ref.AfterDeath
// runs only once its token reads dead. The catalog reclaims a dead owner's
// route with one; run early, it would reclaim a route whose owner still
// reads alive and still has calls admitted.
//
// Every started consumer's owner gets one that checks the liveness it
// runs at. That covers AfterDeath on a live token; the hard case is a
// token that is dying, its attachments sealed while it waits for its
// holders, and still reading alive. The dying probe (cancelDying) holds
// such a token there with a holder of its own, gives it an after-death
// function, and sees that the function does not run before the holder
// lets the death complete.
type afterDeathChecker struct {
	t     *tally
	hooks deathHooks
	// wait is how long the dying probe holds a death open after it gave
	// the dying token its function: a function run at once has long run
	// by then, unless the scheduler is very late.
	wait time.Duration
}

// deathHooks is what the checker uses of package owner: an interface so
// that a test can substitute one that runs functions early.
type deathHooks interface {
	Hold(r owner.Ref, h owner.Holder) bool
	AfterDeath(r owner.Ref, f func())
}

// ownerHooks is package owner itself.
type ownerHooks struct{}

func (ownerHooks) Hold(r owner.Ref, h owner.Holder) bool { return r.Hold(h) }
func (ownerHooks) AfterDeath(r owner.Ref, f func())      { r.AfterDeath(f) }

// watch gives rec's owner, started just now, an after-death function that
// checks it runs after the death.
func (c afterDeathChecker) watch(rec *record, ref owner.Ref) {
	tag, name := rec.tag, rec.ns.name // not rec: the function must not keep the ring's record
	c.hooks.AfterDeath(ref, func() {
		c.t.Check(InvAfterDeathOrder, 1)
		if ref.Alive() {
			c.t.Violate(InvAfterDeathOrder, "an after-death function of %s (%s) ran while its owner still read alive", tag, name)
		}
	})
}

// dyingWait is afterDeathChecker.wait's default.
const dyingWait = 500 * time.Microsecond

// dyingHolder holds a death open until let: owner.Holder.
type dyingHolder struct {
	asked   chan struct{} // closed at the first Held: the death is sealed and waits
	release chan struct{}
	once    sync.Once
	letOnce sync.Once
}

func newDyingHolder() *dyingHolder {
	return &dyingHolder{asked: make(chan struct{}), release: make(chan struct{})}
}

// Held reports true until let. It is called only once the death has sealed
// the token's attachments, which is what the probe waits for.
func (d *dyingHolder) Held() bool {
	if wait.Closed(d.release) {
		return false
	}
	d.once.Do(func() { close(d.asked) })
	return true
}

func (d *dyingHolder) let() { d.letOnce.Do(func() { close(d.release) }) }

// cancelDying ends h by a cancel, holding its death open while it gives the
// dying owner an after-death function, which must not run until the death
// completes. The caller waits for the death as after any cancel.
func (w *world) cancelDying(h *held) {
	ref := h.k.Owner()
	d := newDyingHolder()
	if !w.after.hooks.Hold(ref, d) {
		h.cancel()
		return
	}
	defer d.let()
	h.cancel()
	if !wait.Within(d.asked, blockLimit) {
		return // the death never reached its holders: end reports it
	}
	// The function judges itself, whenever it runs: before the holder
	// let go, the death cannot have completed.
	var letGo atomic.Bool
	ran := make(chan struct{})
	tag, name := h.rec.tag, h.rec.ns.name
	w.t.Check(InvAfterDeathOrder, 1)
	w.after.hooks.AfterDeath(ref, func() {
		defer close(ran)
		if early, alive := !letGo.Load(), ref.Alive(); early || alive {
			w.t.Violate(InvAfterDeathOrder, "an after-death function given to %s (%s) while it was dying ran before the death completed (before its holder let go: %v; owner read alive: %v)",
				tag, name, early, alive)
		}
	})
	wait.Within(ran, w.after.wait)
	letGo.Store(true)
}
