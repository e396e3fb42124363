package mcpserve_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

func startTemplateT(t testing.TB, cat *catalog.Catalog, ctx context.Context, tpl catalog.ResourceTemplate, rd catalog.ResourceReader, opts ...catalog.StartOption) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartResourceTemplate(ctx, tpl, bindsec.Plan{Public: true}, rd, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

func varsReader(tag string) catalog.ResourceReader {
	return func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: fmt.Sprintf("%s %v", tag, r.Vars)}, nil
	}
}

func TestResourceTemplatesListAndRead(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{PageSize: 1})
			startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{
				URITemplate: "test://items/{id}", Name: "item", MIMEType: "application/json",
			}, varsReader("item"))
			startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{URITemplate: "test://items/{id}/{part}", Name: "part"}, varsReader("part"))
			fixed, err := cat.StartResource(context.Background(), catalog.Resource{URI: "test://items/special"}, bindsec.Plan{Public: true},
				func(context.Context, catalog.Read) (catalog.Contents, error) {
					return catalog.Contents{Text: "fixed"}, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fixed.Stop(context.Background()) })
			c := f.connectSurface(tr)
			ctx := ctxGuard(t)
			var listed []string
			for tpl, err := range c.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed = append(listed, tpl.URITemplate)
			}
			if fmt.Sprint(listed) != "[test://items/{id} test://items/{id}/{part}]" {
				t.Fatalf("listed %v", listed)
			}
			for _, tt := range []struct{ uri, text, mime string }{
				{"test://items/7", "item map[id:7]", "application/json"},
				{"test://items/7/a", "part map[id:7 part:a]", ""},
				{"test://items/special", "fixed", ""},
			} {
				res, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: tt.uri})
				if err != nil {
					t.Fatal(tt.uri, err)
				}
				if rc := res.Contents[0]; rc.Text != tt.text || rc.URI != tt.uri || rc.MIMEType != tt.mime {
					t.Errorf("%s: got %+v", tt.uri, rc)
				}
			}
			_, err = c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://other/7"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("unmatched URI: %v", err)
			}
		})
	}
}

func TestResourceTemplateStartNotifies(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	c := f.connectSurface(memoryLegacy)
	startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{URITemplate: "test://n/{id}"}, varsReader("n"))
	wait(t, c.resources, "resources list_changed for a template")
}
