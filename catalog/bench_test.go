package catalog_test

import (
	"context"
	"testing"

	"github.com/livereg/livereg/catalog"
)

// BenchmarkCallTool measures the catalog's own cost per call: resolve,
// guard and the hand-off to the consumer's goroutines and back, beside a
// direct call of the same trivial handler.
func BenchmarkCallTool(b *testing.B) {
	handler := func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil }
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = handler(bg, catalog.Call{Name: "mcp.tool.name-000001"})
			}
		})
	})
	b.Run("catalog", func(b *testing.B) {
		c := newCatalog(b, catalog.Config{})
		startTool(b, c, bg, "mcp.tool.name-000001", public, handler)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.CallTool(bg, "mcp.tool.name-000001", nil, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
