package shardreg

import "runtime"

// Write sections make whole-map reads (listings, Len) linearizable on top
// of a concurrent hash map that offers no snapshot.
//
// Every change to the map, or to an entry's ready flag, or to the count,
// happens inside a section: it first adds one to the "in progress" half of
// seq, makes the change, then moves itself to "completed" (or just leaves,
// when it changed nothing). A reader that reads seq settled (nothing in
// progress), scans, and reads the same settled seq again knows that no
// write was visible during its scan, so the scan saw one instant's state.
// It checks the owner death clock the same way, since a death changes what
// a listing shows.
//
// Under a steady stream of writes a scan may keep failing. After
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

// beginWrite opens a write section. Sections must not nest: a frozen
// reader waits for every open section to close.
func (r *Registry[V]) beginWrite() {
	for {
		r.seq.Add(sectionStarted)
		if !r.frozen.Load() {
			return
		}
		// A reader is freezing writes. Step back out of its way and wait
		// for it; it saw this section either before it froze or not at
		// all, since both sides announce themselves before they look.
		r.seq.Add(sectionNoChange)
		r.gate.Lock()
		//lint:ignore SA2001 an empty critical section is the point: it waits for the reader
		r.gate.Unlock()
	}
}

// endWrite closes a write section; changed says whether it changed anything
// a reader could see, which bumps the version.
func (r *Registry[V]) endWrite(changed bool) {
	if changed {
		r.seq.Add(sectionChanged)
	} else {
		r.seq.Add(sectionNoChange)
	}
}

// Version returns a number that grows with every change a listing can see:
// an insert, a replacement, a removal (a prune included) or a ready flip. It
// does not move on an owner's death until the dead entry is reclaimed.
func (r *Registry[V]) Version() uint64 {
	return r.seq.Load() >> sectionBits
}

// stamp identifies the state a consistent read saw: the registry's
// completed writes and, when the read cared, the completed owner deaths.
type stamp struct {
	version, deaths uint64
}

// readConsistent calls read until one call overlaps no write section (and,
// with watchDeaths, no owner death), and returns the state it saw. read must
// start from scratch on each call and must not write to the registry.
func (r *Registry[V]) readConsistent(watchDeaths bool, read func()) stamp {
	for range optimisticScans {
		s1 := r.seq.Load()
		d1, ok1 := r.deathClock(watchDeaths)
		if s1&sectionMask != 0 || !ok1 {
			runtime.Gosched()
			continue
		}
		read()
		s2 := r.seq.Load()
		d2, ok2 := r.deathClock(watchDeaths)
		if s1 == s2 && ok2 && d1 == d2 {
			return stamp{s1 >> sectionBits, d1}
		}
	}
	return r.readFrozen(watchDeaths, read)
}

// readFrozen holds new writes off, waits for open sections to close, and
// reads. Owner deaths cannot be held off; a death during the read only
// forces a re-read, which with writes frozen is cheap and soon succeeds.
func (r *Registry[V]) readFrozen(watchDeaths bool, read func()) stamp {
	r.gate.Lock()
	defer r.gate.Unlock()
	r.frozen.Store(true)
	defer r.frozen.Store(false)
	for r.seq.Load()&sectionMask != 0 {
		runtime.Gosched()
	}
	s := r.seq.Load()
	for {
		d1, ok1 := r.deathClock(watchDeaths)
		if !ok1 {
			runtime.Gosched()
			continue
		}
		read()
		if d2, ok2 := r.deathClock(watchDeaths); ok2 && d1 == d2 {
			return stamp{s >> sectionBits, d1}
		}
	}
}

func (r *Registry[V]) deathClock(watch bool) (uint64, bool) {
	if !watch {
		return 0, true
	}
	return r.deaths()
}

// Len returns the number of entries held, dead ones that have not been
// reclaimed yet included: exactly what the cap counts.
func (r *Registry[V]) Len() int {
	var n int64
	r.readConsistent(false, func() { n = r.count.Load() })
	return int(n)
}
