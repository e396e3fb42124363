package shardreg

import (
	"runtime"
	"sync/atomic"

	"github.com/livereg/livereg/internal/spread"
)

// Write sections make whole-map reads (listings, Len) linearizable on top
// of a concurrent hash map that offers no snapshot.
//
// Every change to the map, or to an entry's ready flag, or to the count,
// happens inside a section. A section is counted on one stripe of the
// section counter: it first adds one to the stripe's "in progress" half,
// makes the change, then moves itself to "completed" (or just leaves, when
// it changed nothing). Owner deaths are not writes and do not move the
// stripes; listings deal with them on their own (list.go).
//
// The counter is striped so that writers on different cores write
// different cache lines: a write picks its stripe by the address of its
// own stack, which costs a multiply, and goroutines running at once have
// different stacks. A reader validates stripe by stripe. It reads every
// stripe settled (nothing in progress) and sums their completed halves,
// reads, and then reads every stripe settled again with the same sum. The
// completed halves only grow, so an equal sum means that each stripe's is
// unchanged; a section that changed the map during the read would have
// been in progress or completed on its own stripe at the second reading of
// that stripe, which came after the change, and it was not in progress at
// the first reading, which came before. So the reader saw one instant's
// state of the map: any instant of its read.
//
// Under a steady stream of writes a read may keep failing. After
// optimisticScans tries the reader freezes: it sets frozen, which new writes
// check after announcing themselves and back off from until the gate opens,
// and waits for the writes already in progress to finish.
const (
	sectionBits     = 24
	sectionMask     = uint64(1)<<sectionBits - 1
	sectionStarted  = uint64(1)
	sectionChanged  = uint64(1)<<sectionBits - 1 // +1 completed, -1 in progress
	sectionNoChange = ^uint64(0)                 // -1 in progress
	optimisticScans = 4
)

// stripe is one stripe of the section counter: completed<<sectionBits | in
// progress, on a cache line of its own.
type stripe struct {
	w atomic.Uint64
	_ [56]byte
}

// maxStripes bounds the stripes, and with them what a reader reads: a
// listing, Len, or a register at full cap reads every stripe twice.
const maxStripes = 32

// stripeCount is the number of stripes a new registry gets: four times
// GOMAXPROCS, rounded up to a power of two, at most maxStripes. Four
// times, so that two writers rarely share a stripe for long: a goroutine
// keeps the stripe of its stack.
func stripeCount() int {
	return spread.Count(4, maxStripes)
}

// pickStripe returns the stripe for a section of the calling goroutine.
func (r *Registry[V]) pickStripe() *stripe {
	return &r.stripes[spread.Hash()&r.stripeMask]
}

// beginWrite opens a write section on a stripe and returns it, waiting
// while a reader holds writes off. Sections must not nest: a frozen reader
// waits for every open section to close.
func (r *Registry[V]) beginWrite() *stripe {
	for {
		if st, ok := r.tryBeginWrite(); ok {
			return st
		}
		r.fire(hookGateWait)
		r.gate.Lock()
		//lint:ignore SA2001 an empty critical section is the point: it waits for the reader
		r.gate.Unlock()
	}
}

// tryBeginWrite opens a write section unless a reader holds writes off,
// and reports whether it did. It never waits: lookups use it to reclaim a
// dead entry only when that costs them nothing.
func (r *Registry[V]) tryBeginWrite() (*stripe, bool) {
	st := r.pickStripe()
	st.w.Add(sectionStarted)
	r.fire(hookAnnounced)
	if !r.frozen.Load() {
		return st, true
	}
	// A reader is freezing writes. Step back out of its way; it saw this
	// section either before it froze or not at all, since both sides
	// announce themselves before they look.
	st.w.Add(sectionNoChange)
	return nil, false
}

// endWrite closes a write section on its stripe; changed says whether it
// changed anything a reader could see, which bumps the version and drops
// the cached listing, so that the cache never keeps a removed entry's
// value reachable. The drop costs a writer one load of a line that only
// listings write, and a store only for the first change after a listing
// was cached.
func (r *Registry[V]) endWrite(st *stripe, changed bool) {
	if !changed {
		st.w.Add(sectionNoChange)
		return
	}
	st.w.Add(sectionChanged)
	// After the version moved: a listing that stores its snapshot after
	// this load sees the new version and drops the snapshot itself (see
	// rebuild), so one of the two always drops it.
	if r.snap.Load() != nil {
		r.snap.Store(nil)
	}
}

// settledVersion reads every stripe and returns the sum of their completed
// halves, and whether no stripe had a section in progress when read.
func (r *Registry[V]) settledVersion() (version uint64, settled bool) {
	settled = true
	for i := range r.stripes {
		w := r.stripes[i].w.Load()
		version += w >> sectionBits
		settled = settled && w&sectionMask == 0
	}
	return version, settled
}

// unchangedSince reports whether every stripe reads settled and their
// completed halves sum to v, read by a settled settledVersion earlier: then
// no write section completed a change since that reading, and none is in
// progress (see above).
func (r *Registry[V]) unchangedSince(v uint64) bool {
	now, settled := r.settledVersion()
	return settled && now == v
}

// Version returns a number that grows with every change a listing can see:
// an insert, a replacement, a removal (a prune included) or a ready flip. It
// does not move on an owner's death until the dead entry is reclaimed.
// Cost: one load per stripe.
func (r *Registry[V]) Version() uint64 {
	v, _ := r.settledVersion()
	return v
}

// readConsistent calls read until one call overlaps no write section, and
// returns the version it saw. read must start from scratch on each call
// and must not write to the registry.
func (r *Registry[V]) readConsistent(read func()) uint64 {
	for range optimisticScans {
		v, settled := r.settledVersion()
		if !settled {
			runtime.Gosched()
			continue
		}
		read()
		if r.unchangedSince(v) {
			return v
		}
	}
	r.freeze()
	defer r.thaw()
	read()
	return r.Version()
}

// freeze holds new writes off and waits for the open sections to close.
// From its return until thaw no write can complete, so the completed
// halves stand still; the in-progress halves may still flicker with writers
// that announce themselves, see the freeze and step back without writing.
func (r *Registry[V]) freeze() {
	r.gate.Lock()
	r.frozen.Store(true)
	for i := range r.stripes {
		for r.stripes[i].w.Load()&sectionMask != 0 {
			runtime.Gosched()
		}
	}
}

// thaw lets the writes that freeze held off go on.
func (r *Registry[V]) thaw() {
	r.frozen.Store(false)
	r.gate.Unlock()
}

// Len returns the number of entries held, dead ones that have not been
// reclaimed yet included: exactly what the cap counts.
func (r *Registry[V]) Len() int {
	var n int64
	r.readConsistent(func() { n = r.count.Load() })
	return int(n)
}
