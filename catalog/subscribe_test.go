package catalog_test

import (
	"context"
	"sync"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsumerUpdated(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var mu sync.Mutex
	var heard []string
	cancel := c.OnResourceUpdated(func(uri string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, uri)
	})
	k, err := c.StartResource(bg, catalog.Resource{URI: "test://r"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil })
	require.NoError(t, err)
	require.NoError(t, k.Updated())
	cancel()
	cancel() // idempotent
	require.NoError(t, k.Updated())
	assert.Equal(t, []string{"test://r"}, heard, "heard once, until cancelled")

	tool := startTool(t, c, bg, "tool", public, reply("x"))
	require.ErrorIs(t, tool.Updated(), catalog.ErrInvalidRoute)
	require.NoError(t, k.Stop(bg))
	require.ErrorIs(t, k.Updated(), catalog.ErrDeadOwner)
}

func TestResourceOwner(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	fixed, err := c.StartResource(bg, catalog.Resource{URI: "test://o/fixed"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil })
	require.NoError(t, err)
	defer func() { _ = fixed.Stop(bg) }()
	tpl := startTemplate(t, c, bg, "test://o/{x}", tag("t", nil))
	for _, tt := range []struct {
		uri  string
		want *catalog.Consumer
	}{{"test://o/fixed", fixed}, {"test://o/other", tpl}, {"test://p/x", nil}} {
		o, ok := c.ResourceOwner(tt.uri)
		if tt.want == nil {
			assert.False(t, ok, tt.uri)
			continue
		}
		require.True(t, ok, tt.uri)
		assert.True(t, o.Same(tt.want.Owner()), tt.uri)
	}
}
