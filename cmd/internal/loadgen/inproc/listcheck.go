package inproc

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// listChecker checks invariants 15 and 16 on every listing, beside
// invariant 5's check (deadEntryChecker.listedEntries).
//
// Invariant 15, listing_instant: a listing is the registry's state at one
// instant of the call. Route a listed means a's owner was alive at that
// instant, so the instant came before a's death was observed; route b
// listed means b's entry was there, so it came after b's start began. Two
// routes listed together, one whose owner was observed dead before the
// other's start began, show a state that no instant had: a scan that let
// a write slip past it, or a cached listing patched together from two.
//
// Invariant 16, listed_dead_owner: a listing that began after an owner
// read dead does not list its route. Invariant 5 compares with the death
// mark, taken once Done is closed; this one reads the owners' liveness
// itself just before the listing, so that it also judges listings taken in
// the moment after the owner reads dead and before the death is counted
// complete, when a cache that trusts the death clock's count alone still
// serves the dead route.
type listChecker struct {
	t      *tally
	lookup func(id uint64) *record
}

// deadBefore appends to buf the current holders of names whose owner reads
// dead, or was observed dead, now: before the listing begins.
func (c listChecker) deadBefore(names []*nameState, buf []*record) []*record {
	for _, ns := range names {
		rec := ns.holder.Load()
		if rec == nil {
			continue
		}
		if ref := rec.owner.Load(); rec.death.Load() != 0 || (ref != nil && !ref.Alive()) {
			buf = append(buf, rec)
		}
	}
	return buf
}

// listed checks a listing's entries against dead, what deadBefore found
// before it began.
func (c listChecker) listed(dead []*record, entries []listedEntry) {
	c.t.Check(InvListedDeadOwner, int64(len(dead)))
	var first, last *record // the listed record observed dead first, and the one started last
	checkable := 0
	for _, e := range entries {
		for _, rec := range dead {
			if e.Title == rec.tag {
				c.t.Violate(InvListedDeadOwner, "a listing that began after the owner of %s (%s) read dead lists it", rec.tag, e.Name)
			}
		}
		id, ok := parseTag(e.Title)
		if !ok {
			continue
		}
		rec := c.lookup(id)
		if rec == nil || rec.begin.Load() == 0 {
			continue
		}
		checkable++
		if d := rec.death.Load(); d != 0 && (first == nil || d < first.death.Load()) {
			first = rec
		}
		if last == nil || rec.begin.Load() > last.begin.Load() {
			last = rec
		}
	}
	if checkable < 2 {
		return
	}
	c.t.Check(InvListingInstant, 1)
	// Read again: a death observed after the loop is later still, and the
	// comparison only gets harder to fail.
	if first != nil && first != last && first.death.Load() < last.begin.Load() {
		c.t.Violate(InvListingInstant, "a listing shows %s (%s), whose owner was observed dead (%s) at %d, beside %s (%s), whose start began at %d: no instant had both",
			first.tag, first.ns.name, first.deathShape(), first.death.Load(), last.tag, last.ns.name, last.begin.Load())
	}
}

// doneWaiters is how many goroutines the listing probe parks on a dying
// owner's Done: closing a channel wakes its waiters one by one, so the
// death's close takes microseconds instead of nanoseconds, and with it the
// moment between the owner reading dead and its death being counted
// complete on the registry's death clock.
const doneWaiters = 256

// spinLimit bounds the listing probe's spin on the owner's liveness.
const spinLimit = 200 * time.Microsecond

// cancelListed ends h by a cancel while a goroutine spins on the owner's
// liveness, listing, and lists its kind with the checks the moment the
// owner reads dead, the listing cached just before: a listing in the moment after the owner reads dead
// and before its death is counted complete, which a cache that trusts the
// death clock's count without its settled mark serves stale (invariant
// 16). The caller waits for the death as after any cancel.
func (w *world) cancelListed(h *held, l *latencies) {
	ref, k := h.k.Owner(), h.rec.ns.kind
	var waiters sync.WaitGroup
	for range doneWaiters {
		waiters.Go(func() { <-h.done })
	}
	var spinning, cancelled atomic.Bool
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		spinning.Store(true)
		// Until the cancel is issued, list and yield: the canceller needs
		// a CPU too. Each listing keeps the listing cached up to the
		// death, whatever other starts and ends changed meanwhile.
		for !cancelled.Load() {
			w.reclaimKind(k)
			runtime.Gosched()
		}
		// Then spin, since the moment is too short to be woken for, but
		// not for long: a death that the scheduler delays is let go.
		deadline := time.Now().Add(spinLimit)
		for i := 0; ref.Alive() && !wait.Closed(h.done); i++ {
			w.reclaimKind(k)
			if i%16 == 0 && time.Now().After(deadline) {
				break
			}
		}
		// A few times: each is a few loads while the listing is cached,
		// and the moment lasts as long as the close wakes the waiters.
		for range 4 {
			w.listOf(k, l)
		}
	}()
	for !spinning.Load() {
		runtime.Gosched()
	}
	cancelled.Store(true)
	h.cancel()
	<-listed
	waiters.Wait()
}
