package catalog_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// fleetSurface is a fleetList that lists prompts and templates too: a
// catalog.RemoteSurface whose listings a test sets.
type fleetSurface struct {
	fleetList
	prompts   []catalog.Prompt
	templates []catalog.ResourceTemplate
	pv, tv    uint64
}

func (f *fleetSurface) Prompts() []catalog.Prompt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prompts
}

func (f *fleetSurface) Templates() []catalog.ResourceTemplate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.templates
}

func (f *fleetSurface) PromptsVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pv
}

func (f *fleetSurface) TemplatesVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tv
}

// setPrompts replaces the remote prompts (given sorted) and reports the
// change.
func (f *fleetSurface) setPrompts(names ...string) {
	f.mu.Lock()
	f.prompts = nil
	for _, n := range names {
		f.prompts = append(f.prompts, catalog.Prompt{Name: n, Description: "remote " + n, Arguments: []catalog.PromptArgument{{Name: "a", Required: true}}})
	}
	f.pv++
	f.mu.Unlock()
	f.changed()
}

// setTemplates replaces the remote templates, sorting them by key as a
// RemoteSurface must, and reports the change.
func (f *fleetSurface) setTemplates(tpls ...string) {
	f.mu.Lock()
	f.templates = nil
	for _, u := range tpls {
		f.templates = append(f.templates, catalog.ResourceTemplate{URITemplate: u, Name: "remote"})
	}
	slices.SortFunc(f.templates, func(a, b catalog.ResourceTemplate) int {
		ka, _ := catalog.TemplateKey(a.URITemplate)
		kb, _ := catalog.TemplateKey(b.URITemplate)
		return strings.Compare(ka, kb)
	})
	f.tv++
	f.mu.Unlock()
	f.changed()
}

func (f *fleetSurface) changed() {
	f.mu.Lock()
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, w := range watchers {
		w()
	}
}

func templateURIs(c *catalog.Catalog) []string {
	var out []string
	for _, t := range c.Templates().List() {
		out = append(out, t.URITemplate)
	}
	return out
}

// A RemoteSurface's prompts and templates are merged into the listings,
// sorted as local ones (templates by key), a name held here listed once as
// the local route describes it; a change moves the kind's version and
// closes Changes.
func TestRemoteSurfaceMerged(t *testing.T) {
	fs := &fleetSurface{}
	c := newCatalog(t, catalog.Config{Remote: fs})
	startPrompt(t, c, bg, catalog.Prompt{Name: "b"}, echoPrompt(nil))
	startTemplate(t, c, bg, "test://m/{x}", tag("m", nil))

	changes, pv, tv := c.Changes(), c.Prompts().Version(), c.Templates().Version()
	fs.setPrompts("a", "b", "c")
	select {
	case <-changes:
	case <-time.After(time.Second):
		t.Fatal("a remote prompt change did not close Changes")
	}
	if c.Prompts().Version() <= pv {
		t.Errorf("the prompts version did not move: %d, then %d", pv, c.Prompts().Version())
	}
	if got, want := promptNames(c), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("prompts = %v, want %v", got, want)
	}
	for _, p := range c.Prompts().List() {
		if p.Name == "b" && p.Description != "" {
			t.Errorf("the prompt held here is listed as the remote has it: %+v", p)
		}
	}
	// By key: "test://m/{_}" sorts after "test://a/{_}/z" and before
	// "test://z{_}", whatever the variables are called.
	fs.setTemplates("test://z{q}", "test://a/{zzz}/z", "test://m/{x}")
	if c.Templates().Version() <= tv {
		t.Errorf("the templates version did not move")
	}
	if got, want := templateURIs(c), []string{"test://a/{zzz}/z", "test://m/{x}", "test://z{q}"}; !reflect.DeepEqual(got, want) {
		t.Errorf("templates = %v, want %v", got, want)
	}
	// Pages walk the merged listing.
	page, next, err := c.Templates().Page("", 2)
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("first page = %v, %q, %v", page, next, err)
	}
	page, next, err = c.Templates().Page(next, 2)
	if err != nil || len(page) != 1 || page[0].URITemplate != "test://z{q}" || next != "" {
		t.Fatalf("second page = %v, %q, %v", page, next, err)
	}
}

// A kind that Config turns off lists none of the fleet's either.
func TestRemoteSurfaceOffKinds(t *testing.T) {
	fs := &fleetSurface{}
	c := newCatalog(t, catalog.Config{Remote: fs, MaxPrompts: -1, MaxTemplates: -1})
	fs.setPrompts("a")
	fs.setTemplates("test://a/{x}")
	if got := c.Prompts().List(); len(got) != 0 {
		t.Errorf("prompts off, yet listed: %v", got)
	}
	if got := c.Templates().List(); len(got) != 0 {
		t.Errorf("templates off, yet listed: %v", got)
	}
}

// The fleet's rule for a URI: a fixed resource anywhere wins; otherwise
// the most specific template of the fleet's listing, ties broken by the
// template string, wherever it lives. A URI that a route of another
// replica wins is an *ElsewhereError naming that route, not a local read.
func TestFleetTemplateRule(t *testing.T) {
	elsewhere := func(t *testing.T, c *catalog.Catalog, uri string) *catalog.ElsewhereError {
		t.Helper()
		_, err := c.ReadResource(bg, uri, "")
		var ee *catalog.ElsewhereError
		if !errors.As(err, &ee) || !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("read %s: %v; want an *ElsewhereError", uri, err)
		}
		return ee
	}
	local := func(t *testing.T, c *catalog.Catalog, uri, want string) {
		t.Helper()
		got, err := readText(t, c, uri)
		if err != nil || got != want {
			t.Fatalf("read %s = %q, %v; want %q, read here", uri, got, err, want)
		}
	}

	t.Run("more specific elsewhere", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://f/{path}", tag("here", nil))
		fs.setTemplates("test://f/docs-{name}")
		if ee := elsewhere(t, c, "test://f/docs-x"); ee.Kind != catalog.KindTemplate || ee.Name != "test://f/docs-{_}" || ee.URI != "test://f/docs-x" {
			t.Errorf("winner = %+v; want the remote template's key", ee)
		}
		local(t, c, "test://f/other", "here map[path:other]")
	})
	t.Run("more specific here", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://f/docs-{name}", tag("here", nil))
		fs.setTemplates("test://f/{path}")
		local(t, c, "test://f/docs-x", "here map[name:x]")
		if ee := elsewhere(t, c, "test://f/else"); ee.Name != "test://f/{_}" {
			t.Errorf("winner = %+v", ee)
		}
	})
	// Equal literal bytes: the smaller template string wins, on both
	// replicas of the pair ("test://y/{x}" < "test://{x}/z").
	t.Run("tie elsewhere", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://{x}/z", tag("here", nil))
		fs.setTemplates("test://y/{x}")
		if ee := elsewhere(t, c, "test://y/z"); ee.Name != "test://y/{_}" {
			t.Errorf("winner = %+v", ee)
		}
	})
	t.Run("tie here", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://y/{x}", tag("here", nil))
		fs.setTemplates("test://{x}/z")
		local(t, c, "test://y/z", "here map[x:z]")
	})
	t.Run("fixed resource elsewhere", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://f/{path}", tag("here", nil))
		fs.setResources("test://f/fixed")
		if ee := elsewhere(t, c, "test://f/fixed"); ee.Kind != catalog.KindResource || ee.Name != "test://f/fixed" {
			t.Errorf("winner = %+v", ee)
		}
	})
	// The Remote lists this replica's own template too: it is the local
	// route, read here.
	t.Run("own template listed", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		startTemplate(t, c, bg, "test://f/{path}", tag("here", nil))
		fs.setTemplates("test://f/{path}", "test://g/{x}")
		local(t, c, "test://f/a", "here map[path:a]")
		if ee := elsewhere(t, c, "test://g/a"); ee.Name != "test://g/{_}" {
			t.Errorf("winner = %+v", ee)
		}
	})
	// A template that matches nothing is no winner: unknown, as before.
	t.Run("no match", func(t *testing.T) {
		fs := &fleetSurface{}
		c := newCatalog(t, catalog.Config{Remote: fs})
		fs.setTemplates("test://g/{x}/end")
		_, err := c.ReadResource(bg, "test://g/a", "")
		var ee *catalog.ElsewhereError
		if !errors.Is(err, catalog.ErrNotFound) || errors.As(err, &ee) {
			t.Fatalf("read of a URI nothing matches: %v; want a plain ErrNotFound", err)
		}
	})
}
