package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// The wire benchmarks serve one tool, echo, over streamable HTTP on
// loopback, and call it with one raw HTTP client that is the same for
// every server, so that only the server differs: livereg's mcpserve, a
// bare go-sdk server (mcp.AddTool), a bare mcp-go server, and a floor of
// plain net/http and encoding/json that answers the same JSON-RPC with no
// MCP at all. A stateful server gets one session per client goroutine
// (initialize, then notifications/initialized); a stateless one none.
//
// Client and server share the process, so B/op and allocs/op count both;
// the client is the same for all, so differences are the servers'. Each
// call's latency goes into an HDR histogram, reported as p50-ns and
// p99-ns.

// wireVersion is the protocol the client speaks: the revision before
// 2026-07-28, which every server here serves.
const wireVersion = "2025-11-25"

// echoText is what every server's echo answers, and the client checks.
const echoText = "ok"

// wireServer is one server under test: its handler, serving echo and
// tools-1 more tools, and whether it holds sessions.
type wireServer struct {
	name     string
	stateful bool
	handler  func(b *testing.B, tools int) (http.Handler, func())
}

var wireServers = []wireServer{
	{"floor", false, func(_ *testing.B, n int) (http.Handler, func()) { return floorHandler(n), nil }},
	{"livereg", true, func(b *testing.B, n int) (http.Handler, func()) { return liveregHandler(b, false, n) }},
	{"livereg-stateless", false, func(b *testing.B, n int) (http.Handler, func()) { return liveregHandler(b, true, n) }},
	{"go-sdk", true, func(_ *testing.B, n int) (http.Handler, func()) { return goSDKHandler(false, n), nil }},
	{"go-sdk-stateless", false, func(_ *testing.B, n int) (http.Handler, func()) { return goSDKHandler(true, n), nil }},
	{"mcp-go", true, func(_ *testing.B, n int) (http.Handler, func()) { return mcpGoHandler(false, n), nil }},
	{"mcp-go-stateless", false, func(_ *testing.B, n int) (http.Handler, func()) { return mcpGoHandler(true, n), nil }},
}

// BenchmarkWireCall is tools/call of echo over streamable HTTP from 16
// and from 128 clients at once, each a goroutine with a session of its
// own where the server keeps sessions, against each server of wireServers
// in the same run.
func BenchmarkWireCall(b *testing.B) {
	for _, clients := range []int{16, 128} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			wireRun(b, 1, clients, (*wireClient).call)
		})
	}
}

// listTools is how many tools BenchmarkWireList lists.
const listTools = 1000

// BenchmarkWireList is tools/list of 1,000 tools over streamable HTTP,
// every page followed, from 16 clients at once, against each server of
// wireServers in the same run. The extra tools declare their input
// schema as JSON (the go-sdk's AddTool with a raw schema, which it encodes
// once).
func BenchmarkWireList(b *testing.B) {
	wireRun(b, listTools, 16, func(c *wireClient) error { return c.list(listTools) })
}

// wireRun runs op from clients goroutines (a multiple of GOMAXPROCS, at
// least one each) against each server serving tools tools, and reports
// its latency percentiles.
func wireRun(b *testing.B, tools, clients int, op func(*wireClient) error) {
	for _, s := range wireServers {
		b.Run("impl="+s.name, func(b *testing.B) {
			b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
			h, cleanup := s.handler(b, tools)
			ts := httptest.NewServer(h)
			defer func() {
				ts.Close()
				if cleanup != nil {
					cleanup()
				}
			}()
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			defer hc.CloseIdleConnections()
			var (
				mu   sync.Mutex
				hist = hdrhistogram.New(1, int64(10*time.Second), 3)
			)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := &wireClient{hc: hc, url: ts.URL}
				if s.stateful {
					if err := c.initialize(); err != nil {
						b.Error(err)
						return
					}
				}
				local := hdrhistogram.New(1, int64(10*time.Second), 3)
				for pb.Next() {
					t0 := time.Now()
					if err := op(c); err != nil {
						b.Error(err)
						return
					}
					_ = local.RecordValue(int64(time.Since(t0)))
				}
				mu.Lock()
				hist.Merge(local)
				mu.Unlock()
			})
			b.StopTimer()
			b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
			b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
		})
	}
}

// wireClient is one client goroutine's connection to a server: its
// session, if any, and a buffer for the bodies it reads.
type wireClient struct {
	hc      *http.Client
	url     string
	session string
	seq     int
	buf     bytes.Buffer
}

// post sends one JSON-RPC message and returns the body of the response,
// an SSE stream or a JSON document, valid until the next post.
func (c *wireClient) post(body string) ([]byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", wireVersion)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, c.buf.Bytes())
	}
	return c.buf.Bytes(), resp.Header, nil
}

func (c *wireClient) initialize() error {
	_, h, err := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + wireVersion +
		`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	c.session = h.Get("Mcp-Session-Id")
	if c.session == "" {
		return fmt.Errorf("initialize: no Mcp-Session-Id")
	}
	if _, _, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

func (c *wireClient) call() error {
	c.seq++
	body, _, err := c.post(`{"jsonrpc":"2.0","id":` + fmt.Sprint(c.seq) +
		`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + echoText + `"}}}`)
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	if !bytes.Contains(body, []byte(`"text":"`+echoText+`"`)) || bytes.Contains(body, []byte(`"isError":true`)) {
		return fmt.Errorf("tools/call answered %.300s", body)
	}
	return nil
}

// list walks every page of tools/list and checks that n tools came back.
func (c *wireClient) list(n int) error {
	cursor, got := "", 0
	for page := 0; ; page++ {
		c.seq++
		params := `{}`
		if cursor != "" {
			params = `{"cursor":` + strconv.Quote(cursor) + `}`
		}
		body, _, err := c.post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(c.seq) + `,"method":"tools/list","params":` + params + `}`)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if i := bytes.Index(body, []byte("data: ")); i >= 0 { // an SSE event: its data line
			body = body[i+len("data: "):]
			if j := bytes.IndexByte(body, '\n'); j >= 0 {
				body = body[:j]
			}
		}
		var resp struct {
			Result struct {
				Tools      []struct{ Name string } `json:"tools"`
				NextCursor string                  `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("tools/list answered %.300s: %w", body, err)
		}
		got += len(resp.Result.Tools)
		if cursor = resp.Result.NextCursor; cursor == "" || page > n {
			break
		}
	}
	if got != n {
		return fmt.Errorf("tools/list listed %d tools, want %d", got, n)
	}
	return nil
}

// extraTool names the extra tools a listing benchmark adds to echo; their
// input schema is extraSchema.
func extraTool(i int) string { return fmt.Sprintf("tool-%04d", i) }

const extraSchema = `{"type":"object","properties":{"text":{"type":"string"}}}`

// echoArgs are the arguments of every server's echo.
type echoArgs struct {
	Text string `json:"text"`
}

func liveregHandler(b *testing.B, stateless bool, tools int) (http.Handler, func()) {
	ctx := context.Background()
	cat, err := catalog.New(catalog.Config{MaxTools: tools})
	if err != nil {
		b.Fatal(err)
	}
	k, err := cat.StartTool(ctx, catalog.Tool{Name: "echo", Description: "echoes its text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}, bindsec.Plan{Public: true},
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			var in echoArgs
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(in.Text), nil
		})
	if err != nil {
		b.Fatal(err)
	}
	cons := []*catalog.Consumer{k}
	for i := 1; i < tools; i++ {
		k, err := cat.StartTool(ctx, catalog.Tool{Name: extraTool(i), Description: "a listed tool", InputSchema: json.RawMessage(extraSchema)},
			bindsec.Plan{Public: true}, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult(echoText), nil })
		if err != nil {
			b.Fatal(err)
		}
		cons = append(cons, k)
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Stateless: stateless})
	if err != nil {
		b.Fatal(err)
	}
	return srv.Handler(), func() {
		_ = srv.Close()
		for _, k := range cons {
			_ = k.Stop(ctx)
		}
	}
}

func goSDKHandler(stateless bool, tools int) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, &mcp.ServerOptions{Logger: quietLogger()})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	for i := 1; i < tools; i++ {
		srv.AddTool(&mcp.Tool{Name: extraTool(i), Description: "a listed tool", InputSchema: json.RawMessage(extraSchema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: echoText}}}, nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless, Logger: quietLogger()})
}

func mcpGoHandler(stateless bool, tools int) http.Handler {
	srv := mcpgoserver.NewMCPServer("mcp-go", "1", mcpgoserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("echoes its text"), mcpgo.WithString("text")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("text", "")), nil
		})
	for i := 1; i < tools; i++ {
		srv.AddTool(mcpgo.NewTool(extraTool(i), mcpgo.WithDescription("a listed tool"), mcpgo.WithString("text")),
			func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
				return mcpgo.NewToolResultText(echoText), nil
			})
	}
	return mcpgoserver.NewStreamableHTTPServer(srv, mcpgoserver.WithStateLess(stateless))
}

// floorHandler answers tools/call of echo, and tools/list of tools tools
// in one page, as a JSON-RPC server of plain net/http and encoding/json
// would: no sessions, no MCP, the least any server here could do with the
// same request.
func floorHandler(tools int) http.Handler {
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
		list = append(list, tool{extraTool(i), "a listed tool", json.RawMessage(extraSchema)})
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
