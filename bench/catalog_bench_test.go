package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// BenchmarkDispatch is the cost of catalog.CallTool (resolve, the plan
// guard, the hand-off to the consumer's bridge goroutines and back) beside
// calling the same trivial handler directly: the dispatch overhead.
// impl=livereg is the catalog; impl=handler is the bare call, so its ratio
// in the report is the share of a call that is the handler itself.
// plan=public skips authentication; plan=role presents a bearer token to
// bindsec.StaticTokens.
func BenchmarkDispatch(b *testing.B) {
	const tool = "mcp.tool.name-000000"
	handler := trivialHandler
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"token-good": {Subject: "alice", Roles: []string{"tools:call"}},
	})
	ctx := context.Background()
	for _, plan := range []struct {
		name string
		plan bindsec.Plan
		cred string
	}{{"public", bindsec.Plan{Public: true}, ""}, {"role", needsRole, "token-good"}} {
		run(b, fmt.Sprintf("plan=%s/impl=livereg", plan.name), func(b *testing.B) (*catalog.Catalog, func()) {
			cat, err := catalog.New(catalog.Config{Authenticator: auth})
			if err != nil {
				b.Fatal(err)
			}
			cons, err := cat.StartTool(ctx, catalog.Tool{Name: tool}, plan.plan, handler)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cat.CallTool(ctx, tool, nil, plan.cred); err != nil {
				b.Fatal(err)
			}
			// The consumer must stay reachable: a dropped one dies at the
			// next collection.
			return cat, func() { _ = cons.Stop(ctx) }
		}, func(b *testing.B, cat *catalog.Catalog) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cat.CallTool(ctx, tool, nil, plan.cred); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		run(b, fmt.Sprintf("plan=%s/impl=handler", plan.name), func(*testing.B) (struct{}, func()) {
			return struct{}{}, nil
		}, func(b *testing.B, _ struct{}) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := handler(ctx, catalog.Call{Name: tool}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// trivialHandler is a variable, not a literal at the call site, so that the
// direct call is a real indirect call, as dispatch's is, and not inlined.
var trivialHandler catalog.ToolHandler = func(context.Context, catalog.Call) (catalog.Result, error) {
	return catalog.Result{}, nil
}
