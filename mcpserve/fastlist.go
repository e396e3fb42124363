package mcpserve

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path answers a listing page it has answered before, while the
// kind's listing has not changed, by copying the page's encoded result: a
// 1,000-tool listing is then ten copies, not a thousand tools converted
// and encoded. A page is cached under the identity of the slice the
// catalog's View.List returned when the request began: the catalog
// returns the same slice exactly while nothing it lists has changed (a
// route ready, stopped, reclaimed, or its owner dead), so a request that
// sees the same slice sees the same listing, and a page encoded at or
// after that moment is right for it. The snapshot keeps its slice
// reachable, so that no later listing can reuse its address.
//
// Cursors name a position, and a client may send any valid one: a
// snapshot keeps at most maxCachedPages pages.

// maxCachedPages bounds the pages one listing snapshot keeps.
const maxCachedPages = 256

// pageKey is a page of a listing as a request asks for it.
type pageKey struct {
	cursor  string
	current bool // a 2026-07-28 result, annotated
}

// pageSnap is the cached pages of one listing of one kind.
type pageSnap struct {
	src   any            // the listing, kept reachable
	data  unsafe.Pointer // its identity: first element and length
	n     int
	mu    sync.Mutex
	pages map[pageKey][]byte
}

// listPages caches the pages of one kind's listing.
type listPages struct{ snap atomic.Pointer[pageSnap] }

// listCache is the page cache of each listing the fast path serves.
type listCache struct{ tools, resources, templates, prompts listPages }

// snapshotOf returns the snapshot of list, the listing a request has just
// read, replacing a snapshot of an older listing.
func snapshotOf[T any](lp *listPages, list []T) *pageSnap {
	data, n := unsafe.Pointer(unsafe.SliceData(list)), len(list)
	if s := lp.snap.Load(); s != nil && s.data == data && s.n == n {
		return s
	}
	s := &pageSnap{src: list, data: data, n: n, pages: map[pageKey][]byte{}}
	lp.snap.Store(s)
	return s
}

func (s *pageSnap) get(k pageKey) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages[k]
}

func (s *pageSnap) put(k pageKey, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pages) < maxCachedPages {
		s.pages[k] = b
	}
}

// listSnapshot returns the snapshot of the listing method pages through,
// or nil for a method that is not a listing.
func (s *Server) listSnapshot(method string) *pageSnap {
	switch method {
	case methodListTools:
		return snapshotOf(&s.lists.tools, s.cat.Tools().List())
	case methodListResources:
		return snapshotOf(&s.lists.resources, s.cat.Resources().List())
	case methodListTemplates:
		return snapshotOf(&s.lists.templates, s.cat.Templates().List())
	case methodListPrompts:
		return snapshotOf(&s.lists.prompts, s.cat.Prompts().List())
	}
	return nil
}

// cursorOf is the cursor of a listing request.
func cursorOf(req mcp.Request) string {
	switch r := req.(type) {
	case *mcp.ListToolsRequest:
		return r.Params.Cursor
	case *mcp.ListResourcesRequest:
		return r.Params.Cursor
	case *mcp.ListResourceTemplatesRequest:
		return r.Params.Cursor
	case *mcp.ListPromptsRequest:
		return r.Params.Cursor
	}
	return ""
}

// fastList answers a listing from the page cache, or answers it and caches
// the page.
func (s *Server) fastList(ctx context.Context, out *fastWriter, fr fastRequest, snap *pageSnap) {
	key := pageKey{cursor: cursorOf(fr.req), current: fr.current}
	if b := snap.get(key); b != nil {
		s.note.poke()
		out.respondEncoded(b)
		return
	}
	res, err := s.hygienic(ctx, fr.method, fr.req, s.answered)
	if err != nil {
		out.respond(nil, err)
		return
	}
	if fr.current {
		annotate(res, s.impl)
	}
	var buf bytes.Buffer
	if err := encodeTo(&buf, res); err != nil {
		out.respond(res, nil) // fails as respond fails
		return
	}
	b := buf.Bytes()
	snap.put(key, b)
	out.respondEncoded(b)
}
