package mcpserve_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A consumer serves a tool from a catalog; an MCP client lists and calls
// it through the server; when the consumer stops, the tool is gone from
// the listing and a call is refused with -32602. In a real server, replace
// the in-memory transport with srv.ListenAndServe(ctx, "127.0.0.1:8931").
func Example() {
	ctx := context.Background()
	cat, _ := catalog.New(catalog.Config{})
	greeter, _ := cat.StartTool(ctx, catalog.Tool{Name: "greet", Description: "Says hello."}, bindsec.Plan{Public: true},
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("hello from the catalog"), nil
		})

	srv, _ := mcpserve.New(cat, mcpserve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer srv.Close()

	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	go func() { _ = srv.ServeTransport(ctx, serverEnd) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(ctx, clientEnd, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close()

	tools, _ := session.ListTools(ctx, nil)
	fmt.Println("tools:", len(tools.Tools), tools.Tools[0].Name)
	res, _ := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)

	_ = greeter.Stop(ctx)
	tools, _ = session.ListTools(ctx, nil)
	fmt.Println("tools after stop:", len(tools.Tools))
	_, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		fmt.Println("call after stop:", rpcErr.Code, rpcErr.Message)
	}
	// Output:
	// tools: 1 greet
	// hello from the catalog
	// tools after stop: 0
	// call after stop: -32602 unknown tool "greet"
}
