package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// BenchmarkValidate is the cost of checking a call's arguments, per call
// through catalog.CallTool with a trivial body and a small argument object
// ({"name":"ada","age":36}):
//
//   - schema=object: the default schema, {"type":"object"}: a scan, no
//     decoding, no allocation;
//   - schema=small: two typed properties, one required, compiled once at
//     start: a decoding of the arguments and a validation per call;
//   - schema=typed: the same through catalog.TypedTool, which also decodes
//     the arguments into a struct and encodes its output as structured
//     content, and checks it against the inferred output schema.
//
// BenchmarkDispatch/plan=public/impl=livereg is the same call without
// arguments.
func BenchmarkValidate(b *testing.B) {
	args := json.RawMessage(`{"name":"ada","age":36}`)
	ctx := context.Background()
	type person struct {
		Name string `json:"name"`
		Age  int    `json:"age,omitempty"`
	}
	typedTool, typedBody, err := catalog.TypedTool(catalog.Tool{Name: dispatchTool},
		func(context.Context, catalog.Call, person) (struct{}, error) { return struct{}{}, nil })
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tool catalog.Tool
		body catalog.ToolHandler
	}{
		{"object", catalog.Tool{Name: dispatchTool}, trivialHandler},
		{"small", catalog.Tool{Name: dispatchTool, InputSchema: json.RawMessage(
			`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}`)}, trivialHandler},
		{"typed", typedTool, typedBody},
	} {
		run(b, fmt.Sprintf("schema=%s", c.name), func(b *testing.B) (*catalog.Catalog, func()) {
			cat, err := catalog.New(catalog.Config{})
			if err != nil {
				b.Fatal(err)
			}
			cons, err := cat.StartTool(ctx, c.tool, bindsec.Plan{Public: true}, c.body)
			if err != nil {
				b.Fatal(err)
			}
			return cat, func() { _ = cons.Stop(ctx) }
		}, func(b *testing.B, cat *catalog.Catalog) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cat.CallTool(ctx, dispatchTool, args, ""); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
