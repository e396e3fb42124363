package catalog

import (
	"sync/atomic"

	"github.com/livereg/livereg/shardreg"
)

// View is one kind's listing in a catalog: [Catalog.Tools],
// [Catalog.Resources], [Catalog.Prompts] or [Catalog.Templates]. A View is
// a small value that reads the catalog live; it is safe for concurrent
// use, and so are all its methods.
type View[T any] struct{ l *lister[T] }

// lister is what a catalog keeps to list one kind: its side, how a route
// describes itself, and the caches that let an unchanged listing be
// returned again without allocating.
type lister[T any] struct {
	s    *side
	desc func(*route) T
	key  func(*T) string // the sort key of a kind a Remote lists; nil for others
	off  bool            // Config turned the kind off (a negative cap)
	proj atomic.Pointer[projection[T]]
	// With a Remote, for tools and resources (and with a RemoteSurface,
	// prompts and templates): the fleet's listing of the kind and its
	// version; nil for a catalog without one.
	remote        func() []T
	remoteVersion func() uint64
	merged        atomic.Pointer[merged[T]]
}

// List returns the live, ready routes of the kind, sorted by name (URI for
// resources, key for templates: the template with every variable named
// "_"). While the kind does not change, every call returns the same slice
// without allocating: it is shared and read-only.
//
// With a Remote, a listing of tools or resources is the fleet's: the
// Remote's merged in, under the same sharing rule while neither side
// changes; with a RemoteSurface, so is a listing of prompts or templates.
func (v View[T]) List() []T {
	l := v.l
	local := project(l.s.reg.ListReady(), &l.proj, l.desc)
	if l.remote == nil {
		return local
	}
	return merge(local, l.remoteVersion(), l.remote, &l.merged, l.key)
}

// Page returns one page of List for cursor pagination (tools/list and its
// siblings): up to limit routes after cursor (100 when limit <= 0) and the
// next cursor, "" on the last page. A cursor it did not make gets
// ErrInvalidCursor. Without a Remote it costs the page, not the listing.
func (v View[T]) Page(cursor string, limit int) ([]T, string, error) {
	l := v.l
	if l.remote != nil {
		return shardreg.PageSorted(v.List(), l.key, cursor, limit)
	}
	return page(l.s.reg, cursor, limit, l.desc)
}

// Version returns a number that grows with every change List can see: a
// route of the kind becoming ready, stopping, or being reclaimed after its
// owner died, here or, with a Remote, on another replica. One load per
// registry shard.
func (v View[T]) Version() uint64 {
	l := v.l
	if l.remoteVersion == nil {
		return l.s.reg.Version()
	}
	return l.s.reg.Version() + l.remoteVersion()
}

// Enabled reports whether the catalog can hold routes of the kind at all:
// false for prompts or templates that Config turned off with a negative
// cap. A server advertises a kind only when it is enabled.
func (v View[T]) Enabled() bool { return !v.l.off }

// Tools is the catalog's view of its tools.
func (c *Catalog) Tools() View[Tool] { return View[Tool]{&c.toolView} }

// Resources is the catalog's view of its fixed resources.
func (c *Catalog) Resources() View[Resource] { return View[Resource]{&c.resourceView} }

// Prompts is the catalog's view of its prompts.
func (c *Catalog) Prompts() View[Prompt] { return View[Prompt]{&c.promptView} }

// Templates is the catalog's view of its resource templates. MCP has no
// list_changed of their own: a server sends resources list_changed when
// their Version moves.
func (c *Catalog) Templates() View[ResourceTemplate] {
	return View[ResourceTemplate]{&c.templateView}
}

// initViews binds each kind's lister to its side and, for tools and
// resources, to the Remote, if any; for prompts and templates, to the
// RemoteSurface, if the Remote is one.
func (c *Catalog) initViews(promptsOff, templatesOff bool) {
	c.toolView = lister[Tool]{s: &c.tools, desc: toolOf, key: toolName}
	c.resourceView = lister[Resource]{s: &c.resources, desc: resourceOf, key: resourceURI}
	c.promptView = lister[Prompt]{s: &c.prompts, desc: promptDesc, key: promptNameOf, off: promptsOff}
	c.templateView = lister[ResourceTemplate]{s: &c.templates, desc: templateDesc, key: templateSortKey, off: templatesOff}
	if r := c.remote; r != nil {
		c.toolView.remote, c.toolView.remoteVersion = r.Tools, r.ToolsVersion
		c.resourceView.remote, c.resourceView.remoteVersion = r.Resources, r.ResourcesVersion
	}
	// A kind Config turned off lists nothing, the fleet's included: the
	// server does not advertise it.
	if r := c.surface; r != nil && !promptsOff {
		c.promptView.remote, c.promptView.remoteVersion = r.Prompts, r.PromptsVersion
	}
	if r := c.surface; r != nil && !templatesOff {
		c.templateView.remote, c.templateView.remoteVersion = r.Templates, r.TemplatesVersion
	}
}
