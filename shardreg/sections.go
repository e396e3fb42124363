package shardreg

import "runtime"

// Write sections make whole-map reads (listings, Len) linearizable on top
// of a concurrent hash map that offers no snapshot.
//
// Every change to the map, or to an entry's ready flag, or to the count,
// happens inside a section: it first adds one to the "in progress" half of
// seq, makes the change, then moves itself to "completed" (or just leaves,
// when it changed nothing). A reader that reads seq settled (nothing in
// progress), reads, and reads the same settled seq again knows that no
// write was visible in between, so it saw one instant's state of the map.
// Owner deaths are not writes and do not move seq; listings deal with them
// on their own (list.go).
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

// beginWrite opens a write section, waiting while a reader holds writes
// off. Sections must not nest: a frozen reader waits for every open section
// to close.
func (r *Registry[V]) beginWrite() {
	for !r.tryBeginWrite() {
		r.fire(hookGateWait)
		r.gate.Lock()
		//lint:ignore SA2001 an empty critical section is the point: it waits for the reader
		r.gate.Unlock()
	}
}

// tryBeginWrite opens a write section unless a reader holds writes off,
// and reports whether it did. It never waits: lookups use it to reclaim a
// dead entry only when that costs them nothing.
func (r *Registry[V]) tryBeginWrite() bool {
	r.seq.Add(sectionStarted)
	if !r.frozen.Load() {
		return true
	}
	// A reader is freezing writes. Step back out of its way; it saw this
	// section either before it froze or not at all, since both sides
	// announce themselves before they look.
	r.seq.Add(sectionNoChange)
	return false
}

// endWrite closes a write section; changed says whether it changed anything
// a reader could see, which bumps the version and drops the cached listing,
// so that the cache never keeps a removed entry's value reachable. The drop
// costs a writer one load of a line that only listings write, and a store
// only for the first change after a listing was cached.
func (r *Registry[V]) endWrite(changed bool) {
	if !changed {
		r.seq.Add(sectionNoChange)
		return
	}
	r.seq.Add(sectionChanged)
	// After the version moved: a listing that stores its snapshot after
	// this load sees the new version and drops the snapshot itself (see
	// rebuild), so one of the two always drops it.
	if r.snap.Load() != nil {
		r.snap.Store(nil)
	}
}

// Version returns a number that grows with every change a listing can see:
// an insert, a replacement, a removal (a prune included) or a ready flip. It
// does not move on an owner's death until the dead entry is reclaimed.
func (r *Registry[V]) Version() uint64 {
	return r.seq.Load() >> sectionBits
}

// readConsistent calls read until one call overlaps no write section, and
// returns the version it saw. read must start from scratch on each call
// and must not write to the registry.
func (r *Registry[V]) readConsistent(read func()) uint64 {
	for range optimisticScans {
		s1 := r.seq.Load()
		if s1&sectionMask != 0 {
			runtime.Gosched()
			continue
		}
		read()
		if r.seq.Load() == s1 {
			return s1 >> sectionBits
		}
	}
	r.freeze()
	defer r.thaw()
	read()
	return r.seq.Load() >> sectionBits
}

// freeze holds new writes off and waits for the open sections to close.
// From its return until thaw no write can complete, so the completed half
// of seq stands still; its in-progress half may still flicker with writers
// that announce themselves, see the freeze and step back without writing.
func (r *Registry[V]) freeze() {
	r.gate.Lock()
	r.frozen.Store(true)
	for r.seq.Load()&sectionMask != 0 {
		runtime.Gosched()
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
