package mcpserve_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// listenOutcome connects a client of the current revision in memory and
// returns how the server answered the subscriptions/listen it opens: nil
// once the stream is acknowledged (admitted), or the error it was refused
// with. Either answer comes at once, so neither is waited for by a clock
// beyond eventGuard.
func listenOutcome(t *testing.T, f *fixture, refused <-chan error) error {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := f.srv.MCP().Connect(ctxGuard(t), st, nil); err != nil {
		t.Fatal(err)
	}
	// The client listens only for what it has handlers for.
	cl := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
		Logger:                 quietLogger(),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := cl.Connect(ctxGuard(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	select {
	case <-f.acks:
		return nil
	case err := <-refused:
		if err == nil {
			t.Fatal("a refused listen without an error")
		}
		return err
	case <-time.After(eventGuard):
		t.Fatal("the listen was neither acknowledged nor refused")
		return nil
	}
}

// A graceful shutdown of Serve refuses the listen streams that arrive
// while it lasts, over any transport, and only while it lasts: once Serve
// has returned, the server admits them again. A call in flight holds the
// shutdown open.
func TestServeShutdownRefusesListensWhileItLasts(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			<-release
			return catalog.TextResult("done"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // first, whatever failed: Stop waits for the body
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Stateless: true, ShutdownTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	f := wrapFixture(t, cat, srv)
	// Added last, this middleware is the outermost: it sees the refusal a
	// listen gets. An admitted listen returns only when its stream ends.
	refused := make(chan error, 16)
	srv.MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "subscriptions/listen" && err != nil && !errors.Is(ctx.Err(), context.Canceled) {
				refused <- err
			}
			return res, err
		}
	})
	if err := listenOutcome(t, f, refused); err != nil {
		t.Fatalf("a listen before the shutdown: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	// The call's response starts only when its body returns.
	called := make(chan error, 1)
	go func() {
		resp, err := postCtx(ctxGuard(t), "http://"+ln.Addr().String()+"/mcp", "", "tools/call", "slow",
			map[string]any{"name": "slow", "arguments": map[string]any{}})
		if err == nil {
			err = resp.Body.Close()
		}
		called <- err
	}()
	wait(t, entered, "the call to reach the body")

	// The shutdown ends the open stream before it waits for the call: by
	// the time none is open, it refuses new ones.
	cancel()
	untilListens(t, srv, 0)
	err = listenOutcome(t, f, refused)
	if rpcCode(err) != mcpserve.CodeOverloaded || rpcData(err)["reason"] != "shutting_down" {
		t.Fatalf("a listen during the shutdown = %v (data %v), want CodeOverloaded, shutting_down", err, rpcData(err))
	}

	unblock()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(eventGuard):
		t.Fatal("the shutdown did not end once the call did")
	}
	if err := <-called; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if err := listenOutcome(t, f, refused); err != nil {
		t.Fatalf("a listen after the shutdown: %v", err)
	}
}

// Close stops the catalog's calls into the server: a closed server is not
// kept alive by the catalog it served, however long that catalog and its
// consumers live on.
func TestClosedServerNotHeldByCatalog(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	k := startWatched(t, cat, context.Background(), "test://lives-on")
	held := func() weak.Pointer[mcp.Server] {
		srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		return weak.Make(srv.MCP())
	}()
	deadline := time.Now().Add(eventGuard)
	for held.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the catalog still holds the closed server: Close left it a listener")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if err := k.Updated(); err != nil {
		t.Fatal(err)
	}
}

// After Close, serving returns ErrClosed, and a call that still reaches
// the server (through a transport connected to its SDK server directly)
// begins with its context ended by ErrClosed: Close ends the calls that
// start later too.
func TestAfterClose(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	_, err := cat.StartTool(context.Background(), catalog.Tool{Name: "cause"}, bindsec.Plan{Public: true},
		func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
			return catalog.TextResult(fmt.Sprint(context.Cause(ctx))), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cat, mcpserve.Options{})
	if err := f.srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Under a context already ended: a server that served anyway would
	// return at once, with something other than ErrClosed.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.srv.Serve(ended, ln); !errors.Is(err, mcpserve.ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
	_, st := mcp.NewInMemoryTransports()
	if err := f.srv.ServeTransport(ended, st); !errors.Is(err, mcpserve.ErrClosed) {
		t.Errorf("ServeTransport after Close = %v, want ErrClosed", err)
	}
	c := f.connect(memoryLegacy, "")
	res, err := call(t, c, "cause")
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != mcpserve.ErrClosed.Error() {
		t.Errorf("a call after Close ran with its context ended by %q, want ErrClosed", got)
	}
}
