package bench

import (
	"github.com/livereg/livereg/owner"
	"github.com/puzpuzpuz/xsync/v3"
)

// XsyncFloor is the best a design built on xsync.MapOf can do: one Load of
// a pointer to the entry, as livereg stores it, with no owner or ready
// check. It is a floor, not a registry. Values are pointers rather than
// structs because xsync's generic code copies a struct value through the
// runtime, which made a by-value floor slower than livereg itself.
type XsyncFloor struct {
	m *xsync.MapOf[string, *Entry]
}

// NewXsyncFloor makes an empty floor.
func NewXsyncFloor() *XsyncFloor {
	return &XsyncFloor{m: xsync.NewMapOf[string, *Entry]()}
}

// Resolve is a bare Load.
func (f *XsyncFloor) Resolve(name string) (Entry, bool) {
	e, ok := f.m.Load(name)
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

func (f *XsyncFloor) preload(name string, v int, o owner.Ref) error {
	f.m.Store(name, &Entry{Name: name, Value: v, Owner: o, Ready: true})
	return nil
}

// MapFloor is the physical floor on the machine: a plain Go map read with
// no synchronisation at all, the hash of the key plus a few cache lines.
// Filling it while it is read is a data race; the suite fills it first.
type MapFloor struct {
	m map[string]Entry
}

// NewMapFloor makes an empty floor. Like every implementation here it is
// not pre-sized, so that memory figures compare grown maps with grown maps.
func NewMapFloor() *MapFloor { return &MapFloor{m: make(map[string]Entry)} }

// Resolve is a bare map read.
func (f *MapFloor) Resolve(name string) (Entry, bool) {
	e, ok := f.m[name]
	return e, ok
}

func (f *MapFloor) preload(name string, v int, o owner.Ref) error {
	f.m[name] = Entry{Name: name, Value: v, Owner: o, Ready: true}
	return nil
}

// Lookup is a bare Load.
func (f *XsyncFloor) Lookup(name string) (int, owner.Ref, bool) {
	e, ok := f.m.Load(name)
	if !ok {
		return 0, owner.Ref{}, false
	}
	return e.Value, e.Owner, true
}

// Lookup is a bare map read.
func (f *MapFloor) Lookup(name string) (int, owner.Ref, bool) {
	e, ok := f.m[name]
	return e.Value, e.Owner, ok
}
