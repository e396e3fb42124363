package mcpserve_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// BenchmarkCallTool compares one tools/call over in-memory transports,
// in parallel over 8 sessions, answered through the catalog by the
// middleware ("catalog") and by the SDK's own table filled with AddTool
// ("sdk-addtool"), with the same trivial body. The difference is the cost
// of the hook; the JSON-RPC round trip dominates both.
func BenchmarkCallTool(b *testing.B) {
	body := func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	}
	b.Run("catalog", func(b *testing.B) {
		cat := newCatalog(b, catalog.Config{})
		k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "t"}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = k.Stop(context.Background()) }()
		f := newFixture(b, cat, mcpserve.Options{})
		benchCalls(b, func() *client { return f.connect(memoryLegacy, "") })
	})
	b.Run("sdk-addtool", func(b *testing.B) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, &mcp.ServerOptions{Logger: quietLogger()})
		srv.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return body(), nil })
		benchCalls(b, func() *client {
			ct, st := mcp.NewInMemoryTransports()
			ss, err := srv.Connect(context.Background(), st, nil)
			if err != nil {
				b.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()}).
				Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
			return &client{ClientSession: cs}
		})
	})
}

func benchCalls(b *testing.B, connect func() *client) {
	const sessions = 8
	cs := make([]*client, sessions)
	for i := range cs {
		cs[i] = connect()
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := cs[next.Add(1)%sessions]
		params := &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}}
		for pb.Next() {
			if _, err := c.CallTool(context.Background(), params); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
