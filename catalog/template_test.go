package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// tag returns a reader that answers its tag and the variables it got.
func tag(name string, ran *atomic.Int64) catalog.ResourceReader {
	return func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		if ran != nil {
			ran.Add(1)
		}
		return catalog.Contents{Text: fmt.Sprintf("%s %v", name, r.Vars)}, nil
	}
}

func startTemplate(t testing.TB, c *catalog.Catalog, ctx context.Context, tpl string, rd catalog.ResourceReader) *catalog.Consumer {
	t.Helper()
	k, err := c.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: tpl, Name: tpl}, public, rd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopBounded(k) })
	return k
}

func readText(t testing.TB, c *catalog.Catalog, uri string) (string, error) {
	t.Helper()
	res, err := c.ReadResource(bg, uri, "")
	if err != nil {
		return "", err
	}
	if res.URI != uri {
		t.Errorf("res.URI = %q, want %q", res.URI, uri)
	}
	return res.Text, nil
}

func TestStartResourceTemplateRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, tpl string
		rd        catalog.ResourceReader
		want      error
	}{
		{"does not parse", "test://x/{id", tag("x", nil), catalog.ErrInvalidName},
		{"bad variable name", "test://x/{i d}", tag("x", nil), catalog.ErrInvalidName},
		{"scheme not literal", "{scheme}://x/{id}", tag("x", nil), catalog.ErrInvalidName},
		{"relative", "x/{id}", tag("x", nil), catalog.ErrInvalidName},
		{"nil reader", "test://x/{id}", nil, catalog.ErrInvalidRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			k, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: tt.tpl}, public, tt.rd)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if k != nil {
				t.Errorf("k = %v, want nil", k)
			}
			if got := c.Stats().TemplateSlots; got != 0 {
				t.Errorf("c.Stats().TemplateSlots = %v, want 0", got)
			}
			if got := c.IndexedTemplates(); got != 0 {
				t.Errorf("c.IndexedTemplates() = %v, want 0", got)
			}
		})
	}
}

func TestTemplateDifferingOnlyInNamesIsDuplicate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k := startTemplate(t, c, bg, "test://x/{id}/data", tag("first", nil))
	_, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://x/{name}/data"}, public, tag("second", nil))
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}
	if got := c.IndexedTemplates(); got != 1 {
		t.Errorf("the refused start left nothing in the index: c.IndexedTemplates() = %v, want 1", got)
	}
	// Other operators or modifiers are other templates.
	plus := startTemplate(t, c, bg, "test://x/{+id}/data", tag("plus", nil))
	if err := plus.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	startTemplate(t, c, bg, "test://x/{name}/data", tag("second", nil))
	got, err := readText(t, c, "test://x/7/data")
	if err != nil {
		t.Fatal(err)
	}
	if got != "second map[name:7]" {
		t.Errorf("the successor reads with its own variable names: got = %q, want \"second map[name:7]\"", got)
	}
}

func TestReadResourcePrecedence(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTemplate(t, c, bg, "test://a/{x}", tag("any", nil))
	startTemplate(t, c, bg, "test://a/{x}/{y}", tag("two", nil))
	startTemplate(t, c, bg, "test://a/b/{y}", tag("b", nil))
	startTemplate(t, c, bg, "test://a/{x}/c", tag("xc", nil))
	startTemplate(t, c, bg, "test://{x}/b/c", tag("tie", nil))
	_, err := c.StartResource(bg, catalog.Resource{URI: "test://a/b/fixed"}, public, tag("fixed", nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ uri, want string }{
		{"test://a/b/fixed", "fixed map[]"},  // a fixed URI wins over every template
		{"test://a/b/c", "b map[y:c]"},       // test://a/b/ (10 literal bytes) beats test://a//c and test:///b/c (10, later)
		{"test://a/q/c", "xc map[x:q]"},      // more literal text than test://a/{x}/{y}
		{"test://a/q/r", "two map[x:q y:r]"}, // the only one with two segments
		{"test://a/q", "any map[x:q]"},
		{"test://z/b/c", "tie map[x:z]"},
	}
	for _, tt := range tests {
		got, err := readText(t, c, tt.uri)
		if err != nil {
			t.Fatalf("%v: %v", tt.uri, err)
		}
		if got != tt.want {
			t.Errorf("%v: got = %q, want %q", tt.uri, got, tt.want)
		}
	}
	_, err = c.ReadResource(bg, "test://nothing", "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}
}

// Between two templates with as much literal text, the template string
// decides: the order never depends on which started first.
func TestReadResourceTieBreak(t *testing.T) {
	for _, order := range [][]string{{"test://{x}/b", "test://a/{y}"}, {"test://a/{y}", "test://{x}/b"}} {
		c := newCatalog(t, catalog.Config{})
		for _, tpl := range order {
			startTemplate(t, c, bg, tpl, tag(tpl, nil))
		}
		got, err := readText(t, c, "test://a/b")
		if err != nil {
			t.Fatal(err)
		}
		if got != "test://a/{y} map[y:b]" {
			t.Errorf("started in order %v: got = %q, want \"test://a/{y} map[y:b]\"", order, got)
		}
	}
}

func TestTemplateDeadOwnerNeverMatches(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	// The dead owner's template stays in the index until the test ends.
	release := make(chan struct{})
	c.SetBeforeUnindexHook(func() { <-release })
	defer close(release)
	startTemplate(t, c, bg, "test://d/{+x}", tag("general", nil))
	ctx, cancel := context.WithCancel(bg)
	var ran atomic.Int64
	k := startTemplate(t, c, ctx, "test://d/{x}/item", tag("specific", &ran))
	got, err := readText(t, c, "test://d/1/item")
	if err != nil {
		t.Fatal(err)
	}
	if got != "specific map[x:1]" {
		t.Fatalf("got = %q, want \"specific map[x:1]\"", got)
	}
	cancel()
	<-k.Done()
	if got := c.IndexedTemplates(); got != 2 {
		t.Errorf("held in the index: c.IndexedTemplates() = %v, want 2", got)
	}
	// The next best live template reads; the dead one is not even tried.
	got, err = readText(t, c, "test://d/1/item")
	if err != nil {
		t.Fatal(err)
	}
	if got != "general map[x:1/item]" {
		t.Errorf("got = %q, want \"general map[x:1/item]\"", got)
	}
	if got := ran.Load(); got != int64(1) {
		t.Errorf("ran.Load() = %v, want %v", got, int64(1))
	}
	o, ok := c.ResourceOwner("test://d/1/item")
	if !ok {
		t.Fatalf("c.ResourceOwner(\"test://d/1/item\") found nothing")
	}
	if o.Same(k.Owner()) {
		t.Errorf("o.Same(k.Owner()) is true")
	}
	eventually(t, 10*time.Second, func() bool { return c.Stats().TemplateSlots == 1 }, "the dead owner's template leaves the registry")
}

func TestTemplateUnindexedOnDeath(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(bg)
	startTemplate(t, c, ctx, "test://u/{x}", tag("u", nil))
	k := startTemplate(t, c, bg, "test://v/{x}", tag("v", nil))
	cancel()
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool { return c.IndexedTemplates() == 0 }, "a death and a stop both take the template out of the index")
}

// A read that chose a template just before its owner died never reaches
// the reader: the route's admission gate refuses it.
func TestTemplateOwnerDiesBeforeAdmission(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(bg)
	var ran atomic.Int64
	k := startTemplate(t, c, ctx, "test://g/{x}", tag("g", &ran))
	c.SetBeforeAdmitHook(func(string) {
		cancel()
		<-k.Done()
	})
	_, err := c.ReadResource(bg, "test://g/1", "")
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if got := ran.Load(); got != 0 {
		t.Errorf("ran.Load() = %v, want 0", got)
	}
}

func TestListResourceTemplates(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxTemplates: 2})
	v := c.Templates().Version()
	startTemplate(t, c, bg, "test://b/{x}", tag("b", nil))
	startTemplate(t, c, bg, "test://a/{x}", tag("a", nil))
	if got := c.Templates().Version(); got <= v {
		t.Errorf("c.Templates().Version() = %v, want > %v", got, v)
	}
	var got []string
	for _, tpl := range c.Templates().List() {
		got = append(got, tpl.URITemplate)
	}
	if want := ([]string{"test://a/{x}", "test://b/{x}"}); !reflect.DeepEqual(got, want) {
		t.Errorf("got = %v, want %v", got, want)
	}
	_, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://c/{x}"}, public, tag("c", nil))
	if !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("err = %v, want catalog.ErrCapReached", err)
	}
	page, next, err := c.Templates().Page("", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(page); got != 1 {
		t.Fatalf("len(page) = %d, want %d", got, 1)
	}
	if len(next) == 0 {
		t.Errorf("next is empty")
	}
}

func TestTemplateMIMETypeFallback(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://m/{x}", MIMEType: "application/json"}, public, tag("m", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(bg) }()
	res, err := c.ReadResource(bg, "test://m/1", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.MIMEType != "application/json" {
		t.Errorf("res.MIMEType = %q, want \"application/json\"", res.MIMEType)
	}
}

func ExampleCatalog_StartResourceTemplate() {
	cat, _ := catalog.New(catalog.Config{})
	k, err := cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{
		URITemplate: "files://{dir}/{name}", Name: "file", MIMEType: "text/plain",
	}, bindsec.Plan{Public: true}, func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: "contents of " + r.Vars["name"] + " in " + r.Vars["dir"]}, nil
	})
	if err != nil {
		panic(err)
	}
	defer k.Stop(context.Background())

	res, err := cat.ReadResource(context.Background(), "files://docs/readme", "")
	fmt.Println(res.Text, res.MIMEType, err)
	// Output: contents of readme in docs text/plain <nil>
}

// Reads that race the starts of the templates they match: the index
// holds a route before its start has set it up, so a read must reach the
// route through the registry, which orders it after the start. Under
// -race, a read that touches an indexed route first is reported.
func TestTemplateReadRacingStart(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = c.ReadResource(bg, "race://x/1", "")
			}
		}
	}()
	for range 300 {
		k, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "race://x/{id}", Name: "race"}, public, tag("race", nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Stop(bg); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}
