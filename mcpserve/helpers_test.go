package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// hangGuard bounds the requests of these tests and the waits for what may
// legitimately take long (a bounded close, a collection), so that a bug
// fails a test instead of hanging it. No test asserts on elapsed time: a
// wait either receives what it waits for or the guard fails the test.
const hangGuard = 30 * time.Second

// eventGuard bounds a wait for what the server does at once on its own: a
// notification, a stream admitted or ended, a table updated. Each takes
// milliseconds, so a test whose awaited event never comes fails within
// seconds instead of after hangGuard.
const eventGuard = 2 * time.Second

// transport names the ways a test client reaches the server.
type transport string

const (
	// memory: in-memory transports, protocol 2026-07-28 (server/discover,
	// list_changed through subscriptions/listen).
	memory transport = "memory"
	// memoryLegacy: in-memory transports, initialize handshake at
	// 2025-11-25 (list_changed sent to the session directly).
	memoryLegacy transport = "memory-2025"
	// streamable: streamable HTTP on a loopback httptest.Server, with the
	// standalone SSE stream carrying list_changed.
	streamable transport = "http"
)

var allTransports = []transport{memory, memoryLegacy, streamable}

// sessionful asks for the newest revision with sessions: a stateful
// server serves clients of 2026-07-28 too, which the SDK's client asks
// for first, and a test of what sessions do must ask for one.
var sessionful = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newCatalog(t testing.TB, cfg catalog.Config) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// fixture is a Server over a catalog with a way to connect clients.
type fixture struct {
	t    testing.TB
	cat  *catalog.Catalog
	srv  *mcpserve.Server
	http *httptest.Server

	// sse receives one value each time a standalone SSE stream is
	// established (its headers are written, with the stream claimed).
	sse chan struct{}
	// acks receives one value each time the server acknowledges a
	// subscriptions/listen, that is, after the subscription is registered.
	acks chan struct{}
}

func newFixture(t testing.TB, cat *catalog.Catalog, opts mcpserve.Options) *fixture {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	srv, err := mcpserve.New(cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	return wrapFixture(t, cat, srv)
}

func wrapFixture(t testing.TB, cat *catalog.Catalog, srv *mcpserve.Server) *fixture {
	f := &fixture{t: t, cat: cat, srv: srv, sse: make(chan struct{}, 64), acks: make(chan struct{}, 64)}
	srv.MCP().AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/subscriptions/acknowledged" {
				f.acks <- struct{}{}
			}
			return res, err
		}
	})
	f.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w = &sseSignal{ResponseWriter: w, ch: f.sse}
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	// Cleanups run last-in first-out: the server's sessions close before
	// the HTTP server waits for its requests.
	t.Cleanup(f.http.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// sseSignal reports when the SDK writes the header of a standalone SSE
// stream: it does so holding the stream's lock, after which every message
// written to the stream is delivered.
type sseSignal struct {
	http.ResponseWriter
	ch   chan struct{}
	once sync.Once
}

func (s *sseSignal) WriteHeader(code int) {
	s.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK {
		s.once.Do(func() { s.ch <- struct{}{} })
	}
}

func (s *sseSignal) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// client is one connected SDK client session and the list_changed
// notifications it received.
type client struct {
	*mcp.ClientSession
	tools, resources chan struct{}
}

// connect connects a client over tr, presenting token (if any) as a bearer
// token on HTTP, and returns once the session is able to receive
// list_changed notifications.
func (f *fixture) connect(tr transport, token string) *client {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := &client{tools: make(chan struct{}, 4096), resources: make(chan struct{}, 4096)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		Logger:                     quietLogger(),
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { c.tools <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.resources <- struct{}{} },
	})
	var err error
	switch tr {
	case memory, memoryLegacy:
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.srv.MCP().Connect(ctx, st, nil); err != nil {
			f.t.Fatal(err)
		}
		var o *mcp.ClientSessionOptions
		if tr == memoryLegacy {
			o = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}
		c.ClientSession, err = cl.Connect(ctx, ct, o)
		if err == nil && tr == memory {
			wait(f.t, f.acks, "subscriptions/listen acknowledged")
		}
	case streamable:
		c.ClientSession, err = cl.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   f.http.URL,
			HTTPClient: bearerClient(token),
			MaxRetries: -1,
		}, sessionful)
		if err == nil {
			wait(f.t, f.sse, "standalone SSE stream")
		}
	default:
		f.t.Fatalf("unknown transport %q", tr)
	}
	if err != nil {
		f.t.Fatalf("connect over %s: %v", tr, err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

// bearerClient is an HTTP client that adds an Authorization header.
func bearerClient(token string) *http.Client {
	if token == "" {
		return &http.Client{}
	}
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wait receives one value from ch, or fails the test after eventGuard.
func wait(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(eventGuard):
		t.Fatalf("gave up waiting for %s", what)
	}
}

func ctxGuard(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// startText starts a public tool that answers text, and stops it at the
// end of the test.
func startText(t testing.TB, cat *catalog.Catalog, ctx context.Context, name, text string) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartTool(ctx, catalog.Tool{Name: name, Description: "says " + text}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult(text), nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

// toolNames lists every tool, walking all pages.
func toolNames(t testing.TB, c *client) []string {
	t.Helper()
	var names []string
	for tool, err := range c.Tools(ctxGuard(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// rpcCode returns the JSON-RPC error code in err, or 0.
func rpcCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// rpcData decodes the data of the JSON-RPC error in err.
func rpcData(err error) map[string]any {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || len(we.Data) == 0 {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(we.Data, &m)
	return m
}

// text returns the text of a result's first content item.
func text(t testing.TB, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("result has no content: %+v", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content item is %T, not text", r.Content[0])
	}
	return tc.Text
}

func call(t testing.TB, c *client, name string) (*mcp.CallToolResult, error) {
	t.Helper()
	return c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
}
