package shardreg

import (
	"sync/atomic"

	"github.com/livereg/livereg/owner"
)

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
)

// SetHook makes the registry call fn at every hook point. Set it before the
// registry is shared.
func (r *Registry[V]) SetHook(fn func(HookPoint)) { r.hook = fn }

// SetScanHook makes every listing scan call fn with the name of each entry
// right after it has read that entry. Set it before the registry is shared.
func (r *Registry[V]) SetScanHook(fn func(name string)) { r.scanned = fn }

// SetDeathClock replaces owner.Deaths for this registry, so that a test can
// present a clock reading that a real death holds only for nanoseconds.
func (r *Registry[V]) SetDeathClock(fn func() (completed uint64, settled bool)) { r.deaths = fn }

// TickDeathClock makes the registry's death clock tick on each of its next
// reads, up to limit of them, as if some owner elsewhere in the process had
// died between any two reads, and then go back to the real clock's pace.
// It returns a function that counts the reads so far. Set it before the
// registry is shared.
func (r *Registry[V]) TickDeathClock(limit uint64) (reads func() uint64) {
	var n atomic.Uint64
	r.deaths = func() (uint64, bool) {
		c, settled := owner.Deaths()
		return c + min(n.Add(1), limit), settled
	}
	return n.Load
}

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
