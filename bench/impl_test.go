package bench

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// Entry is what every implementation resolves and lists. The value type is
// fixed to int: the suite compares maps, not payloads.
type Entry = shardreg.Entry[int]

// Resolver is the read path every implementation and floor has.
type Resolver interface {
	// Resolve returns name's entry when it is ready and its owner alive.
	Resolve(name string) (Entry, bool)
	// Lookup is Resolve returning only the value and the owner: the
	// shape of the lookup a dispatcher makes on every request, and the one
	// the read workloads time.
	Lookup(name string) (int, owner.Ref, bool)
}

// Registry is the surface the workloads drive. *shardreg.Registry[int]
// implements it as it is, so livereg is measured without an adapter.
type Registry interface {
	Resolver
	// Register adds a not-ready entry; errors wrap shardreg's sentinels.
	Register(name string, v int, o owner.Ref) error
	// RegisterReady is Register for an entry that is ready at once.
	RegisterReady(name string, v int, o owner.Ref) error
	// MarkReady makes the entry ready when o owns it and is alive.
	MarkReady(name string, o owner.Ref) bool
	// UnregisterOwned removes the entry only when o owns it.
	UnregisterOwned(name string, o owner.Ref) bool
	// ListReady returns the ready live entries sorted by name; callers
	// must not modify the slice.
	ListReady() []Entry
	// Page returns up to limit entries of the ListReady view after cursor.
	Page(cursor string, limit int) ([]Entry, string, error)
	// Len counts the entries held, dead ones not yet reclaimed included.
	Len() int
}

// Impl names a registry implementation and makes empty instances of it.
type Impl struct {
	// Name is the impl= part of the benchmark names.
	Name string
	// New makes an empty registry holding at most capacity entries.
	New func(capacity int) Registry
}

// Registries lists the implementations under comparison, livereg first so
// that benchstat's column view uses it as the base.
func Registries() []Impl {
	return []Impl{
		{"livereg", func(n int) Registry {
			r, err := shardreg.New[int](shardreg.WithCap(n))
			if err != nil {
				panic(err) // only a cap below 1, which no caller passes
			}
			return r
		}},
		{"reference", func(n int) Registry { return NewReference(n) }},
		{"rwmutex", func(n int) Registry { return NewRWMap(n) }},
		{"syncmap", func(n int) Registry { return NewSyncMap(n) }},
	}
}

// Floor names a lower bound on lookup cost: a map read that checks nothing.
type Floor struct {
	// Name is the impl= part of the benchmark names.
	Name string
	// New makes an empty floor.
	New func() Resolver
}

// Floors lists the lookup floors. They have no owner semantics and are
// never part of the conformance test.
func Floors() []Floor {
	return []Floor{
		{"floor-xsync", func() Resolver { return NewXsyncFloor() }},
		{"floor-map", func() Resolver { return NewMapFloor() }},
	}
}

// preloader is implemented by what can be filled faster than by
// RegisterReady, or only by preloading (the floors). Filling is setup, never
// timed; the result must be the state RegisterReady calls would leave.
type preloader interface {
	preload(name string, v int, o owner.Ref) error
}

// Preload adds a ready entry to a registry or floor for benchmark setup.
// The reference design's register sweeps the whole map, so filling it with
// a million entries through Register would take hours; its preload skips
// the sweep, which finds nothing while every owner is alive.
func Preload(dst Resolver, name string, v int, o owner.Ref) error {
	if p, ok := dst.(preloader); ok {
		return p.preload(name, v, o)
	}
	r, ok := dst.(Registry)
	if !ok {
		return fmt.Errorf("bench: %T cannot be filled", dst)
	}
	return r.RegisterReady(name, v, o)
}

// refuse builds the error every baseline returns, the same type and
// allocation as livereg's, so that refusals cost the same to report.
func refuse(name string, err error) error {
	return &shardreg.Error{Op: "register", Name: name, Err: err}
}

// checkName applies livereg's built-in name checks, so that baselines pay
// for them too.
func checkName(name string) error {
	var reason string
	switch {
	case name == "":
		reason = "empty"
	case len(name) > shardreg.MaxNameLen:
		reason = "too long"
	case !utf8.ValidString(name):
		reason = "not valid UTF-8"
	default:
		return nil
	}
	return refuse(name, fmt.Errorf("%w: %s", shardreg.ErrInvalidName, reason))
}

// sortEntries orders a listing by name, as MCP asks for deterministic
// order.
func sortEntries(list []Entry) {
	slices.SortFunc(list, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}

// pageOf cuts one page out of a sorted listing, the way an SDK that lists
// and then paginates does. Its cursor is the last name returned.
func pageOf(list []Entry, cursor string, limit int) ([]Entry, string, error) {
	start := 0
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(raw) == 0 {
			return nil, "", errors.Join(shardreg.ErrInvalidCursor, err)
		}
		after := string(raw)
		start, _ = slices.BinarySearchFunc(list, after, func(e Entry, name string) int {
			if e.Name <= name {
				return -1
			}
			return 1
		})
	}
	if limit <= 0 {
		limit = shardreg.DefaultPageSize
	}
	end := start + min(limit, len(list)-start)
	next := ""
	if end < len(list) {
		next = base64.RawURLEncoding.EncodeToString([]byte(list[end-1].Name))
	}
	return list[start:end:end], next, nil
}

// The implementations under test satisfy the interfaces as they are.
var (
	_ Registry = (*shardreg.Registry[int])(nil)
	_ Registry = (*Reference)(nil)
	_ Registry = (*RWMap)(nil)
	_ Registry = (*SyncMap)(nil)
)
