package mcpserve_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A stateless server speaks MCP 2026-07-28: the SDK's client discovers it
// (no initialize), sends the version with every request, and lists and
// calls as before. In a real server, serve it with
// srv.ListenAndServe(ctx, "127.0.0.1:8931") instead of httptest.
func ExampleOptions_stateless() {
	ctx := context.Background()
	cat, _ := catalog.New(catalog.Config{})
	greeter, _ := cat.StartTool(ctx, catalog.Tool{Name: "greet"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("hello"), nil })

	srv, err := mcpserve.New(cat, mcpserve.Options{
		Stateless: true,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	// With a ToolListChangedHandler the client would also open a
	// subscriptions/listen stream and hear of every change on it.
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close()
	fmt.Println("protocol:", session.InitializeResult().ProtocolVersion)
	res, _ := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)

	_ = greeter.Stop(ctx)
	tools, _ := session.ListTools(ctx, nil)
	fmt.Println("tools after the stop:", len(tools.Tools))
	// Output:
	// protocol: 2026-07-28
	// hello
	// tools after the stop: 0
}
