package catalog_test

import (
	"context"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heardUpdates subscribes to c's resource updates for the rest of the test
// and returns what the listeners heard so far.
func heardUpdates(t *testing.T, c *catalog.Catalog) (heard func() []string) {
	t.Helper()
	ch := make(chan string, 16)
	t.Cleanup(c.OnResourceUpdated(func(uri string) { ch <- uri }))
	return func() []string {
		var out []string
		for {
			select {
			case uri := <-ch:
				out = append(out, uri)
			default:
				return out
			}
		}
	}
}

func emptyReader(context.Context, catalog.Read) (catalog.Contents, error) {
	return catalog.Contents{}, nil
}

// A consumer that no longer holds its URI cannot publish an update, even
// though a successor now serves that very URI: the successor's subscribers
// would hear of a change that the successor never made. Each way of losing
// the URI is tried: a Stop, and a death by cancellation. It catches an
// Updated that asks only whether the URI is served, not whether it is
// served by the publisher.
func TestEndedConsumerCannotPublishOverItsSuccessor(t *testing.T) {
	const uri = "test://succession"
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, k *catalog.Consumer, cancel context.CancelFunc)
	}{
		{"stopped", func(t *testing.T, k *catalog.Consumer, _ context.CancelFunc) { require.NoError(t, k.Stop(bg)) }},
		{"cancelled", func(t *testing.T, k *catalog.Consumer, cancel context.CancelFunc) {
			cancel()
			waitClosed(t, k.Done(), "the consumer's death")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			heard := heardUpdates(t, c)
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			a, err := c.StartResource(ctx, catalog.Resource{URI: uri}, public, emptyReader)
			require.NoError(t, err)
			tc.end(t, a, cancel)
			b, err := c.StartResource(bg, catalog.Resource{URI: uri}, public, emptyReader)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Stop(bg) })

			require.ErrorIs(t, a.Updated(), catalog.ErrDeadOwner, "the predecessor published over its successor")
			assert.Empty(t, heard(), "a listener heard the predecessor's update")
			require.NoError(t, b.Updated())
			assert.Equal(t, []string{uri}, heard(), "the successor's own update")
		})
	}
}

// Only a fixed resource's consumer publishes updates: a template, a prompt
// or a tool serves no one URI that subscribers could follow. It catches an
// Updated that refuses tools alone.
func TestOnlyFixedResourcesPublishUpdates(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	heard := heardUpdates(t, c)
	for name, k := range map[string]*catalog.Consumer{
		"tool":     startTool(t, c, bg, "tool", public, reply("x")),
		"template": startTemplate(t, c, bg, "test://tpl/{x}", tag("t", nil)),
		"prompt":   startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, echoPrompt(nil)),
	} {
		assert.ErrorIs(t, k.Updated(), catalog.ErrInvalidRoute, name)
	}
	assert.Empty(t, heard(), "a listener heard an update no fixed resource made")
}
