package shardreg

// Test seams. None of them is reachable outside the package's tests.

// HookPoint names a place inside an operation where a test can step in.
type HookPoint = hookPoint

const (
	HookBeforeInsert = hookBeforeInsert
	HookInsideInsert = hookInsideInsert
	HookSweepBegan   = hookSweepBegan
	HookListScanned  = hookListScanned
)

// SetHook makes the registry call fn at every hook point. Set it before the
// registry is shared.
func (r *Registry[V]) SetHook(fn func(HookPoint)) { r.hook = fn }

// SetDeathClock replaces owner.Deaths for this registry, so that a test can
// present a clock reading that a real death holds only for nanoseconds.
func (r *Registry[V]) SetDeathClock(fn func() (completed uint64, settled bool)) { r.deaths = fn }

// Count reads the cap counter directly, without Len's consistency, so that
// a stress test can watch it for transient overshoot.
func (r *Registry[V]) Count() int64 { return r.count.Load() }

// Entries counts what the map holds, dead entries included.
func (r *Registry[V]) Entries() int { return r.m.Size() }

// Frozen reports whether a listing is holding writes off.
func (r *Registry[V]) Frozen() bool { return r.frozen.Load() }
