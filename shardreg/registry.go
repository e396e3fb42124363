package shardreg

import (
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/owner"
	"github.com/puzpuzpuz/xsync/v3"
)

// Entry is a registry entry as callers see it: a copy, safe to keep.
type Entry[V any] struct {
	Name  string
	Value V
	Owner owner.Ref
	// Ready reports whether the owner had marked the entry ready. Resolve
	// and ListReady return only ready entries.
	Ready bool
}

// entry is what the map stores. Everything but the ready flag is immutable;
// the value stored for a name changes only through the map's Compute.
type entry[V any] struct {
	name  string
	value V
	owner owner.Ref
	ready atomic.Bool // false → true only, and only while the entry is mapped
}

// Registry maps names to entries owned by consumers that may die without
// notice. The zero value is not usable; make one with New. All methods are
// safe for concurrent use and linearizable.
type Registry[V any] struct {
	// Read on every call, written only by New.
	m        *xsync.MapOf[string, *entry[V]]
	cap      int64
	validate func(string) error
	deaths   func() (uint64, bool) // owners.Read; a seam for tests
	hook     func(hookPoint)       // nil outside tests
	scanned  func(name string)     // nil outside tests: called for each entry a listing scans
	frozen   atomic.Bool           // a reader holds new writes off; see sections.go
	// The section counter's stripes, each on a line of its own; their
	// number is a power of two. See sections.go.
	stripes    []stripe
	stripeMask uint32

	_ [64]byte // keep the write-hot word below off the lines Resolve reads

	count atomic.Int64 // entries held, dead ones included; never above cap

	_ [64]byte

	// Read by every listing and every changing write, written only when a
	// listing is cached or dropped: a line of its own.
	snap atomic.Pointer[snapshot[V]] // cached ListReady result, nil after a change

	// The deaths of this registry's owners, and only theirs: every owner is
	// tracked on it before its entry can be seen (put). Written only by
	// those deaths, read by full registers and listings.
	owners owner.DeathClock

	_ [64]byte

	gate   sync.Mutex // held by a reader while writes are frozen
	listMu sync.Mutex // one listing rebuild at a time
	shared []Entry[V] // under listMu: the last rebuild's listing, while listers wait for it
	// Listers waiting for listMu, and rebuilds begun: see ListReady.
	listWaiters, rebuilds atomic.Int64
	sweepMu               sync.Mutex    // one sweep at a time
	swept                 atomic.Uint64 // owners clock when the last full sweep began: c<<1|1, or 0
}

// New makes an empty registry. It returns ErrInvalidOption for a bad option.
func New[V any](opts ...Option) (*Registry[V], error) {
	cfg := config{cap: DefaultCap}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Registry[V]{
		// Grow-only: a catalog under churn would otherwise shrink and
		// regrow its table over and over. Its size is bounded by the cap.
		m:        xsync.NewMapOf[string, *entry[V]](xsync.WithGrowOnly()),
		cap:      cfg.cap,
		validate: cfg.validate,
	}
	n := stripeCount()
	r.stripes, r.stripeMask = make([]stripe, n), uint32(n-1)
	r.deaths = r.owners.Read
	return r, nil
}

// Register adds a not-ready entry for name, owned by o. Checks run in this
// order, and the first that fails is the error, with nothing changed:
//
//   - the name: ErrInvalidName;
//   - the owner: ErrDeadOwner when o is dead or the zero Ref;
//   - a live entry under the name: ErrDuplicate, also when it is o's own;
//   - the cap: ErrCapReached when the registry is full even after sweeping
//     away every dead-owner entry.
//
// An entry whose owner is dead is replaced in place, atomically, and the
// replacement keeps its slot. The new entry is not resolved or listed until
// o calls MarkReady.
func (r *Registry[V]) Register(name string, v V, o owner.Ref) error {
	return r.insert(name, v, o, false, false)
}

// RegisterReady is Register for entries that need no start-up: the entry is
// ready at once.
func (r *Registry[V]) RegisterReady(name string, v V, o owner.Ref) error {
	return r.insert(name, v, o, true, false)
}

// Overwrite installs a ready entry for name owned by o whatever holds the
// name now, live or dead, as the winner of a contested route does when it
// re-asserts its own settings. It fails only with ErrInvalidName,
// ErrDeadOwner or ErrCapReached (when the name is new and the registry is
// full).
func (r *Registry[V]) Overwrite(name string, v V, o owner.Ref) error {
	return r.insert(name, v, o, true, true)
}

// insertOutcome is what one attempt to put an entry in the map did.
type insertOutcome uint8

const (
	inserted insertOutcome = iota
	replaced
	duplicate
	full
	deadOwner
)

// maxSweepsPerInsert bounds how often one insert sweeps when owners keep
// dying while it runs. One sweep already reclaims every owner that died
// before the insert began.
const maxSweepsPerInsert = 2

func (r *Registry[V]) insert(name string, v V, o owner.Ref, ready, overwrite bool) error {
	if err := r.checkName(name); err != nil {
		return &Error{Op: "register", Name: name, Err: err}
	}
	if !o.Alive() {
		return &Error{Op: "register", Name: name, Err: ErrDeadOwner}
	}
	// refuse returns err, unless the owner has died by now: then the answer
	// is ErrDeadOwner, the first check, and it is true at this instant.
	// While the owner lives it lived at the earlier instant err describes.
	refuse := func(err error) error {
		if !o.Alive() {
			err = ErrDeadOwner
		}
		return &Error{Op: "register", Name: name, Err: err}
	}
	var e *entry[V]
	for sweeps := 0; ; {
		// Lock-free pre-checks, so that a duplicate or a full registry costs
		// no bucket lock and no write.
		cur, held := r.m.Load(name)
		if held && !overwrite && cur.owner.Alive() {
			return refuse(ErrDuplicate)
		}
		if !held && r.count.Load() >= r.cap {
			// The name looks free and the registry full. But an insert of
			// this very name may have reserved its slot and not be visible
			// yet (then the answer is ErrDuplicate), and a concurrent sweep
			// may have freed a slot since (then there is room): read the
			// name, the count and whether a sweep could help at one
			// instant, with no write in between.
			var full, current bool
			r.readConsistent(func() {
				cur, held = r.m.Load(name)
				full = r.count.Load() >= r.cap
				current = r.sweepIsCurrent()
			})
			switch {
			case held && !overwrite && cur.owner.Alive():
				return refuse(ErrDuplicate)
			case !held && full && !current && sweeps < maxSweepsPerInsert:
				r.makeRoom()
				sweeps++
				continue
			case !held && full:
				// With the sweep current, every entry was live at the
				// instant of the read: the registry was full of live
				// owners. Past maxSweepsPerInsert, owners kept dying
				// throughout; the register gives up rather than chase them.
				return refuse(ErrCapReached)
			}
		}
		r.fire(hookBeforeInsert)
		if e == nil {
			e = &entry[V]{name: name, value: v, owner: o}
			e.ready.Store(ready)
		}

		switch r.put(name, e, overwrite) {
		case duplicate:
			return refuse(ErrDuplicate)
		case deadOwner:
			return refuse(ErrDeadOwner)
		case full:
			// The pre-check saw room that a concurrent insert took; the
			// next pass decides between ErrDuplicate and ErrCapReached.
			continue
		}
		return nil
	}
}

// put runs one Compute for name inside a write section. A new name takes a
// slot; a replacement keeps the one it replaces.
func (r *Registry[V]) put(name string, e *entry[V], overwrite bool) insertOutcome {
	// Before the entry can be seen, so that the owner's death ticks this
	// registry's clock (see the package doc). Refused only once the owner
	// is dying; as below, the death is reported once it is complete. An
	// owner tracked already costs two loads and no lock.
	if !e.owner.Track(&r.owners) {
		r.fire(hookTrackRefused)
		<-e.owner.Done()
		return deadOwner
	}
	r.fire(hookTracked)
	var outcome insertOutcome
	held := false
	st := r.beginWrite()
	r.m.Compute(name, func(old *entry[V], loaded bool) (*entry[V], bool) {
		switch {
		case loaded && !overwrite && old.owner.Alive():
			outcome = duplicate
			return old, false
		case !loaded && !r.reserve():
			outcome = full
			return nil, true // absent and deleted: nothing is stored
		}
		// Checked under the bucket lock, after any slot was taken: a
		// register whose own owner died during its sweep, possibly freeing
		// the very slot it is about to take, must not succeed. The hold
		// keeps the owner alive until the new entry is visible, so the
		// register and the owner's liveness are one atomic step.
		if held = e.owner.Enter(); !held {
			outcome = deadOwner
			if !loaded {
				r.count.Add(-1)
				return nil, true
			}
			return old, false
		}
		r.fire(hookInsideInsert)
		if loaded {
			outcome = replaced
		} else {
			outcome = inserted
		}
		return e, false
	})
	if held {
		e.owner.Exit()
	}
	r.endWrite(st, outcome == inserted || outcome == replaced)
	if held {
		r.fire(hookInserted)
	}
	if outcome == deadOwner {
		// Enter refuses a dying owner, which every other reader still
		// sees alive. Report the death only once it is complete, so that
		// no one can see the owner alive after this register saw it dead.
		// It completes within a few instructions: a death waits only for
		// holds.
		<-e.owner.Done()
	}
	return outcome
}

// reserve takes a slot under the cap, never exceeding it, not even for an
// instant.
func (r *Registry[V]) reserve() bool {
	for {
		n := r.count.Load()
		if n >= r.cap {
			return false
		}
		if r.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// MarkReady makes name's entry ready, so that it is resolved and listed. It
// acts only when the entry is owned by o (Same) and o is alive, and reports
// whether the entry is o's and ready afterwards, also when it already was.
func (r *Registry[V]) MarkReady(name string, o owner.Ref) bool {
	cur, ok := r.m.Load(name)
	if !ok || !cur.owner.Same(o) {
		return false
	}
	// Ready is read before liveness: both only move one way, so reading
	// them in this order finds an instant at which both held.
	if cur.ready.Load() && o.Alive() {
		return true
	}
	marked, changed, dying := false, false, false
	st := r.beginWrite()
	r.m.Compute(name, func(old *entry[V], loaded bool) (*entry[V], bool) {
		if !loaded {
			return nil, true
		}
		// Under the bucket lock the flag flips only while the entry is
		// mapped, so a flip can never revive a removed entry. Ownership,
		// not the entry read above, decides: the owner may have replaced
		// its own entry meanwhile (Overwrite). The hold keeps the owner
		// alive until the flip is visible.
		if !old.owner.Same(o) {
			return old, false
		}
		if !o.Enter() {
			dying = true
			return old, false
		}
		changed = !old.ready.Swap(true)
		o.Exit()
		marked = true
		return old, false
	})
	r.endWrite(st, changed)
	if dying {
		<-o.Done() // as in put: report a death only once it is complete
	}
	return marked
}

// Resolve returns name's entry when it is ready and its owner alive. It
// never waits, not even for a listing that holds writes off: it takes no
// lock and does not allocate on a hit. A dead-owner entry it meets is
// reclaimed, owner-conditionally (never the entry that has replaced it
// meanwhile), unless a listing holds writes off at that moment; then the
// entry is left to a later write, listing or sweep.
func (r *Registry[V]) Resolve(name string) (Entry[V], bool) {
	e, ok := r.live(name)
	if !ok {
		return Entry[V]{}, false
	}
	return Entry[V]{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}, true
}

// Lookup is Resolve for the hot path of dispatch: it returns the value and
// the owner of name's entry when the entry is ready and its owner alive,
// without building an Entry. Returning the two words in registers rather
// than the whole Entry through the generic method's frame saves about a
// fifth of a lookup. It never waits, and reclaims a dead-owner entry it
// meets as Resolve does.
func (r *Registry[V]) Lookup(name string) (V, owner.Ref, bool) {
	if e, ok := r.live(name); ok {
		return e.value, e.owner, true
	}
	var zero V
	return zero, owner.Ref{}, false
}

// live finds name's entry when it is ready and its owner alive. It never
// waits: a dead-owner entry it meets is reclaimed only when no reader holds
// writes off.
func (r *Registry[V]) live(name string) (*entry[V], bool) {
	for {
		e, ok := r.m.Load(name)
		if !ok {
			return nil, false
		}
		// Ready before liveness, as in MarkReady.
		ready := e.ready.Load()
		if e.owner.Alive() {
			return e, ready
		}
		if r.tryRemoveIfCurrent(name, e) {
			return nil, false
		}
		// Not removed: another owner replaced e meanwhile, or a listing
		// holds writes off. If the name still maps to e, a miss is right
		// at this load: e is the name's and its owner's death lasts. e is
		// still referenced here, so no new entry can reuse its address.
		if cur, ok := r.m.Load(name); !ok || cur == e {
			return nil, false
		}
		// Replaced: judge the name's entry, not a stale one.
	}
}

// UnregisterOwned removes name's entry only when its owner is Same as o,
// whether o is alive or not, and reports whether it removed it. A late stop
// of a dead owner therefore never removes the entry of its successor.
func (r *Registry[V]) UnregisterOwned(name string, o owner.Ref) bool {
	if cur, ok := r.m.Load(name); !ok || !cur.owner.Same(o) {
		return false
	}
	r.fire(hookUnregisterChecked)
	// Ownership, not the entry read above, decides under the lock: the
	// owner may have replaced its own entry meanwhile (Overwrite), or died
	// and been succeeded by another owner's takeover.
	return r.remove(name, func(e *entry[V]) bool { return e.owner.Same(o) })
}

// removeIfCurrent removes name's entry if it is still e, and reports whether
// it did.
func (r *Registry[V]) removeIfCurrent(name string, e *entry[V]) bool {
	return r.remove(name, func(cur *entry[V]) bool { return cur == e })
}

// tryRemoveIfCurrent is removeIfCurrent that gives up, without waiting,
// when a reader holds writes off.
func (r *Registry[V]) tryRemoveIfCurrent(name string, e *entry[V]) bool {
	st, ok := r.tryBeginWrite()
	if !ok {
		return false
	}
	return r.removeInSection(st, name, func(cur *entry[V]) bool { return cur == e })
}

// remove removes name's entry if match approves it, under the bucket lock,
// and reports whether it did.
func (r *Registry[V]) remove(name string, match func(*entry[V]) bool) bool {
	return r.removeInSection(r.beginWrite(), name, match)
}

// removeInSection is remove inside a write section that the caller opened
// and that it closes.
func (r *Registry[V]) removeInSection(st *stripe, name string, match func(*entry[V]) bool) bool {
	removed := false
	r.m.Compute(name, func(old *entry[V], loaded bool) (*entry[V], bool) {
		if !loaded {
			return nil, true
		}
		if match(old) {
			removed = true
			return nil, true
		}
		return old, false
	})
	if removed {
		r.count.Add(-1)
	}
	r.endWrite(st, removed)
	return removed
}
