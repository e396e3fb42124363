package catalog_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/livereg/livereg/catalog"
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
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Updated(); err != nil {
		t.Fatal(err)
	}
	cancel()
	cancel() // idempotent
	if err := k.Updated(); err != nil {
		t.Fatal(err)
	}
	if want := ([]string{"test://r"}); !reflect.DeepEqual(heard, want) {
		t.Errorf("heard once, until cancelled: heard = %v, want %v", heard, want)
	}

	tool := startTool(t, c, bg, "tool", public, reply("x"))
	if err := tool.Updated(); !errors.Is(err, catalog.ErrInvalidRoute) {
		t.Fatalf("err = %v, want catalog.ErrInvalidRoute", err)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if err := k.Updated(); !errors.Is(err, catalog.ErrDeadOwner) {
		t.Fatalf("err = %v, want catalog.ErrDeadOwner", err)
	}
}

func TestResourceOwner(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	fixed, err := c.StartResource(bg, catalog.Resource{URI: "test://o/fixed"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fixed.Stop(bg) }()
	tpl := startTemplate(t, c, bg, "test://o/{x}", tag("t", nil))
	for _, tt := range []struct {
		uri  string
		want *catalog.Consumer
	}{{"test://o/fixed", fixed}, {"test://o/other", tpl}, {"test://p/x", nil}} {
		o, ok := c.ResourceOwner(tt.uri)
		if tt.want == nil {
			if ok {
				t.Errorf("%v: ok is true", tt.uri)
			}
			continue
		}
		if !ok {
			t.Fatalf("%v: ok is false", tt.uri)
		}
		if !o.Same(tt.want.Owner()) {
			t.Errorf("%v: o.Same(tt.want.Owner()) is false", tt.uri)
		}
	}
}
