package bench

import (
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// SyncMap is the standard library's concurrent map with ADR-0068's owner
// checks: a dead duplicate is replaced with CompareAndSwap, removals are
// CompareAndDelete of the entry that was seen, and an atomic count enforces
// the cap, sweeping with Range when it is reached. sync.Map keeps no order,
// so every listing sorts.
type SyncMap struct {
	m     sync.Map // string → *syncEntry
	count atomic.Int64
	cap   int64
}

type syncEntry struct {
	name  string
	value int
	owner owner.Ref
	ready atomic.Bool
}

// NewSyncMap makes an empty SyncMap holding at most capacity entries.
func NewSyncMap(capacity int) *SyncMap {
	return &SyncMap{cap: int64(capacity)}
}

// Register adds a not-ready entry, replacing a dead duplicate in place.
func (r *SyncMap) Register(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, false)
}

// RegisterReady is Register with the entry ready at once.
func (r *SyncMap) RegisterReady(name string, v int, o owner.Ref) error {
	return r.register(name, v, o, true)
}

func (r *SyncMap) register(name string, v int, o owner.Ref, ready bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	if !o.Alive() {
		return refuse(name, shardreg.ErrDeadOwner)
	}
	var e *syncEntry
	for {
		cur, held := r.m.Load(name)
		if held && cur.(*syncEntry).owner.Alive() {
			return refuse(name, shardreg.ErrDuplicate)
		}
		if e == nil {
			e = &syncEntry{name: name, value: v, owner: o}
			e.ready.Store(ready)
		}
		if held {
			// A takeover keeps the dead entry's slot.
			if r.m.CompareAndSwap(name, cur, e) {
				return nil
			}
			continue
		}
		if !r.reserve() {
			if r.sweep() > 0 {
				continue
			}
			return refuse(name, shardreg.ErrCapReached)
		}
		if _, loaded := r.m.LoadOrStore(name, e); loaded {
			r.count.Add(-1)
			continue
		}
		return nil
	}
}

// reserve takes a slot without ever going over the cap.
func (r *SyncMap) reserve() bool {
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

// sweep removes every dead-owner entry and returns how many it removed.
func (r *SyncMap) sweep() int {
	removed := 0
	r.m.Range(func(k, v any) bool {
		if e := v.(*syncEntry); !e.owner.Alive() && r.removeIf(e.name, e) {
			removed++
		}
		return true
	})
	return removed
}

func (r *SyncMap) removeIf(name string, e *syncEntry) bool {
	if r.m.CompareAndDelete(name, e) {
		r.count.Add(-1)
		return true
	}
	return false
}

// MarkReady makes name's entry ready when o owns it and is alive.
func (r *SyncMap) MarkReady(name string, o owner.Ref) bool {
	cur, ok := r.m.Load(name)
	if !ok {
		return false
	}
	e := cur.(*syncEntry)
	if !e.owner.Same(o) || !o.Alive() {
		return false
	}
	e.ready.Store(true)
	return true
}

// Resolve loads name and removes a dead entry it finds, if still mapped.
func (r *SyncMap) Resolve(name string) (Entry, bool) {
	cur, ok := r.m.Load(name)
	if !ok {
		return Entry{}, false
	}
	e := cur.(*syncEntry)
	ready := e.ready.Load()
	if !e.owner.Alive() {
		r.removeIf(name, e)
		return Entry{}, false
	}
	if !ready {
		return Entry{}, false
	}
	return Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}, true
}

// UnregisterOwned removes name's entry when o owns it.
func (r *SyncMap) UnregisterOwned(name string, o owner.Ref) bool {
	cur, ok := r.m.Load(name)
	if !ok {
		return false
	}
	e := cur.(*syncEntry)
	return e.owner.Same(o) && r.removeIf(name, e)
}

// ListReady ranges over the map, removes the dead entries it met, and sorts.
func (r *SyncMap) ListReady() []Entry {
	list := make([]Entry, 0, r.count.Load())
	var dead []*syncEntry
	r.m.Range(func(_, v any) bool {
		e := v.(*syncEntry)
		ready := e.ready.Load()
		switch {
		case !e.owner.Alive():
			dead = append(dead, e)
		case ready:
			list = append(list, Entry{Name: e.name, Value: e.value, Owner: e.owner, Ready: true})
		}
		return true
	})
	for _, e := range dead {
		r.removeIf(e.name, e)
	}
	sortEntries(list)
	return list
}

// Page lists and cuts one page out of the listing.
func (r *SyncMap) Page(cursor string, limit int) ([]Entry, string, error) {
	return pageOf(r.ListReady(), cursor, limit)
}

// Len counts the entries held (and slots being filled).
func (r *SyncMap) Len() int { return int(r.count.Load()) }

// Lookup is Resolve without the Entry.
func (r *SyncMap) Lookup(name string) (int, owner.Ref, bool) {
	e, ok := r.Resolve(name)
	return e.Value, e.Owner, ok
}
