package catalog

import "sync/atomic"

// A Remote lists the routes that the other replicas of a fleet hold, so
// that a catalog's listings show the fleet's catalog, not only this
// process's (package etcdfleet's Replica.Remote is one). A catalog
// configured with one merges it into the listings and pages of Tools and Resources,
// Version and Changes: a consumer that starts, stops or dies on another
// replica moves this catalog's listings too, and a server built on it
// sends list_changed.
//
// A Remote that is also a RemoteSurface lists prompts and resource
// templates too.
//
// A Remote may list this replica's own routes as well: a name held here is
// listed once, as the local route describes it. The catalog does not
// forward calls: a call for a route held only elsewhere gets ErrNotFound,
// and a server forwards it (package mcpserve's Fleet).
//
// All methods are called concurrently, from any goroutine, and must not
// block. Tools and Resources return sorted slices (by name, by URI) that
// the catalog shares and never modifies; while a kind's version stays the
// same, they should return the same slice, which the catalog then merges
// once.
type Remote interface {
	Tools() []Tool
	Resources() []Resource
	// ToolsVersion and ResourcesVersion grow with every change to the
	// matching listing.
	ToolsVersion() uint64
	ResourcesVersion() uint64
	// Watch arranges for f to be called after every change to either
	// listing, once its version has grown. The catalog calls it once, from
	// New; f does not block.
	Watch(f func())
}

// A RemoteSurface is a Remote that also lists the prompts and resource
// templates the other replicas hold (package etcdfleet's Replica.Remote
// is one). It is an interface of its own, which a catalog finds on its
// Remote by a type assertion in New, so that a Remote of tools and
// resources alone keeps compiling and behaving as it did.
//
// A catalog whose Remote is one merges it into the listings and pages of
// Prompts and Templates, their Versions, Version and Changes (Watch
// reports these changes too). Its ReadResource then matches a URI against
// the fleet's templates as well as its own, so that every replica answers
// a URI the same way: see ReadResource and ElsewhereError.
//
// The methods obey Remote's rules. Prompts returns a slice sorted by
// name, Templates one sorted by TemplateKey (the order of a catalog's
// template listing), each template valid (TemplateKey accepts it). The
// catalog parses the templates once per TemplatesVersion.
type RemoteSurface interface {
	Remote
	Prompts() []Prompt
	Templates() []ResourceTemplate
	// PromptsVersion and TemplatesVersion grow with every change to the
	// matching listing.
	PromptsVersion() uint64
	TemplatesVersion() uint64
}

// merged caches one merged listing, keyed by the local listing it was made
// from (its first element's address and its length) and the remote
// version: while neither changes, listing reuses it without allocating.
type merged[T any] struct {
	local   *T
	n       int
	version uint64
	out     []T
}

// merge lists local and remote as one sorted listing. A name in both is
// listed once, as local has it: local is the route this replica serves.
// The remote version is read before the remote listing, so that a cached
// listing is never older than its key says.
func merge[T any](local []T, version uint64, remote func() []T, cache *atomic.Pointer[merged[T]], name func(*T) string) []T {
	var first *T
	if len(local) > 0 {
		first = &local[0]
	}
	if m := cache.Load(); m != nil && m.local == first && m.n == len(local) && m.version == version {
		return m.out
	}
	rem := remote()
	out := make([]T, 0, len(local)+len(rem))
	i, j := 0, 0
	for i < len(local) || j < len(rem) {
		switch {
		case j == len(rem):
			out = append(out, local[i])
			i++
		case i == len(local):
			out = append(out, rem[j])
			j++
		case name(&local[i]) < name(&rem[j]):
			out = append(out, local[i])
			i++
		case name(&local[i]) == name(&rem[j]):
			out = append(out, local[i])
			i++
			j++
		default:
			out = append(out, rem[j])
			j++
		}
	}
	cache.Store(&merged[T]{local: first, n: len(local), version: version, out: out})
	return out
}

func toolName(t *Tool) string        { return t.Name }
func resourceURI(r *Resource) string { return r.URI }
func promptNameOf(p *Prompt) string  { return p.Name }

// templateSortKey is a template's key, the sort key of template listings.
// A template whose key cannot be made (none that a catalog or a
// RemoteSurface lists) sorts by its own text.
func templateSortKey(t *ResourceTemplate) string {
	if key, err := TemplateKey(t.URITemplate); err == nil {
		return key
	}
	return t.URITemplate
}
func toolOf(rt *route) Tool         { return rt.tool }
func resourceOf(rt *route) Resource { return rt.resource }
