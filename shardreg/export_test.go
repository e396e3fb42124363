package shardreg

import "sync/atomic"

// Test seams. None of them is reachable outside the package's tests.

// HookPoint names a place inside an operation where a test can step in.
type HookPoint = hookPoint

const (
	HookBeforeInsert      = hookBeforeInsert
	HookInsideInsert      = hookInsideInsert
	HookSweepBegan        = hookSweepBegan
	HookListScanned       = hookListScanned
	HookLivenessPass      = hookLivenessPass
	HookListWait          = hookListWait
	HookBeforeCacheStore  = hookBeforeCacheStore
	HookGateWait          = hookGateWait
	HookUnregisterChecked = hookUnregisterChecked
	HookTrackRefused      = hookTrackRefused
	HookTracked           = hookTracked
	HookInserted          = hookInserted
	HookSweepEnded        = hookSweepEnded
	HookAnnounced         = hookAnnounced
	HookListCounted       = hookListCounted
)

// SetHook makes the registry call fn at every hook point. Set it before the
// registry is shared.
func (r *Registry[V]) SetHook(fn func(HookPoint)) { r.hook = fn }

// SetScanHook makes every listing scan call fn with the name of each entry
// right after it has read that entry. Set it before the registry is shared.
func (r *Registry[V]) SetScanHook(fn func(name string)) { r.scanned = fn }

// SetDeathClock replaces the registry's own death clock for its readers, so
// that a test can present a clock reading that a real death holds only for
// nanoseconds. Owners' deaths still tick the real one.
func (r *Registry[V]) SetDeathClock(fn func() (completed uint64, settled bool)) { r.deaths = fn }

// TickDeathClock makes the registry's death clock tick on each of its next
// reads, up to limit of them, as if one of its owners had died between any
// two reads, and then go back to the real clock's pace. It returns a
// function that counts the reads so far. Set it before the registry is
// shared.
func (r *Registry[V]) TickDeathClock(limit uint64) (reads func() uint64) {
	var n atomic.Uint64
	r.deaths = func() (uint64, bool) {
		c, settled := r.owners.Read()
		return c + min(n.Add(1), limit), settled
	}
	return n.Load
}

// OwnerDeaths reads the registry's own death clock, the real one.
func (r *Registry[V]) OwnerDeaths() (completed uint64, settled bool) { return r.owners.Read() }

// SweepIsCurrent reports whether a register at full cap would skip its
// sweep: no owner of an entry can have died since the last one began.
func (r *Registry[V]) SweepIsCurrent() bool { return r.sweepIsCurrent() }

// Count reads the cap counter directly, without Len's consistency, so that
// a stress test can watch it for transient overshoot.
func (r *Registry[V]) Count() int64 { return r.count.Load() }

// Entries counts what the map holds, dead entries included.
func (r *Registry[V]) Entries() int { return r.m.Size() }

// Frozen reports whether a listing is holding writes off.
func (r *Registry[V]) Frozen() bool { return r.frozen.Load() }

// Cached reports whether a listing is cached.
func (r *Registry[V]) Cached() bool { return r.snap.Load() != nil }

// SharedListing reports whether a rebuilt listing is kept for listers that
// waited for it.
func (r *Registry[V]) SharedListing() bool {
	r.listMu.Lock()
	defer r.listMu.Unlock()
	return r.shared != nil
}

// Stripes returns the number of stripes of the section counter.
func (r *Registry[V]) Stripes() int { return len(r.stripes) }

// OpenSectionOn opens a write section on stripe i, as a write that landed
// there would, and returns the function that closes it; changed says
// whether the write changed anything. No reader may be freezing.
func (r *Registry[V]) OpenSectionOn(i int) (end func(changed bool)) {
	st := &r.stripes[i]
	st.w.Add(sectionStarted)
	return func(changed bool) { r.endWrite(st, changed) }
}

// SettledVersion and UnchangedSince are the readers' view of the counter.
func (r *Registry[V]) SettledVersion() (uint64, bool) { return r.settledVersion() }
func (r *Registry[V]) UnchangedSince(v uint64) bool   { return r.unchangedSince(v) }
