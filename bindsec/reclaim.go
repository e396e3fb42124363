package bindsec

import "sync/atomic"

// A Book has no cap, so the registry's sweep at full cap never runs for it,
// and a dead owner's plan goes only when something meets it: a lookup of its
// route, a register under its name, a listing. Plans of routes that nobody
// names again would stay held for as long as the book lives. So the book
// sweeps by itself, as part of registering, and Prune sweeps on demand.

// minSweepEvery is the fewest successful registrations between two sweeps,
// so that a small book does not sweep at nearly every registration.
const minSweepEvery = 256

// reclaim is the bookkeeping of the amortised sweep. Its words are written
// by registrations only, never by PlanFor or Guard.
type reclaim struct {
	since    atomic.Int64 // successful registrations since the last sweep began
	live     atomic.Int64 // live plans counted after the last sweep
	sweeping atomic.Bool  // a registration is sweeping; the others do not wait for it
}

// Prune removes every plan whose owner is dead and returns how many it
// removed. It is never needed for correctness (a dead owner's plan is
// ignored everywhere); it frees the memory of plans whose routes nobody
// looks up or registers again before the book's next sweep.
//
// Cost: one pass over every plan the book holds, dead ones included, plus
// one removal per dead plan. It is safe for concurrent use with every other
// method; PlanFor and Guard are not blocked by it, and sweeps (Prune's and
// registrations') run one at a time.
func (b *Book) Prune() int { return b.plans.Prune() }

// registered is called after each successful registration. Once the book
// has seen as many registrations since its last sweep as it counted live
// plans after that sweep, and at least minSweepEvery, this registration
// sweeps, unless another one is sweeping already.
//
// Why that interval: the plans a sweep meets are the live ones it counted
// last time, which may have died since, plus at most one per registration
// since; so a sweep meets at most twice the interval's registrations, and
// each registration pays a constant amount on average for the sweep and the
// count. It also bounds what a book left to itself holds: dead plans of
// routes nobody names again never outnumber the registrations since the
// last sweep plus the plans counted then.
func (b *Book) registered() {
	r := &b.reclaim
	if r.since.Add(1) < max(minSweepEvery, r.live.Load()) {
		return
	}
	if !r.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer r.sweeping.Store(false)
	r.since.Store(0)
	b.plans.Prune()
	// A plan registered during the count may be missed, which only brings
	// the next sweep forward.
	r.live.Store(int64(len(b.plans.ListReady())))
}
