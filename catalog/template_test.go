package catalog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	t.Cleanup(func() { stopBounded(k) })
	return k
}

func readText(t testing.TB, c *catalog.Catalog, uri string) (string, error) {
	t.Helper()
	res, err := c.ReadResource(bg, uri, "")
	if err != nil {
		return "", err
	}
	assert.Equal(t, uri, res.URI)
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
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, k)
			assert.Zero(t, c.Stats().TemplateSlots)
			assert.Zero(t, c.IndexedTemplates())
		})
	}
}

func TestTemplateDifferingOnlyInNamesIsDuplicate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k := startTemplate(t, c, bg, "test://x/{id}/data", tag("first", nil))
	_, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://x/{name}/data"}, public, tag("second", nil))
	require.ErrorIs(t, err, catalog.ErrDuplicate)
	assert.Equal(t, 1, c.IndexedTemplates(), "the refused start left nothing in the index")
	// Other operators or modifiers are other templates.
	plus := startTemplate(t, c, bg, "test://x/{+id}/data", tag("plus", nil))
	require.NoError(t, plus.Stop(bg))
	require.NoError(t, k.Stop(bg))
	startTemplate(t, c, bg, "test://x/{name}/data", tag("second", nil))
	got, err := readText(t, c, "test://x/7/data")
	require.NoError(t, err)
	assert.Equal(t, "second map[name:7]", got, "the successor reads with its own variable names")
}

func TestReadURIPrecedence(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTemplate(t, c, bg, "test://a/{x}", tag("any", nil))
	startTemplate(t, c, bg, "test://a/{x}/{y}", tag("two", nil))
	startTemplate(t, c, bg, "test://a/b/{y}", tag("b", nil))
	startTemplate(t, c, bg, "test://a/{x}/c", tag("xc", nil))
	startTemplate(t, c, bg, "test://{x}/b/c", tag("tie", nil))
	_, err := c.StartResource(bg, catalog.Resource{URI: "test://a/b/fixed"}, public, tag("fixed", nil))
	require.NoError(t, err)
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
		require.NoError(t, err, tt.uri)
		assert.Equal(t, tt.want, got, tt.uri)
	}
	_, err = c.ReadResource(bg, "test://nothing", "")
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// Between two templates with as much literal text, the template string
// decides: the order never depends on which started first.
func TestReadURITieBreak(t *testing.T) {
	for _, order := range [][]string{{"test://{x}/b", "test://a/{y}"}, {"test://a/{y}", "test://{x}/b"}} {
		c := newCatalog(t, catalog.Config{})
		for _, tpl := range order {
			startTemplate(t, c, bg, tpl, tag(tpl, nil))
		}
		got, err := readText(t, c, "test://a/b")
		require.NoError(t, err)
		assert.Equal(t, "test://a/{y} map[y:b]", got, "started in order %v", order)
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
	require.NoError(t, err)
	require.Equal(t, "specific map[x:1]", got)
	cancel()
	<-k.Done()
	assert.Equal(t, 2, c.IndexedTemplates(), "held in the index")
	// The next best live template reads; the dead one is not even tried.
	got, err = readText(t, c, "test://d/1/item")
	require.NoError(t, err)
	assert.Equal(t, "general map[x:1/item]", got)
	assert.EqualValues(t, 1, ran.Load())
	o, ok := c.ResourceOwner("test://d/1/item")
	require.True(t, ok)
	assert.False(t, o.Same(k.Owner()))
	require.Eventually(t, func() bool { return c.Stats().TemplateSlots == 1 },
		10*time.Second, time.Millisecond, "the dead owner's template leaves the registry")
}

func TestTemplateUnindexedOnDeath(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(bg)
	startTemplate(t, c, ctx, "test://u/{x}", tag("u", nil))
	k := startTemplate(t, c, bg, "test://v/{x}", tag("v", nil))
	cancel()
	require.NoError(t, k.Stop(bg))
	require.Eventually(t, func() bool { return c.IndexedTemplates() == 0 },
		10*time.Second, time.Millisecond, "a death and a stop both take the template out of the index")
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
	require.ErrorIs(t, err, catalog.ErrRouteGone)
	assert.Zero(t, ran.Load())
}

func TestListResourceTemplates(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxTemplates: 2})
	v := c.Templates().Version()
	startTemplate(t, c, bg, "test://b/{x}", tag("b", nil))
	startTemplate(t, c, bg, "test://a/{x}", tag("a", nil))
	assert.Greater(t, c.Templates().Version(), v)
	var got []string
	for _, tpl := range c.Templates().List() {
		got = append(got, tpl.URITemplate)
	}
	assert.Equal(t, []string{"test://a/{x}", "test://b/{x}"}, got)
	_, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://c/{x}"}, public, tag("c", nil))
	require.ErrorIs(t, err, catalog.ErrCapReached)
	page, next, err := c.Templates().Page("", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.NotEmpty(t, next)
}

func TestTemplateMIMETypeFallback(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: "test://m/{x}", MIMEType: "application/json"}, public, tag("m", nil))
	require.NoError(t, err)
	defer func() { _ = k.Stop(bg) }()
	res, err := c.ReadResource(bg, "test://m/1", "")
	require.NoError(t, err)
	assert.Equal(t, "application/json", res.MIMEType)
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
		require.NoError(t, err)
		require.NoError(t, k.Stop(bg))
	}
	close(stop)
	<-done
}
