package shardreg

import (
	"runtime"
	"slices"
	"strings"

	"github.com/livereg/livereg/owner"
)

// snapshot is a ListReady result and the state it was taken in.
type snapshot[V any] struct {
	list []Entry[V]
	// version is the completed-writes count the map was at.
	version uint64
	// deaths is a death clock reading, settled, taken before every listed
	// owner was last seen alive; deathsKnown says there is one.
	deaths      uint64
	deathsKnown bool
}

// takeSnapshot takes one consistent listing of the ready entries of live owners,
// and returns it with the dead-owner entries it passed over.
//
// It scans the map once, collecting the ready entries whose owners read
// alive, and then re-reads those owners in passes until one pass finds none
// newly dead. The listing is that of the instant just before the clean pass
// began, where the map was the scanned one (the section counter says no
// write completed since the scan began, and none is in progress) and each owner's liveness
// is known: an owner found dead in an earlier pass was dead then and is dead
// since, and an owner found alive in the clean pass was alive then, since a
// death is permanent. Unrelated deaths, which move the process-wide death
// clock, are never looked at, so they cannot make a listing retry.
//
// A pass that finds an owner newly dead shows that it died during the
// previous pass or this one; each owner can do that for at most two passes,
// so there are at most twice as many passes as distinct owners listed, plus
// one, even if every owner in the registry is dying. Writes can force a
// rescan only optimisticScans times: the next scan holds them off.
func (r *Registry[V]) takeSnapshot() (s *snapshot[V], dead []*entry[V]) {
	var ready []*entry[V]
	for attempt := 0; ; attempt++ {
		frozen := attempt >= optimisticScans
		if frozen {
			r.freeze()
		}
		v1, settled := r.settledVersion()
		if !frozen && !settled {
			runtime.Gosched()
			continue
		}
		ready, dead = ready[:0], dead[:0]
		r.m.Range(func(_ string, e *entry[V]) bool {
			// Ready before liveness, as in Resolve.
			isReady := e.ready.Load()
			switch {
			case !e.owner.Alive():
				dead = append(dead, e)
			case isReady:
				ready = append(ready, e)
			}
			if r.scanned != nil {
				r.scanned(e.name)
			}
			return true
		})
		r.fire(hookListScanned)
		var ok bool
		s, ok = r.settle(v1, frozen, &ready, &dead)
		if frozen {
			r.thaw()
		}
		if ok {
			break
		}
	}
	// Sorting pointers moves a word per swap instead of a whole Entry.
	slices.SortFunc(ready, func(a, b *entry[V]) int { return strings.Compare(a.name, b.name) })
	s.list = make([]Entry[V], len(ready))
	for i, e := range ready {
		s.list[i] = Entry[V]{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}
	}
	return s, dead
}

// settle runs the liveness passes over the scanned ready entries, moving
// those whose owners read dead to dead. It reports false when a write has
// completed or is in progress since the scan began at version v1: the map
// is no longer the scanned one and must be scanned again. With writes
// frozen no write can complete, and settle always succeeds.
func (r *Registry[V]) settle(v1 uint64, frozen bool, ready, dead *[]*entry[V]) (*snapshot[V], bool) {
	for {
		// The instant the listing will be of, if this pass is clean: that
		// of the first stripe's reading.
		if !frozen && !r.unchangedSince(v1) {
			return nil, false
		}
		// Read before the pass: when the pass finds every owner alive,
		// they were alive after this reading, which lets cached serve the
		// snapshot in O(1) until the clock moves.
		d, settled := r.deaths()
		r.fire(hookLivenessPass)
		n := len(*ready)
		*ready, *dead = keepLive(*ready, *dead)
		if len(*ready) == n {
			return &snapshot[V]{version: v1, deaths: d, deathsKnown: settled}, true
		}
	}
}

// keepLive moves the entries of ready whose owners read dead to dead. An
// owner read for one entry stands for the next entry's too when it is the
// same: a registry's consumers own runs of entries, and the map may
// yield them together.
func keepLive[V any](ready, dead []*entry[V]) ([]*entry[V], []*entry[V]) {
	kept := ready[:0]
	var last owner.Ref
	lastAlive := false
	for _, e := range ready {
		if e.owner != last {
			last, lastAlive = e.owner, e.owner.Alive()
		}
		if lastAlive {
			kept = append(kept, e)
		} else {
			dead = append(dead, e)
		}
	}
	return kept, dead
}
