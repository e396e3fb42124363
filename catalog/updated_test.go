package catalog_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/livereg/livereg/catalog"
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
		{"stopped", func(t *testing.T, k *catalog.Consumer, _ context.CancelFunc) {
			if err := k.Stop(bg); err != nil {
				t.Fatal(err)
			}
		}},
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
			if err != nil {
				t.Fatal(err)
			}
			tc.end(t, a, cancel)
			b, err := c.StartResource(bg, catalog.Resource{URI: uri}, public, emptyReader)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Stop(bg) })

			if err := a.Updated(); !errors.Is(err, catalog.ErrDeadOwner) {
				t.Fatalf("the predecessor published over its successor: err = %v, want catalog.ErrDeadOwner", err)
			}
			if len(heard()) != 0 {
				t.Errorf("a listener heard the predecessor's update: heard() = %v, want empty", heard())
			}
			if err := b.Updated(); err != nil {
				t.Fatal(err)
			}
			if got, want := heard(), ([]string{uri}); !reflect.DeepEqual(got, want) {
				t.Errorf("the successor's own update: heard() = %v, want %v", got, want)
			}
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
		if err := k.Updated(); !errors.Is(err, catalog.ErrInvalidRoute) {
			t.Errorf("%v: err = %v, want catalog.ErrInvalidRoute", name, err)
		}
	}
	if len(heard()) != 0 {
		t.Errorf("a listener heard an update no fixed resource made: heard() = %v, want empty", heard())
	}
}
