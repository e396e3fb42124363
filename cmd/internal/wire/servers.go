// Package wire holds the servers that cmd/wirebench measures over
// streamable HTTP, and the raw client that loads them: livereg's mcpserve,
// a bare go-sdk server (mcp.AddTool), a bare mcp-go server, and a floor of
// plain net/http and encoding/json that answers the same JSON-RPC with no
// MCP at all. Each serves one tool, echo, and as many more as a listing
// asks for, each with a small raw input schema; each in a stateful and a
// stateless mode where it has both.
//
// One client is used for every server, so that only the server differs;
// it checks every answer (Client.Call, Client.List).
package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// EchoText is what a call of echo asks echoed, and the client checks.
const EchoText = "ok"

// extraSchema is the input schema of every tool but echo.
const extraSchema = `{"type":"object","properties":{"text":{"type":"string"}}}`

// A Server is one implementation under test.
type Server struct {
	Name     string
	Stateful bool // a client must initialize a session first
	// CallsOnly: it serves echo and no listing (livereg-forward, whose
	// replica lists only what it holds).
	CallsOnly bool
	// New returns its handler serving echo and tools-1 more tools, and
	// what stops it (nil for nothing).
	New func(tools int) (http.Handler, func(), error)
}

// Servers are every implementation, the floor first.
var Servers = []Server{
	{"floor", false, false, func(n int) (http.Handler, func(), error) { return floor(n), nil, nil }},
	{"livereg", true, false, func(n int) (http.Handler, func(), error) { return livereg(false, n) }},
	{"livereg-stateless", false, false, func(n int) (http.Handler, func(), error) { return livereg(true, n) }},
	{"livereg-forward", false, true, func(int) (http.Handler, func(), error) { return liveregForward() }},
	{"go-sdk", true, false, func(n int) (http.Handler, func(), error) { return goSDK(false, n), nil, nil }},
	{"go-sdk-stateless", false, false, func(n int) (http.Handler, func(), error) { return goSDK(true, n), nil, nil }},
	{"mcp-go", true, false, func(n int) (http.Handler, func(), error) { return mcpGo(false, n), nil, nil }},
	{"mcp-go-stateless", false, false, func(n int) (http.Handler, func(), error) { return mcpGo(true, n), nil, nil }},
}

// Lookup returns the server named name.
func Lookup(name string) (Server, error) {
	i := slices.IndexFunc(Servers, func(s Server) bool { return s.Name == name })
	if i < 0 {
		return Server{}, fmt.Errorf("wire: no server %q", name)
	}
	return Servers[i], nil
}

// ExtraTool names the extra tools a listing serves beside echo.
func ExtraTool(i int) string { return fmt.Sprintf("tool-%04d", i) }

type echoArgs struct {
	Text string `json:"text"`
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func livereg(stateless bool, tools int) (http.Handler, func(), error) {
	cat, stop, err := liveregCatalog(tools)
	if err != nil {
		return nil, nil, err
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quiet(), Stateless: stateless})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return srv.Handler(), func() { _ = srv.Close(); stop() }, nil
}

// liveregCatalog is a catalog serving echo and tools-1 more tools, and
// what stops their consumers.
func liveregCatalog(tools int) (*catalog.Catalog, func(), error) {
	ctx := context.Background()
	cat, err := catalog.New(catalog.Config{MaxTools: tools})
	if err != nil {
		return nil, nil, err
	}
	var cons []*catalog.Consumer
	stop := func() {
		for _, k := range cons {
			_ = k.Stop(ctx)
		}
	}
	k, err := cat.StartTool(ctx, catalog.Tool{Name: "echo", Description: "echoes its text", InputSchema: json.RawMessage(extraSchema)},
		bindsec.Plan{Public: true}, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			var in echoArgs
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(in.Text), nil
		})
	if err != nil {
		return nil, nil, err
	}
	cons = append(cons, k)
	for i := 1; i < tools; i++ {
		k, err := cat.StartTool(ctx, catalog.Tool{Name: ExtraTool(i), Description: "a listed tool", InputSchema: json.RawMessage(extraSchema)},
			bindsec.Plan{Public: true}, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult(EchoText), nil })
		if err != nil {
			stop()
			return nil, nil, err
		}
		cons = append(cons, k)
	}
	return cat, stop, nil
}

func goSDK(stateless bool, tools int) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, &mcp.ServerOptions{Logger: quiet()})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	for i := 1; i < tools; i++ {
		srv.AddTool(&mcp.Tool{Name: ExtraTool(i), Description: "a listed tool", InputSchema: json.RawMessage(extraSchema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: EchoText}}}, nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless, Logger: quiet()})
}

func mcpGo(stateless bool, tools int) http.Handler {
	srv := mcpgoserver.NewMCPServer("mcp-go", "1", mcpgoserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("echoes its text"), mcpgo.WithString("text")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("text", "")), nil
		})
	for i := 1; i < tools; i++ {
		srv.AddTool(mcpgo.NewTool(ExtraTool(i), mcpgo.WithDescription("a listed tool"), mcpgo.WithString("text")),
			func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
				return mcpgo.NewToolResultText(EchoText), nil
			})
	}
	return mcpgoserver.NewStreamableHTTPServer(srv, mcpgoserver.WithStateLess(stateless))
}

// floor answers tools/call of echo, and tools/list of tools tools in one
// page, as a JSON-RPC server of plain net/http and encoding/json would:
// no sessions, no MCP, the least any server here could do with the same
// request.
func floor(tools int) http.Handler {
	type request struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string   `json:"name"`
			Arguments echoArgs `json:"arguments"`
		} `json:"params"`
	}
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	type result struct {
		Content []text `json:"content,omitempty"`
		Tools   []tool `json:"tools,omitempty"`
	}
	type response struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  result          `json:"result"`
	}
	list := []tool{{"echo", "echoes its text", json.RawMessage(extraSchema)}}
	for i := 1; i < tools; i++ {
		list = append(list, tool{ExtraTool(i), "a listed tool", json.RawMessage(extraSchema)})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		resp := response{JSONRPC: "2.0", ID: req.ID}
		switch req.Method {
		case "tools/call":
			resp.Result.Content = []text{{"text", req.Params.Arguments.Text}}
		case "tools/list":
			resp.Result.Tools = list
		default:
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}
