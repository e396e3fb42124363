package catalog

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/yosida95/uritemplate/v3"

	"github.com/livereg/livereg/bindsec"
)

// ResourceTemplate describes a resource template route, as
// resources/templates/list advertises it. URITemplate is an RFC 6570 URI
// template whose scheme is literal ("files://{path}").
type ResourceTemplate struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	// MIMEType is the type of every resource the template matches, if
	// they share one: a read whose contents name none gets it.
	MIMEType string
	// AllowRawBytes lets a variable decode to a NUL byte or to invalid
	// UTF-8. By default a read whose variables decode to either is
	// refused with ErrInvalidArguments before the reader runs.
	AllowRawBytes bool
}

// templateRoute is what a template route needs beyond its route entry.
type templateRoute struct {
	rt      *route
	tpl     ResourceTemplate
	tmpl    *uritemplate.Template
	rawTmpl *uritemplate.Template // matches the URI escaped: see rawVars
	key     string                // the registry name: the template with every variable named "_"
	prefix  string                // the literal text before the first expression
	literal int                   // literal bytes in the template: its specificity
	// lits are the literal pieces after the prefix, in order; endsLit
	// says the template ends with the last one. See mayMatch.
	lits     []string
	endsLit  bool
	complete Completer
}

// better reports whether t wins over u when both match a URI: the more
// literal bytes, the more specific; between equals, the smaller template
// string. The order is total, so the winner never depends on timing.
func (t *templateRoute) better(u *templateRoute) bool {
	if t.literal != u.literal {
		return t.literal > u.literal
	}
	return t.tpl.URITemplate < u.tpl.URITemplate
}

// parseTemplate parses an RFC 6570 template with uritemplate and returns
// its registry key, the template with every variable named "_"
// ("files://{_}/{?_,_}" for "files://{dir}/{?q,n}"): two templates that differ
// only in their variable names have the same key, so that the registry's
// duplicate guard refuses the second while the first's owner lives
// (uritemplate.Equals without CompareVarname says the same; a test keeps
// the two in step). The key keeps operators and modifiers, maxlen
// normalised.
func parseTemplate(raw string) (key string, t *uritemplate.Template, err error) {
	t, err = uritemplate.New(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%w: not an RFC 6570 template: %w", ErrInvalidName, err)
	}
	prefix, _, _ := strings.Cut(raw, "{")
	if u, err := url.Parse(prefix); err != nil || u.Scheme == "" {
		return "", nil, fmt.Errorf("%w: templates are absolute, with a literal scheme", ErrInvalidName)
	}
	var b strings.Builder
	for rest := raw; rest != ""; {
		lit, expr, found := strings.Cut(rest, "{")
		b.WriteString(lit)
		if !found {
			break
		}
		expr, rest, _ = strings.Cut(expr, "}") // uritemplate checked the braces
		b.WriteByte('{')
		if expr != "" && strings.IndexByte("+#./;?&=,!@|", expr[0]) >= 0 {
			b.WriteByte(expr[0])
			expr = expr[1:]
		}
		for i, spec := range strings.Split(expr, ",") {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('_')
			if _, n, ok := strings.Cut(spec, ":"); ok {
				ml, _ := strconv.Atoi(n)
				b.WriteString(":" + strconv.Itoa(ml))
			} else if strings.HasSuffix(spec, "*") {
				b.WriteByte('*')
			}
		}
		b.WriteByte('}')
	}
	return b.String(), t, nil
}

// literalPieces splits the literal text of raw around its expressions:
// the prefix before the first one, the pieces after each, and whether
// raw ends with a piece.
func literalPieces(raw string) (prefix string, lits []string, endsLit bool) {
	prefix, rest, _ := strings.Cut(raw, "{")
	for rest != "" {
		_, after, _ := strings.Cut(rest, "}")
		lit, next, found := strings.Cut(after, "{")
		if lit != "" {
			lits = append(lits, lit)
		}
		endsLit = lit != "" && !found
		rest = next
	}
	return prefix, lits, endsLit
}

// mayMatch is a quick test that uri could match t: its literal pieces
// appear in uri, in order, after the prefix (which the index matched),
// and the last one ends uri if it ends the template. A template's
// literals appear verbatim in every URI it matches, so a false answer is
// always right; a true one leaves the matching to uritemplate, which
// costs microseconds and allocates. It is what keeps templates that share
// a prefix cheap.
func (t *templateRoute) mayMatch(uri string) bool {
	rest := uri[len(t.prefix):]
	for i, lit := range t.lits {
		if i == len(t.lits)-1 && t.endsLit {
			return strings.HasSuffix(rest, lit)
		}
		j := strings.Index(rest, lit)
		if j < 0 {
			return false
		}
		rest = rest[j+len(lit):]
	}
	return true
}

// literalBytes counts the bytes of raw outside its expressions.
func literalBytes(raw string) int {
	n := 0
	for rest := raw; rest != ""; {
		lit, expr, found := strings.Cut(rest, "{")
		n += len(lit)
		if !found {
			break
		}
		_, rest, _ = strings.Cut(expr, "}")
	}
	return n
}

// TemplateKey returns the name under which a resource template with URI
// template uriTemplate is registered, and claimed across a fleet: the
// template with every variable named "_" ("files://{_}/{?_,_}" for
// "files://{dir}/{?q,n}"), so that two templates that differ only in
// their variable names have one key. It fails, with ErrInvalidName, for
// a template StartResourceTemplate refuses: one that is not RFC 6570, or
// whose scheme is not literal. It costs a parse of the template.
func TemplateKey(uriTemplate string) (string, error) {
	key, tmpl, err := parseTemplate(uriTemplate)
	if err != nil {
		return "", err
	}
	if _, err := rawTemplate(uriTemplate, tmpl); err != nil {
		return "", fmt.Errorf("%w: not an RFC 6570 template: %w", ErrInvalidName, err)
	}
	return key, nil
}

// templateKey is the template side's name rule: its names are the keys
// parseTemplate makes, which parse as templates themselves.
func templateKey(name string) error {
	if _, err := uritemplate.New(name); err != nil {
		return fmt.Errorf("not a template key: %w", err)
	}
	return nil
}

// StartResourceTemplate starts a consumer serving the resources whose URIs
// match template t, with reader rd, under plan p. It behaves as
// StartResource, under Config.MaxTemplates, with these differences:
//
//   - t.URITemplate must parse as an RFC 6570 template with a literal
//     scheme, or the start fails with ErrInvalidName;
//   - a template that differs from a live one only in its variable names
//     is a duplicate (ErrDuplicate): both would match the same URIs;
//   - the reader gets the matched variables in Read.Vars;
//   - the consumer's Name is the template's key, every variable named
//     "_" ("files://{_}" for "files://{path}").
//
// See ReadResource for which route a URI reaches. Option: WithCompleter, for
// the template's variables.
func (c *Catalog) StartResourceTemplate(ctx context.Context, t ResourceTemplate, p bindsec.Plan, rd ResourceReader, opts ...StartOption) (*Consumer, error) {
	fail := func(err error) (*Consumer, error) {
		return nil, fmt.Errorf("catalog: start resource template %q: %w", t.URITemplate, err)
	}
	if rd == nil {
		return fail(fmt.Errorf("%w: nil reader", ErrInvalidRoute))
	}
	if c.templateView.off {
		return fail(fmt.Errorf("%w: this catalog holds no resource templates", ErrCapReached))
	}
	key, tmpl, err := parseTemplate(t.URITemplate)
	if err != nil {
		return fail(err)
	}
	rawTmpl, err := rawTemplate(t.URITemplate, tmpl)
	if err != nil {
		return fail(fmt.Errorf("%w: not an RFC 6570 template: %w", ErrInvalidName, err))
	}
	rt := &route{resource: Resource{URI: t.URITemplate, Name: t.Name, Description: t.Description, MIMEType: t.MIMEType}, read: rd}
	tr := &templateRoute{rt: rt, tpl: t, tmpl: tmpl, rawTmpl: rawTmpl, key: key, literal: literalBytes(t.URITemplate)}
	rt.template = tr
	tr.prefix, tr.lits, tr.endsLit = literalPieces(t.URITemplate)
	opts, tr.complete = takeCompleter(opts)
	// In the index before the start: a read right after Start returns must
	// match it. Until it is ready the registry check in match skips it.
	c.index.add(tr)
	k, err := c.start(ctx, &c.templates, key, p, rt, opts)
	if err != nil {
		c.index.remove(tr)
		return nil, err
	}
	rt.ref.AfterDeath(func() {
		if h := c.beforeUnindex; h != nil {
			h()
		}
		c.index.remove(tr)
	})
	return k, nil
}

// ReadResource reads the resource uri, presenting credential to its plan,
// as resources/read does. A live fixed resource with that URI wins;
// otherwise the live templates that match it are candidates, and the most
// specific one reads it: the one with the most literal bytes, and between
// equals the one whose template string sorts first. The reader gets the
// matched variables in Read.Vars (a list-valued variable joined with
// commas) and, when its contents name no MIME type, they get the
// template's. It behaves as CallTool, with ErrNotFound.
//
// A template whose owner is dead never reads, even for a request that chose
// it just before the death: the read passes the route's admission gate, and
// gets ErrRouteGone. A templated read does not scan every template: the
// index is keyed by the literal text before a template's first expression,
// and only the templates whose text prefixes uri are matched
// (BenchmarkTemplateRead in package bench). Matching is uritemplate's,
// which allocates per candidate, and is linear in the URI's length at a
// high constant: about 3 µs and 1.7 KB allocated per byte of URI
// (BenchmarkTemplateMatchPerByte, 64 B to 8 KiB), so 25 ms for a URI at the
// default limit. That limit (Config.MaxURIBytes) is what bounds a read's
// cost: a longer URI gets ErrInvalidArguments before any lookup.
//
// A variable reaches the reader percent-decoded in Read.Vars, and as
// sent in Read.RawVars; one that decodes to a NUL byte or invalid UTF-8
// is refused with ErrInvalidArguments unless the template sets
// AllowRawBytes.
//
// With a RemoteSurface, the rule is the fleet's: a fixed resource of uri
// on any replica wins, and otherwise the most specific of all the
// templates that match it, this catalog's and the Remote's, by the same
// order. A URI that another replica's route wins gets an *ElsewhereError
// (ErrNotFound, naming that route, for a server to forward the read to);
// so every replica whose listing is the same sends a URI to the same
// route. It costs, beyond a local read, a search of the Remote's
// resources when a local template matches, and the match of the
// Remote's templates whose prefix uri has that are more specific than
// the local winner.
func (c *Catalog) ReadResource(ctx context.Context, uri, credential string, opts ...CallOption) (Contents, error) {
	if err := c.checkURI(uri); err != nil {
		return Contents{}, c.refused(ctx, err)
	}
	if rt, _, ok := c.resources.reg.Lookup(uri); ok {
		if c.hooks != nil && c.hooks.afterLookup != nil {
			c.hooks.afterLookup(uri)
		}
		return c.readRoute(ctx, rt, Read{URI: uri}, credential, opts)
	}
	tr, vars := c.index.match(c, uri)
	if c.surface != nil {
		if err := c.servedElsewhere(uri, tr); err != nil {
			return Contents{}, c.refused(ctx, c.roundGone(KindResource, uri, err, opts))
		}
	}
	if tr == nil {
		return Contents{}, c.refused(ctx, c.roundGone(KindResource, uri, &unknownError{"resource", uri}, opts))
	}
	if err := tr.checkVars(vars); err != nil {
		return Contents{}, c.refused(ctx, err)
	}
	read := Read{URI: uri, Vars: vars, RawVars: tr.rawVars(uri, vars)}
	res, err := c.readRoute(ctx, tr.rt, read, credential, opts)
	if err == nil && res.MIMEType == "" {
		res.MIMEType = tr.tpl.MIMEType
	}
	return res, err
}

func templateDesc(rt *route) ResourceTemplate { return rt.template.tpl }

// templateIndex finds the templates that may match a URI without looking
// at the others: it groups them by literal prefix (the text before the
// first expression), and a URI is matched only against the groups whose
// prefix it starts with, one map lookup per distinct prefix length.
//
// Reads are lock-free: they load an immutable snapshot. Writers (a start,
// a death) rebuild the snapshot under a mutex, at O(n log n) for n
// templates: starts and deaths of templates are rare next to reads.
type templateIndex struct {
	mu   sync.Mutex
	all  map[*templateRoute]struct{}
	snap atomic.Pointer[templateSnap]
}

type templateSnap struct {
	byPrefix map[string][]*templateRoute // each best first
	lens     []int                       // the distinct prefix lengths, ascending
}

func (x *templateIndex) add(t *templateRoute) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.all == nil {
		x.all = make(map[*templateRoute]struct{})
	}
	x.all[t] = struct{}{}
	x.rebuild()
}

func (x *templateIndex) remove(t *templateRoute) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.all[t]; !ok {
		return
	}
	delete(x.all, t)
	x.rebuild()
}

func (x *templateIndex) rebuild() {
	x.snap.Store(newTemplateSnap(maps.Keys(x.all)))
}

// newTemplateSnap indexes the templates all yields.
func newTemplateSnap(all iter.Seq[*templateRoute]) *templateSnap {
	s := &templateSnap{byPrefix: make(map[string][]*templateRoute)}
	for t := range all {
		if _, ok := s.byPrefix[t.prefix]; !ok {
			s.lens = append(s.lens, len(t.prefix))
		}
		s.byPrefix[t.prefix] = append(s.byPrefix[t.prefix], t)
	}
	slices.Sort(s.lens)
	s.lens = slices.Compact(s.lens)
	for _, ts := range s.byPrefix {
		slices.SortFunc(ts, func(a, b *templateRoute) int {
			if a.better(b) {
				return -1
			}
			return 1
		})
	}
	return s
}

// size returns the templates indexed, dead ones not yet removed included.
func (x *templateIndex) size() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.all)
}

// match returns the best live, ready template matching uri and its
// variables, or nil. A template counts when its owner is alive and the
// registry's entry under its key is this very route, ready: a dead owner's
// template, or one still starting, never matches.
func (x *templateIndex) match(c *Catalog, uri string) (*templateRoute, map[string]string) {
	s := x.snap.Load()
	if s == nil {
		return nil, nil
	}
	// The registry before the route: the index holds a route from before
	// its start has set it up, and the registry hands out only a ready
	// route of a live owner, its lookup ordered after the start that made
	// it ready.
	best, vals := s.match(uri, nil, func(t *templateRoute) bool {
		rt, _, ok := c.templates.reg.Lookup(t.key)
		return ok && rt == t.rt
	})
	if best == nil {
		return nil, nil
	}
	return best, values(vals)
}

// match returns the best template of s that is better than than (nil: any
// template), that usable accepts and that matches uri, and the values it
// matched; than and nil values when there is none.
func (s *templateSnap) match(uri string, than *templateRoute, usable func(*templateRoute) bool) (*templateRoute, uritemplate.Values) {
	best := than
	var vals uritemplate.Values
	for _, n := range s.lens {
		if n > len(uri) {
			break
		}
		for _, t := range s.byPrefix[uri[:n]] {
			if best != nil && !t.better(best) {
				break // the rest of the group is worse still
			}
			if !t.mayMatch(uri) || !usable(t) {
				continue
			}
			v := t.tmpl.Match(uri)
			if v == nil {
				continue
			}
			best, vals = t, v
			break
		}
	}
	return best, vals
}
