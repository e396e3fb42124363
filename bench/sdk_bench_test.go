package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkFixture is one client session over the SDK's in-memory transport to a
// server.
type sdkFixture struct {
	cs *mcp.ClientSession
}

// connectSDK connects a real SDK client to srv in memory.
func connectSDK(b *testing.B, srv *mcp.Server, cleanup func()) (sdkFixture, func()) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	return sdkFixture{cs: cs}, func() {
		_ = cs.Close()
		_ = ss.Wait()
		if cleanup != nil {
			cleanup()
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// livereg serves n tools named by benchNames through mcpserve; the first
// answers "ok".
func liveregSDKServer(b *testing.B, n int) (*mcp.Server, func()) {
	ctx := context.Background()
	cat, err := catalog.New(catalog.Config{MaxTools: max(n, 1)})
	if err != nil {
		b.Fatal(err)
	}
	var cons []*catalog.Consumer
	for _, name := range benchNames(n) {
		k, err := cat.StartTool(ctx, catalog.Tool{Name: name, Description: "a benchmark tool"}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
		if err != nil {
			b.Fatal(err)
		}
		cons = append(cons, k)
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return srv.MCP(), func() {
		_ = srv.Close()
		for _, k := range cons {
			_ = k.Stop(ctx)
		}
	}
}

// sdkServer adds the same n tools with the SDK's own AddTool.
func sdkServer(n int) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ServerOptions{Logger: quietLogger()})
	for _, name := range benchNames(n) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "a benchmark tool", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	return srv
}

// BenchmarkSDKCall is tools/call end to end: a real SDK client, the SDK's
// in-memory transport, and a trivial public tool, served by livereg's
// mcpserve (impl=livereg) or added with the SDK's own AddTool (impl=sdk).
// Calls come from every goroutine over one session.
func BenchmarkSDKCall(b *testing.B) {
	name := benchNames(1)[0]
	for _, impl := range []struct {
		name string
		srv  func(b *testing.B) (*mcp.Server, func())
	}{
		{"livereg", func(b *testing.B) (*mcp.Server, func()) { return liveregSDKServer(b, 1) }},
		{"sdk", func(*testing.B) (*mcp.Server, func()) { return sdkServer(1), nil }},
	} {
		run(b, "impl="+impl.name, func(b *testing.B) (sdkFixture, func()) {
			srv, cleanup := impl.srv(b)
			return connectSDK(b, srv, cleanup)
		}, func(b *testing.B, f sdkFixture) {
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
					if err != nil || res.IsError {
						b.Errorf("call: %v %+v", err, res)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSDKList is tools/list of n tools end to end, as BenchmarkSDKCall
// (every page, followed by cursor). livereg serves it from its cached
// listing.
func BenchmarkSDKList(b *testing.B) {
	const n = 1000
	for _, impl := range []struct {
		name string
		srv  func(b *testing.B) (*mcp.Server, func())
	}{
		{"livereg", func(b *testing.B) (*mcp.Server, func()) { return liveregSDKServer(b, n) }},
		{"sdk", func(*testing.B) (*mcp.Server, func()) { return sdkServer(n), nil }},
	} {
		run(b, fmt.Sprintf("n=%d/impl=%s", n, impl.name), func(b *testing.B) (sdkFixture, func()) {
			srv, cleanup := impl.srv(b)
			return connectSDK(b, srv, cleanup)
		}, func(b *testing.B, f sdkFixture) {
			ctx := context.Background()
			for b.Loop() {
				got := 0
				for tool, err := range f.cs.Tools(ctx, nil) {
					if err != nil {
						b.Fatal(err)
					}
					_ = tool
					got++
				}
				if got != n {
					b.Fatalf("listed %d tools, want %d", got, n)
				}
			}
		})
	}
}
