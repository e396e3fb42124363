package catalog_test

import (
	"testing"

	"github.com/livereg/livereg/catalog"
)

// A negative cap turns prompts or templates off, and only that kind's view
// says so; tools and resources are always enabled.
func TestViewEnabled(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxPrompts: -1})
	if !c.Tools().Enabled() {
		t.Errorf("c.Tools().Enabled() is false")
	}
	if !c.Resources().Enabled() {
		t.Errorf("c.Resources().Enabled() is false")
	}
	if c.Prompts().Enabled() {
		t.Errorf("c.Prompts().Enabled() is true")
	}
	if !c.Templates().Enabled() {
		t.Errorf("c.Templates().Enabled() is false")
	}
	c = newCatalog(t, catalog.Config{MaxTemplates: -1})
	if !c.Prompts().Enabled() {
		t.Errorf("c.Prompts().Enabled() is false")
	}
	if c.Templates().Enabled() {
		t.Errorf("c.Templates().Enabled() is true")
	}
}

// Each view lists, pages and versions its own kind only, and the
// catalog's Version is the sum of the four.
func TestViewsAreOneKindEach(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	before := c.Resources().Version()
	startTool(t, c, bg, "b", public, reply(""))
	startTool(t, c, bg, "a", public, reply(""))
	if got := c.Resources().Version(); got != before {
		t.Errorf("a tool moves no resource version: c.Resources().Version() = %v, want %v", got, before)
	}
	if len(c.Resources().List()) != 0 {
		t.Errorf("c.Resources().List() = %v, want empty", c.Resources().List())
	}
	page, next, err := c.Tools().Page("", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(page); got != 1 {
		t.Fatalf("len(page) = %d, want %d", got, 1)
	}
	if page[0].Name != "a" {
		t.Errorf("page[0].Name = %q, want \"a\"", page[0].Name)
	}
	page, next, err = c.Tools().Page(next, 1)
	if err != nil {
		t.Fatal(err)
	}
	if page[0].Name != "b" {
		t.Errorf("page[0].Name = %q, want \"b\"", page[0].Name)
	}
	if len(next) != 0 {
		t.Errorf("next = %v, want empty", next)
	}
	if got, want := c.Version(), c.Tools().Version()+c.Resources().Version()+c.Prompts().Version()+c.Templates().Version(); got != want {
		t.Errorf("c.Version() = %v, want %v", got, want)
	}
}
