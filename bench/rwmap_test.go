package bench

import (
	"slices"
	"sync"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// RWMap is how the popular Go MCP SDKs hold their tool tables, one
// sync.RWMutex around one map, given ADR-0068's owner checks: liveness is
// checked on read and a dead entry met is removed, but nothing sweeps until
// a register finds the map full. Like the official SDK's feature set, it
// keeps the sorted names between listings and rebuilds them only after an
// insert or removal.
type RWMap struct {
	mu     sync.RWMutex
	m      map[string]*rwEntry
	sorted []string // every name in m, sorted; nil when stale
	cap    int
}

type rwEntry struct {
	name  string
	value int
	owner owner.Ref
	ready bool // guarded by mu
}

// NewRWMap makes an empty RWMap holding at most capacity entries.
func NewRWMap(capacity int) *RWMap {
	return &RWMap{m: make(map[string]*rwEntry), cap: capacity}
}

// Register adds a not-ready entry, replacing a dead duplicate in place.
func (r *RWMap) Register(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, false)
}

// RegisterReady is Register with the entry ready at once.
func (r *RWMap) RegisterReady(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, true)
}

func (r *RWMap) register(name string, v int, o owner.Ref, ready bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	if !o.Alive() {
		return refuse(name, shardreg.ErrDeadOwner)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, held := r.m[name]; held {
		if old.owner.Alive() {
			return refuse(name, shardreg.ErrDuplicate)
		}
		// Same name, same slot: the sorted names stay valid.
		r.m[name] = &rwEntry{name: name, value: v, owner: o, ready: ready}
		return nil
	}
	if len(r.m) >= r.cap {
		r.sweepLocked()
		if len(r.m) >= r.cap {
			return refuse(name, shardreg.ErrCapReached)
		}
	}
	r.m[name] = &rwEntry{name: name, value: v, owner: o, ready: ready}
	r.sorted = nil
	return nil
}

// sweepLocked removes every dead-owner entry; it runs only when a register
// finds the map full.
func (r *RWMap) sweepLocked() {
	for name, e := range r.m {
		if !e.owner.Alive() {
			delete(r.m, name)
			r.sorted = nil
		}
	}
}

// MarkReady makes name's entry ready when o owns it and is alive.
func (r *RWMap) MarkReady(name string, o owner.Ref) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[name]
	if e == nil || !e.owner.Same(o) || !o.Alive() {
		return false
	}
	e.ready = true
	return true
}

// Resolve looks name up under the read lock and removes a dead entry it
// finds under the write lock, only if it is still the same entry.
func (r *RWMap) Resolve(name string) (Entry, bool) {
	r.mu.RLock()
	e := r.m[name]
	ready := e != nil && e.ready
	r.mu.RUnlock()
	if e == nil {
		return Entry{}, false
	}
	if !e.owner.Alive() {
		r.removeIf(name, e)
		return Entry{}, false
	}
	if !ready {
		return Entry{}, false
	}
	return Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}, true
}

func (r *RWMap) removeIf(name string, e *rwEntry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[name] != e {
		return false
	}
	delete(r.m, name)
	r.sorted = nil
	return true
}

// UnregisterOwned removes name's entry when o owns it.
func (r *RWMap) UnregisterOwned(name string, o owner.Ref) bool {
	r.mu.RLock()
	e := r.m[name]
	r.mu.RUnlock()
	if e == nil || !e.owner.Same(o) {
		return false
	}
	return r.removeIf(name, e)
}

// ListReady walks the cached sorted names, skipping dead and not-ready
// entries, then removes the dead ones it met.
func (r *RWMap) ListReady() []Entry {
	var list []Entry
	var dead []*rwEntry
	r.mu.RLock()
	if r.sorted != nil {
		list, dead = r.collectLocked()
		r.mu.RUnlock()
	} else {
		r.mu.RUnlock()
		r.mu.Lock()
		if r.sorted == nil {
			names := make([]string, 0, len(r.m))
			for name := range r.m {
				names = append(names, name)
			}
			slices.Sort(names)
			r.sorted = names
		}
		list, dead = r.collectLocked()
		r.mu.Unlock()
	}
	for _, e := range dead {
		r.removeIf(e.name, e)
	}
	return list
}

func (r *RWMap) collectLocked() (list []Entry, dead []*rwEntry) {
	list = make([]Entry, 0, len(r.sorted))
	for _, name := range r.sorted {
		e := r.m[name]
		switch {
		case !e.owner.Alive():
			dead = append(dead, e)
		case e.ready:
			list = append(list, Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true})
		}
	}
	return list, dead
}

// Page lists and cuts one page out of the listing.
func (r *RWMap) Page(cursor string, limit int) ([]Entry, string, error) {
	return pageOf(r.ListReady(), cursor, limit)
}

// Len counts the entries held.
func (r *RWMap) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// Lookup is Resolve without the Entry.
func (r *RWMap) Lookup(name string) (int, owner.Ref, bool) {
	e, ok := r.Resolve(name)
	return e.Value, e.Owner, ok
}
