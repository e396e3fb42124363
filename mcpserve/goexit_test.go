package mcpserve_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// exitRoutes are a tool, a resource and a prompt whose bodies call
// runtime.Goexit, each with a call of them.
var exitRoutes = []struct {
	kind  string
	start func(cat *catalog.Catalog) (*catalog.Consumer, error)
	call  func(ctx context.Context, cs *mcp.ClientSession) error
}{
	{"tool", func(cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartTool(context.Background(), catalog.Tool{Name: "exit"}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Call) (catalog.Result, error) {
				runtime.Goexit()
				return catalog.Result{}, nil
			}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(0))
	}, func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exit", Arguments: map[string]any{}})
		return err
	}},
	{"resource", func(cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartResource(context.Background(), catalog.Resource{URI: "test://exit", Name: "exit"}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Read) (catalog.Contents, error) {
				runtime.Goexit()
				return catalog.Contents{}, nil
			})
	}, func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://exit"})
		return err
	}},
	{"prompt", func(cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartPrompt(context.Background(), catalog.Prompt{Name: "exit"}, bindsec.Plan{Public: true},
			func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
				runtime.Goexit()
				return catalog.PromptResult{}, nil
			})
	}, func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "exit"})
		return err
	}},
}

// A body that ends the request's goroutine with runtime.Goexit cannot be
// answered as a panic is: Go does not stop the Goexit. The client still
// gets an error, never a hang (the HTTP layer answers, or closes the
// connection), the consumer is dead, the server serves the next call, and
// no goroutine is left behind. For a tool, a resource and a prompt, on
// both paths, with and without a session.
func TestGoexitInBodyOverHTTP(t *testing.T) {
	type transport struct {
		name            string
		stateless, fast bool
	}
	for _, tc := range []transport{
		{"stateless fast path", true, true},
		{"stateless SDK path", true, false},
		{"session fast path", false, true},
		{"session SDK path", false, false},
	} {
		for _, route := range exitRoutes {
			t.Run(tc.name+"/"+route.kind, func(t *testing.T) {
				testGoexitOverHTTP(t, tc.stateless, tc.fast, route.start, route.call)
			})
		}
	}
}

func testGoexitOverHTTP(t *testing.T, stateless, fast bool, start func(*catalog.Catalog) (*catalog.Consumer, error), call func(context.Context, *mcp.ClientSession) error) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newCatalog(t, catalog.Config{Logger: quietLogger()})
	k, err := start(cat)
	require.NoError(t, err)
	ok := startText(t, cat, context.Background(), "ok", "fine")
	srv, err := mcpserve.New(cat, mcpserve.Options{Stateless: stateless, Logger: quietLogger()})
	require.NoError(t, err)
	if !fast {
		mcpserve.NoFastPath(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	opts := sessionful
	if stateless {
		opts = nil
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "goexit", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1, DisableStandaloneSSE: true}, opts)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = call(ctx, cs)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the call hung: %v", err)
	if !fast {
		// The SDK's path answers, as for a panic: internal error.
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr)
		assert.Equal(t, int64(jsonrpc.CodeInternalError), rpcErr.Code)
		assert.Contains(t, rpcErr.Message, "internal error")
	}
	t.Logf("the client saw: %v", err)
	select {
	case <-k.Done():
	case <-ctx.Done():
		t.Fatal("the consumer whose body called Goexit lives on")
	}
	assert.Equal(t, uint64(1), cat.Stats().Calls.Panicked, "the call is counted as an unwind")

	// The server serves on, on a connection of the client's.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{}})
	if !stateless && err != nil {
		// A session whose request died with its connection may be
		// gone with it; a new one is served.
		cs2, cerr := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1, DisableStandaloneSSE: true}, opts)
		require.NoError(t, cerr)
		defer func() { _ = cs2.Close() }()
		res, err = cs2.CallTool(ctx, &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{}})
	}
	require.NoError(t, err)
	assert.Equal(t, "fine", text(t, res))

	_ = cs.Close()
	ts.Close()
	require.NoError(t, srv.Close())
	require.NoError(t, ok.Stop(context.Background()))
}
