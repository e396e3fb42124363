package catalog

import (
	"testing"

	"github.com/yosida95/uritemplate/v3"
)

// IndexedTemplates returns the templates the read index holds, dead ones
// not yet removed included.
func (c *Catalog) IndexedTemplates() int { return c.index.size() }

// SetBeforeUnindexHook makes fn run before a dead owner's template leaves
// the read index: a test holds the entry there, as it stands in the window
// before the catalog notices the death. Set it before templates start.
func (c *Catalog) SetBeforeUnindexHook(fn func()) { c.beforeUnindex = fn }

// The registry key of a template equates exactly the templates that
// uritemplate.Equals, without CompareVarname, equates: those that differ
// only in their variable names.
func TestTemplateKeyMatchesEquals(t *testing.T) {
	templates := []string{
		"a://x/{id}", "a://x/{name}", "a://x/{+id}", "a://x/{#id}", "a://x/{id*}", "a://x/{id:3}",
		"a://x/{id:4}", "a://x/{a,b}", "a://x/{c,d}", "a://x/{a}", "a://x{/id}", "a://x/{id}/y",
		"a://x/{id}/{n}", "a://x/{n}/{id}", "a://x/{?q,n}", "a://x/{?n}", "a://x/{&q}", "a://x/{;q}", "a://x/{.q}",
		"b://x/{id}", "a://x/id",
	}
	for _, s1 := range templates {
		for _, s2 := range templates {
			k1, t1, err := parseTemplate(s1)
			if err != nil {
				t.Fatal(err)
			}
			k2, t2, err := parseTemplate(s2)
			if err != nil {
				t.Fatal(err)
			}
			if eq := uritemplate.Equals(t1, t2, 0); eq != (k1 == k2) {
				t.Errorf("%s (%s) and %s (%s): Equals %v, keys equal %v", s1, k1, s2, k2, eq, k1 == k2)
			}
			if err := templateKey(k1); err != nil {
				t.Errorf("key %s of %s: %v", k1, s1, err)
			}
		}
	}
}

func TestLiteralBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{{"a://x/{id}", 6}, {"a://x/{id}/data", 11}, {"a://{a}{b}", 4}, {"a://x", 5}} {
		if got := literalBytes(tt.in); got != tt.want {
			t.Errorf("literalBytes(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// mayMatch never refuses a URI that the template matches, and refuses
// those whose literals are missing or out of place.
func TestMayMatch(t *testing.T) {
	tests := []struct {
		tpl, uri string
		want     bool
	}{
		{"a://x/{id}", "a://x/1", true},
		{"a://x/{id}/data", "a://x/1/data", true},
		{"a://x/{id}/data", "a://x/1/dat", false},
		{"a://x/{id}/data", "a://x/1/data/more", false},
		{"a://x/{a}/m/{b}/n", "a://x/1/m/2/n", true},
		{"a://x/{a}/m/{b}/n", "a://x/1/n/2/m", false},
		{"a://x/{a}{b}", "a://x/12", true},
		{"a://x/{+p}/end", "a://x/a/end/b/end", true},
		{"a://x{/p}/end", "a://x/q/end", true},
	}
	for _, tt := range tests {
		key, tmpl, err := parseTemplate(tt.tpl)
		if err != nil {
			t.Fatal(err)
		}
		tr := &templateRoute{tmpl: tmpl, key: key}
		tr.prefix, tr.lits, tr.endsLit = literalPieces(tt.tpl)
		if got := tr.mayMatch(tt.uri); got != tt.want {
			t.Errorf("mayMatch(%s, %s) = %v, want %v", tt.tpl, tt.uri, got, tt.want)
		}
		if tmpl.Match(tt.uri) != nil && !tr.mayMatch(tt.uri) {
			t.Errorf("%s matches %s, and mayMatch refused it", tt.tpl, tt.uri)
		}
	}
}
