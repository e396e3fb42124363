package shardreg

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultPageSize is the page size Page uses when asked for none.
const DefaultPageSize = 100

// snapshot is a cached ListReady result and the state it was read in.
type snapshot[V any] struct {
	at   stamp
	list []Entry[V]
}

// ListReady returns the ready entries of live owners, sorted by name, as one
// consistent snapshot. Dead-owner entries it finds are reclaimed first.
//
// The returned slice is shared and read-only: callers must not modify it.
// While nothing changes (no register, unregister, ready flip or owner
// death) every call returns the same slice, in O(1) and without allocating.
func (r *Registry[V]) ListReady() []Entry[V] {
	if s := r.snap.Load(); s != nil && r.unchangedSince(s.at) {
		return s.list
	}
	list, at, dead := r.scanReady()
	if len(dead) > 0 {
		for _, e := range dead {
			r.removeIfCurrent(e.name, e)
		}
		list, at, _ = r.scanReady()
	}
	r.snap.Store(&snapshot[V]{at: at, list: list})
	return list
}

// unchangedSince reports whether the registry and the owners are exactly as
// they were at a: no write section open or completed, no death in progress
// or completed since.
func (r *Registry[V]) unchangedSince(a stamp) bool {
	if r.seq.Load() != a.version<<sectionBits {
		return false
	}
	d, settled := r.deaths()
	return settled && d == a.deaths
}

// scanReady reads one consistent, sorted view of the ready live entries,
// and the dead-owner entries it passed over.
func (r *Registry[V]) scanReady() (list []Entry[V], at stamp, dead []*entry[V]) {
	var ready []*entry[V]
	at = r.readConsistent(true, func() {
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
			return true
		})
		r.fire(hookListScanned)
	})
	// Sorting pointers moves a word per swap instead of a whole Entry.
	slices.SortFunc(ready, func(a, b *entry[V]) int { return strings.Compare(a.name, b.name) })
	list = make([]Entry[V], len(ready))
	for i, e := range ready {
		list[i] = Entry[V]{Name: e.name, Value: e.value, Owner: e.owner, Ready: true}
	}
	return list, at, dead
}

// Page returns one page of the ListReady view for cursor pagination, as in
// MCP's tools/list: up to limit entries (DefaultPageSize when limit <= 0)
// after the cursor, and the cursor of the next page, or "" on the last one.
// The empty cursor starts at the beginning.
//
// A cursor is opaque to clients; it names the last entry returned, so a walk
// resumes correctly across concurrent changes: an entry present for the whole
// walk is returned exactly once. A malformed cursor gets ErrInvalidCursor
// and changes nothing. A cursor carries no secret: a well-formed one a
// client makes up just resumes after the name it holds. The page shares
// ListReady's read-only slice.
func (r *Registry[V]) Page(cursor string, limit int) (page []Entry[V], next string, err error) {
	var after string
	if cursor != "" {
		if after, err = decodeCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	start := 0
	list := r.ListReady()
	if cursor != "" {
		start, _ = slices.BinarySearchFunc(list, after, func(e Entry[V], name string) int {
			if e.Name <= name {
				return -1
			}
			return 1
		})
	}
	if limit <= 0 {
		limit = DefaultPageSize
	}
	end := start + min(limit, len(list)-start)
	page = list[start:end:end]
	if end < len(list) {
		next = encodeCursor(list[end-1].Name)
	}
	return page, next, nil
}

// cursorPrefix versions the cursor format, so that a cursor from some other
// paginator is refused rather than misread.
const cursorPrefix = "lr1:"

func encodeCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + last))
}

func decodeCursor(c string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("%w: not base64url: %w", ErrInvalidCursor, err)
	}
	name, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok || name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: unknown format", ErrInvalidCursor)
	}
	return name, nil
}
