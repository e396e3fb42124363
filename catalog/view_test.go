package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
)

// A negative cap turns prompts or templates off, and only that kind's view
// says so; tools and resources are always enabled.
func TestViewEnabled(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxPrompts: -1})
	assert.True(t, c.Tools().Enabled())
	assert.True(t, c.Resources().Enabled())
	assert.False(t, c.Prompts().Enabled())
	assert.True(t, c.Templates().Enabled())
	c = newCatalog(t, catalog.Config{MaxTemplates: -1})
	assert.True(t, c.Prompts().Enabled())
	assert.False(t, c.Templates().Enabled())
}

// Each view lists, pages and versions its own kind only, and the
// catalog's Version is the sum of the four.
func TestViewsAreOneKindEach(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	before := c.Resources().Version()
	startTool(t, c, bg, "b", public, reply(""))
	startTool(t, c, bg, "a", public, reply(""))
	assert.Equal(t, before, c.Resources().Version(), "a tool moves no resource version")
	assert.Empty(t, c.Resources().List())
	page, next, err := c.Tools().Page("", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "a", page[0].Name)
	page, next, err = c.Tools().Page(next, 1)
	require.NoError(t, err)
	assert.Equal(t, "b", page[0].Name)
	assert.Empty(t, next)
	assert.Equal(t, c.Tools().Version()+c.Resources().Version()+c.Prompts().Version()+c.Templates().Version(), c.Version())
}
