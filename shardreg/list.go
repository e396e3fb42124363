package shardreg

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/livereg/livereg/owner"
)

// DefaultPageSize is the page size Page uses when asked for none.
const DefaultPageSize = 100

// ListReady returns the ready entries of live owners, sorted by name, as one
// consistent snapshot. Dead-owner entries it finds are reclaimed after it
// has taken its snapshot, each as a step of its own.
//
// The returned slice is shared and read-only: callers must not modify it.
//
// Cost: while nothing in the registry changes, every call returns the same
// slice without allocating: in O(1) while none of the registry's owners
// dies (a load per stripe of the section counter and of the registry's
// death clock, whatever dies elsewhere in the process), and after such a
// death in one pass over the listed entries' owners (one load per run of
// entries of one owner), once. After a change, the first call rebuilds the listing: one
// scan of the map, one pass over the ready entries' owners, and a sort.
// Callers that find the cache stale while a rebuild runs wait for it and
// share the next rebuild's result instead of each running their own, so
// that writers meet one listing at a time, once for all the listers
// waiting. A rebuild completes in bounded time under any rate of writes
// and deaths: see the package doc.
func (r *Registry[V]) ListReady() []Entry[V] {
	if list, ok := r.cached(); ok {
		return list
	}
	// Any rebuild that begins from here on is taken during this call, so
	// its listing is a right answer for this call too, even once a write
	// has made it stale.
	r.listWaiters.Add(1)
	r.fire(hookListCounted)
	began := r.rebuilds.Load()
	r.fire(hookListWait)
	r.listMu.Lock()
	defer r.listMu.Unlock()
	waiters := r.listWaiters.Add(-1)
	if r.rebuilds.Load() != began {
		list := r.shared
		if waiters == 0 {
			// The last waiter served lets go of the shared listing, so
			// that it keeps no removed entry reachable.
			r.shared = nil
		}
		return list
	}
	// The rebuild that held listMu began before this call read the count,
	// and may well have cached what this call needs.
	if list, ok := r.cached(); ok {
		return list
	}
	r.rebuilds.Add(1)
	list := r.rebuild()
	// Listers that came to wait before the count moved were counted
	// before this load; those counted after it read the new count and
	// rebuild themselves.
	r.shared = nil
	if r.listWaiters.Load() > 0 {
		r.shared = list
	}
	return list
}

// cached returns the cached listing when it is still the registry's
// listing now.
//
// A cached snapshot was the listing at an instant when the map held exactly
// what it holds while the section counter reads the snapshot's version
// settled: no write completed since, and none is in progress. The entries it
// did not list were not ready, which only a write changes, or dead, which
// lasts. So it is still the listing at the instant of the first stripe's
// load below if each listed owner was still alive then. Two ways to know
// that:
//
//   - the registry's death clock reads settled and unchanged since a
//     reading that was taken before those owners were last seen alive: the
//     listed owners held visible entries, so they are tracked on it, and
//     none of them can have begun dying since (see owner.DeathClock), in
//     O(1);
//   - each listed owner reads alive now, hence also at the earlier stripe
//     load: deaths are permanent. The clock is read first, so when every
//     owner is alive the snapshot is stamped with the new reading, and the
//     next call is O(1) again until the clock moves.
func (r *Registry[V]) cached() ([]Entry[V], bool) {
	s := r.snap.Load()
	if s == nil || !r.unchangedSince(s.version) {
		return nil, false
	}
	d, settled := r.deaths()
	if settled && s.deathsKnown && d == s.deaths {
		return s.list, true
	}
	var last owner.Ref
	for i := range s.list {
		// One load per run of entries of one owner.
		if o := s.list[i].Owner; o != last {
			if !o.Alive() {
				return nil, false
			}
			last = o
		}
	}
	if settled {
		// Losing the swap to a writer's drop (or to another refresh) is
		// fine: the next call decides afresh.
		fresh := *s
		fresh.deaths, fresh.deathsKnown = d, true
		r.snap.CompareAndSwap(s, &fresh)
	}
	return s.list, true
}

// rebuild takes a new snapshot, reclaims the dead entries it passed over,
// and caches the snapshot. It runs under listMu.
func (r *Registry[V]) rebuild() []Entry[V] {
	s, dead := r.takeSnapshot()
	reclaimed := uint64(0)
	for _, e := range dead {
		if r.removeIfCurrent(e.name, e) {
			reclaimed++
		}
	}
	// The reclaims removed only entries the snapshot does not list, so
	// while they are the only changes since it was taken it is still the
	// listing: stamp it with the version they left. Should any other write
	// have completed, the version never reads that again, and the snapshot
	// is dropped below.
	s.version += reclaimed
	r.fire(hookBeforeCacheStore)
	r.snap.Store(s)
	// A write that completed since the snapshot was taken may have looked
	// for a cached listing to drop before this store (endWrite): drop it
	// here instead, so that the cache never holds a removed entry.
	if !r.unchangedSince(s.version) {
		r.snap.CompareAndSwap(s, nil)
	}
	return s.list
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
	// The cursor first: a malformed one costs no listing.
	after, err := decodeCursorOrEmpty(cursor)
	if err != nil {
		return nil, "", err
	}
	page, next = pageAfter(r.ListReady(), entryName[V], after, limit)
	return page, next, nil
}

func entryName[V any](e *Entry[V]) string { return e.Name }

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
