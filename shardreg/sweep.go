package shardreg

// Prune removes every entry whose owner is dead and returns how many it
// removed. Register does this by itself before refusing a register at full
// cap, and Resolve and ListReady reclaim the dead entries they meet, so
// calling Prune is never needed for correctness; it frees memory sooner.
func (r *Registry[V]) Prune() int {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	return r.sweepLocked()
}

// makeRoom sweeps before a register at full cap is refused. Concurrent
// registers at full cap do not all sweep: one holds sweepMu and sweeps, the
// others wait for it and, finding its sweep current, take its result.
func (r *Registry[V]) makeRoom() {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	if !r.sweepIsCurrent() {
		r.sweepLocked()
	}
}

// sweepIsCurrent reports whether no owner of an entry can have died since
// the last full sweep began. That holds exactly when the registry's own
// death clock, which only its owners' deaths tick, reads settled now with the
// same completed count it read, also settled, when that sweep began; see
// owner.DeathClock and the package doc. Deaths of owners that hold nothing
// here leave it true.
func (r *Registry[V]) sweepIsCurrent() bool {
	c, settled := r.deaths()
	return settled && r.swept.Load() == c<<1|1
}

// sweepLocked removes every dead-owner entry. The map holds at most cap
// entries, so the sweep is bounded by the cap.
func (r *Registry[V]) sweepLocked() int {
	c, settled := r.deaths()
	r.fire(hookSweepBegan)
	removed := 0
	r.m.Range(func(name string, e *entry[V]) bool {
		if !e.owner.Alive() && r.removeIfCurrent(name, e) {
			removed++
		}
		return true
	})
	// Only a sweep that began with the clock settled vouches for the
	// state it began in: a death in progress then may have read alive.
	if settled {
		r.swept.Store(c<<1 | 1)
	} else {
		r.swept.Store(0)
	}
	r.fire(hookSweepEnded)
	return removed
}

// hookPoint names a place where a test can step into an operation.
type hookPoint uint8

const (
	hookBeforeInsert      hookPoint = iota // after an insert's checks, before its Compute
	hookInsideInsert                       // in the Compute, after the owner was found alive
	hookSweepBegan                         // after a sweep read the registry's death clock
	hookListScanned                        // after a listing's scan, before it is validated
	hookLivenessPass                       // before each pass of a listing over its owners
	hookListWait                           // before a listing waits for the one rebuilding the cache
	hookBeforeCacheStore                   // after a listing's rebuild, before it is cached
	hookGateWait                           // before a write waits for a reader holding writes off
	hookUnregisterChecked                  // after UnregisterOwned's lock-free owner check passed, before its Compute
	hookTrackRefused                       // after an insert's owner refused to be tracked, before the wait for its death
	hookTracked                            // after an insert's owner was tracked, before its write section opens
	hookInserted                           // after an insert's entry became visible and its write section closed
	hookSweepEnded                         // after a sweep recorded the clock reading it began with
	hookAnnounced                          // after a write announced its section, before it checks whether a reader holds writes off
	hookListCounted                        // after a lister that found the cache stale counted itself a waiter, before it reads the rebuilds begun
)

func (r *Registry[V]) fire(p hookPoint) {
	if r.hook != nil {
		r.hook(p)
	}
}
