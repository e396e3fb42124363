//lint:file-ignore SA1019 these tests check MCP logging, deprecated as of protocol 2026-07-28 but still served.

package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// These tests drive the official SDK client against the server over the
// in-memory transport and over streamable HTTP on loopback: what a tool
// author expects of an MCP SDK (typed tools, validated arguments,
// structured content, progress, logging, cancellation) through catalog
// routes.

type sumIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

// sdkTransports are the transports these tests connect over.
var sdkTransports = []transport{memoryLegacy, streamable}

// notes is what a client received besides results.
type notes struct {
	progress chan *mcp.ProgressNotificationParams
	logs     chan *mcp.LoggingMessageParams
}

// connectNotes connects a client over tr that records progress and log
// notifications.
func (f *fixture) connectNotes(tr transport) (*mcp.ClientSession, *notes) {
	f.t.Helper()
	n := &notes{progress: make(chan *mcp.ProgressNotificationParams, 64), logs: make(chan *mcp.LoggingMessageParams, 64)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		Logger:                      quietLogger(),
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { n.progress <- r.Params },
		LoggingMessageHandler:       func(_ context.Context, r *mcp.LoggingMessageRequest) { n.logs <- r.Params },
	})
	ctx := ctxGuard(f.t)
	var (
		cs  *mcp.ClientSession
		err error
	)
	switch tr {
	case memoryLegacy:
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.srv.MCP().Connect(ctx, st, nil); err != nil {
			f.t.Fatal(err)
		}
		cs, err = cl.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	case streamable:
		cs, err = cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.http.URL, MaxRetries: -1}, sessionful)
	default:
		f.t.Fatalf("transport %q not supported here", tr)
	}
	if err != nil {
		f.t.Fatalf("connect over %s: %v", tr, err)
	}
	f.t.Cleanup(func() { _ = cs.Close() })
	return cs, n
}

func startTyped[In, Out any](t *testing.T, cat *catalog.Catalog, name string, h catalog.TypedHandler[In, Out]) *catalog.Consumer {
	t.Helper()
	tool, body, err := catalog.TypedTool(catalog.Tool{Name: name}, h)
	if err != nil {
		t.Fatal(err)
	}
	k, err := cat.StartTool(context.Background(), tool, bindsec.Plan{Public: true}, body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

// TestTypedToolOverSDK: a typed tool is listed with its inferred schemas;
// good arguments get structuredContent and its text rendering; bad ones
// get -32602 naming the problem, and the body never runs.
func TestTypedToolOverSDK(t *testing.T) {
	for _, tr := range sdkTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			runs := make(chan sumIn, 16)
			startTyped(t, cat, "sum", func(_ context.Context, _ catalog.Call, in sumIn) (sumOut, error) {
				runs <- in
				return sumOut{Sum: in.A + in.B}, nil
			})
			f := newFixture(t, cat, mcpserve.Options{})
			cs, _ := f.connectNotes(tr)
			ctx := ctxGuard(t)

			list, err := cs.ListTools(ctx, nil)
			if err != nil || len(list.Tools) != 1 {
				t.Fatalf("list: %v %+v", err, list)
			}
			schema, _ := json.Marshal(list.Tools[0].InputSchema)
			if !strings.Contains(string(schema), `"required":["a","b"]`) {
				t.Errorf("input schema %s", schema)
			}
			if list.Tools[0].OutputSchema == nil {
				t.Error("no output schema listed")
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sum", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res.StructuredContent)
			if string(got) != `{"sum":5}` || res.IsError {
				t.Errorf("structuredContent %s, isError %v", got, res.IsError)
			}
			if txt := text(t, res); txt != `{"sum":5}` {
				t.Errorf("text rendering %q", txt)
			}
			<-runs

			for _, bad := range []struct {
				args any
				want string
			}{
				{map[string]any{"a": 2}, "b"},
				{map[string]any{"a": "two", "b": 3}, "a"},
				{42, "not a JSON object"},
				{"x", "not a JSON object"},
			} {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sum", Arguments: bad.args})
				if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "invalid arguments") || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("arguments %v: got %v, want -32602 invalid arguments naming %q", bad.args, err, bad.want)
				}
			}
			select {
			case in := <-runs:
				t.Errorf("the body ran on refused arguments: %+v", in)
			default:
			}
		})
	}
}

// TestOutputSchemaMismatchIsToolError: a result that breaks the declared
// output schema reaches the client as a tool error, not as a result the
// client would find invalid.
func TestOutputSchemaMismatchIsToolError(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "liar", OutputSchema: json.RawMessage(`{"type":"object","required":["n"]}`)},
		bindsec.Plan{Public: true}, func(context.Context, catalog.Call) (catalog.Result, error) {
			return catalog.Result{StructuredContent: map[string]any{"m": 1}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	f := newFixture(t, cat, mcpserve.Options{})
	cs, _ := f.connectNotes(memoryLegacy)
	res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "liar"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "output schema") || res.StructuredContent != nil {
		t.Errorf("got %+v, want a tool error about the output schema", res)
	}
}

// TestProgressAndLogging: a slow tool's progress notifications reach the
// client in order with its progress token, none are sent without a token,
// and log messages follow the session's logging/setLevel.
func TestProgressAndLogging(t *testing.T) {
	const steps = 5
	for _, tr := range sdkTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			startTyped(t, cat, "slow", func(ctx context.Context, c catalog.Call, _ struct{}) (sumOut, error) {
				for i := 1; i <= steps; i++ {
					if err := c.ReportProgress(ctx, catalog.Progress{Progress: float64(i), Total: steps, Message: fmt.Sprint("step ", i)}); err != nil {
						return sumOut{}, err
					}
				}
				_ = c.Log(ctx, slog.LevelDebug, "debug detail")
				_ = c.Log(ctx, slog.LevelWarn, map[string]any{"done": steps})
				return sumOut{Sum: steps}, nil
			})
			f := newFixture(t, cat, mcpserve.Options{})
			cs, n := f.connectNotes(tr)
			ctx := ctxGuard(t)
			if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Logging == nil {
				t.Error("the server does not declare the logging capability")
			}
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}

			params := &mcp.CallToolParams{Name: "slow"}
			params.SetProgressToken("tok-1")
			if _, err := cs.CallTool(ctx, params); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= steps; i++ {
				select {
				case p := <-n.progress:
					if p.ProgressToken != "tok-1" || p.Progress != float64(i) || p.Total != steps || p.Message != fmt.Sprint("step ", i) {
						t.Errorf("progress %d: got %+v", i, p)
					}
				case <-ctx.Done():
					t.Fatalf("progress %d never arrived", i)
				}
			}
			select {
			case m := <-n.logs:
				data, _ := json.Marshal(m.Data)
				if m.Level != "warning" || string(data) != `{"done":5}` {
					t.Errorf("log: got %s %s, want the warning only (debug is below info)", m.Level, data)
				}
			case <-ctx.Done():
				t.Fatal("the warning never arrived")
			}

			// Without a token: no progress. The log message of this call,
			// which arrives after any progress would have (notifications
			// keep their order), shows the call's notifications are in.
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-n.logs:
			case <-ctx.Done():
				t.Fatal("the second warning never arrived")
			}
			select {
			case p := <-n.progress:
				t.Errorf("progress sent without a token: %+v", p)
			default:
			}
		})
	}
}

// TestClientCancelEndsBodyContext: the client's notifications/cancelled
// ends the body's ctx; the body returns, and its consumer lives on and
// serves the next call.
func TestClientCancelEndsBodyContext(t *testing.T) {
	for _, tr := range sdkTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			k := startTyped(t, cat, "wait", func(ctx context.Context, _ catalog.Call, in struct {
				Block bool `json:"block"`
			}) (sumOut, error) {
				if !in.Block {
					return sumOut{Sum: 1}, nil
				}
				started <- struct{}{}
				<-ctx.Done()
				ended <- context.Cause(ctx)
				return sumOut{}, ctx.Err()
			})
			f := newFixture(t, cat, mcpserve.Options{})
			cs, _ := f.connectNotes(tr)

			callCtx, cancel := context.WithCancel(ctxGuard(t))
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"block": true}})
				errc <- err
			}()
			wait(t, started, "the body to start")
			cancel()
			select {
			case <-ended:
			case <-ctxGuard(t).Done():
				t.Fatal("the body's ctx never ended")
			}
			if err := <-errc; err == nil {
				t.Error("the cancelled call succeeded")
			}
			select {
			case <-k.Done():
				t.Fatal("a cancelled call killed its consumer")
			default:
			}
			res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"block": false}})
			if err != nil || res.IsError {
				t.Fatalf("the next call: %v %+v", err, res)
			}
		})
	}
}
