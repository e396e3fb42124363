package catalog

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/internal/quote"
)

// ElsewhereError is ReadResource's error for a URI that, by the fleet's
// rule, a route of another replica serves (see ReadResource): a fixed
// resource of that URI, or a template more specific than any of this
// catalog's that match it. It wraps ErrNotFound: the catalog does not
// forward reads. A server forwards the read to the replica that holds
// the route named by Kind and Name (package mcpserve's Fleet does).
type ElsewhereError struct {
	// URI is the URI read.
	URI string
	// Kind is KindResource or KindTemplate; Name is the resource's URI or
	// the template's key (TemplateKey), the name its holder claimed.
	Kind Kind
	Name string
}

func (e *ElsewhereError) Error() string {
	return "catalog: resource " + quote.Name(e.URI) + ": served by another replica's " + string(e.Kind)
}

func (e *ElsewhereError) Unwrap() error { return ErrNotFound }

// fleetTemplates indexes a RemoteSurface's templates as a templateIndex
// does a catalog's own, rebuilt when the Remote's TemplatesVersion moves:
// by the first read after the move, under mu, so that concurrent reads
// parse the listing once. A read of an unchanged listing loads the index
// without locking.
type fleetTemplates struct {
	mu   sync.Mutex
	snap atomic.Pointer[fleetSnap]
}

type fleetSnap struct {
	version uint64
	*templateSnap
}

// load returns the index of r's templates as of its current version.
func (f *fleetTemplates) load(r RemoteSurface) *templateSnap {
	v := r.TemplatesVersion()
	if s := f.snap.Load(); s != nil && s.version == v {
		return s.templateSnap
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.snap.Load(); s != nil && s.version == v {
		return s.templateSnap
	}
	// The version before the listing, as merge reads them: an index is
	// never older than its version says.
	list := r.Templates()
	ts := make([]*templateRoute, 0, len(list))
	for _, t := range list {
		if tr := remoteTemplate(t); tr != nil {
			ts = append(ts, tr)
		}
	}
	s := &fleetSnap{version: v, templateSnap: newTemplateSnap(slices.Values(ts))}
	f.snap.Store(s)
	return s.templateSnap
}

// remoteTemplate is a Remote's template as the index holds it, without a
// route: it is matched, never read. nil for one that does not parse,
// which a RemoteSurface does not list.
func remoteTemplate(t ResourceTemplate) *templateRoute {
	key, tmpl, err := parseTemplate(t.URITemplate)
	if err != nil {
		return nil
	}
	tr := &templateRoute{tpl: t, tmpl: tmpl, key: key, literal: literalBytes(t.URITemplate)}
	tr.prefix, tr.lits, tr.endsLit = literalPieces(t.URITemplate)
	return tr
}

// servedElsewhere applies the fleet's rule to a read of uri that no local
// fixed resource serves and that local, this catalog's best template (nil
// for none), would: it returns an *ElsewhereError when a route of the
// Remote wins, nil when local does (or nothing does). A Remote that lists
// this catalog's own live templates changes nothing: the local match saw
// each of them, and a template is never better than itself.
func (c *Catalog) servedElsewhere(uri string, local *templateRoute) error {
	if local != nil {
		if _, ok := slices.BinarySearchFunc(c.surface.Resources(), uri, func(r Resource, uri string) int {
			return strings.Compare(r.URI, uri)
		}); ok {
			return &ElsewhereError{URI: uri, Kind: KindResource, Name: uri}
		}
	}
	best, _ := c.fleetTpl.load(c.surface).match(uri, local, anyTemplate)
	if best == nil || best == local {
		return nil
	}
	return &ElsewhereError{URI: uri, Kind: KindTemplate, Name: best.key}
}

func anyTemplate(*templateRoute) bool { return true }
