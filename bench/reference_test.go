package bench

import (
	"sync"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// Reference is the design of ADR-0068's reference system: one mutex around
// one hash map, with a full retain sweep of dead-owner entries inside every
// register (before the duplicate and cap checks), resolve and listing. It
// is correct and simple; its cost grows with the number of entries on every
// call. MarkReady is owner-conditional, as livereg's is, so that both do the
// same work.
type Reference struct {
	mu  sync.Mutex
	m   map[string]*refEntry
	cap int
}

type refEntry struct {
	name  string
	value int
	owner owner.Ref
	ready bool // guarded by mu
}

// NewReference makes an empty reference registry holding at most capacity
// entries.
func NewReference(capacity int) *Reference {
	return &Reference{m: make(map[string]*refEntry), cap: capacity}
}

// pruneLocked is the reference system's retain: it visits every entry.
func (r *Reference) pruneLocked() {
	for name, e := range r.m {
		if !e.owner.Alive() {
			delete(r.m, name)
		}
	}
}

// Register adds a not-ready entry. A dead duplicate has been swept away
// before the duplicate check, so its name is free; a dead entry under any
// name has released its slot before the cap check.
func (r *Reference) Register(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, false, true)
}

// RegisterReady is Register with the entry ready at once.
func (r *Reference) RegisterReady(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, true, true)
}

func (r *Reference) preload(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, true, false)
}

func (r *Reference) register(name string, v int, o owner.Ref, ready, prune bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	if !o.Alive() {
		return refuse(name, shardreg.ErrDeadOwner)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prune {
		r.pruneLocked()
	}
	if _, held := r.m[name]; held {
		return refuse(name, shardreg.ErrDuplicate)
	}
	if len(r.m) >= r.cap {
		return refuse(name, shardreg.ErrCapReached)
	}
	r.m[name] = &refEntry{name: name, value: v, owner: o, ready: ready}
	return nil
}

// MarkReady makes name's entry ready when o owns it and is alive.
func (r *Reference) MarkReady(name string, o owner.Ref) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[name]
	if e == nil || !e.owner.Same(o) || !o.Alive() {
		return false
	}
	e.ready = true
	return true
}

// Resolve sweeps, then looks name up.
func (r *Reference) Resolve(name string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	e := r.m[name]
	if e == nil || !e.ready {
		return Entry{}, false
	}
	return Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}, true
}

// UnregisterOwned removes name's entry when o owns it.
func (r *Reference) UnregisterOwned(name string, o owner.Ref) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[name]
	if e == nil || !e.owner.Same(o) {
		return false
	}
	delete(r.m, name)
	return true
}

// ListReady sweeps, collects the ready entries and sorts them.
func (r *Reference) ListReady() []Entry {
	r.mu.Lock()
	r.pruneLocked()
	list := make([]Entry, 0, len(r.m))
	for _, e := range r.m {
		if e.ready {
			list = append(list, Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true})
		}
	}
	r.mu.Unlock()
	sortEntries(list)
	return list
}

// Page lists and cuts one page out of the listing.
func (r *Reference) Page(cursor string, limit int) ([]Entry, string, error) {
	return pageOf(r.ListReady(), cursor, limit)
}

// Len counts the entries held.
func (r *Reference) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// Lookup is Resolve without the Entry.
func (r *Reference) Lookup(name string) (int, owner.Ref, bool) {
	e, ok := r.Resolve(name)
	return e.Value, e.Owner, ok
}
