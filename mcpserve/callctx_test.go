package mcpserve_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A call's context must end when the HTTP request that carried it ends,
// when its session is closed, and when the server closes; and no close may
// wait on a body, whether the body honours its context or ignores it. The
// SDK alone does neither: it cancels a handler's context only after its
// connection closed, and closing the connection waits for the handlers.

// bodies starts the public tools "honour", which waits for its context to
// end and reports the cause, and "ignore", which waits for release only.
type bodies struct {
	entered chan string
	ended   chan error // context.Cause seen by "honour"
	release chan struct{}
	once    sync.Once
}

func startBodies(t *testing.T, cat *catalog.Catalog) *bodies {
	t.Helper()
	b := &bodies{entered: make(chan string, 16), ended: make(chan error, 16), release: make(chan struct{})}
	// Released before the consumers stop (cleanups run last-in first-out),
	// so that no body outlives the test.
	start := func(name string, h catalog.ToolHandler) {
		k, err := cat.StartTool(context.Background(), catalog.Tool{Name: name}, bindsec.Plan{Public: true}, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	start("honour", func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
		b.entered <- "honour"
		<-ctx.Done()
		b.ended <- context.Cause(ctx)
		return catalog.Result{}, ctx.Err()
	})
	start("ignore", func(context.Context, catalog.Call) (catalog.Result, error) {
		b.entered <- "ignore"
		<-b.release
		return catalog.TextResult("released"), nil
	})
	t.Cleanup(b.free)
	return b
}

func (b *bodies) free() { b.once.Do(func() { close(b.release) }) }

// callAsync calls tool in the background; its error (if any) is dropped:
// these tests are about the server's side. The call is abandoned at the
// end of the test, before its client closes, since a client's close waits
// for its calls.
func callAsync(t *testing.T, c *client, tool string) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	go func() {
		_, _ = c.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	}()
}

// waitErr receives from ch or fails after hangGuard.
func waitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-ctxGuard(t).Done():
		t.Fatalf("gave up waiting for %s", what)
		return nil
	}
}

// vanishingClient connects over streamable HTTP through connections the
// test can cut, as a client that crashed or lost its network would.
type vanishingClient struct {
	*client
	mu    sync.Mutex
	conns []net.Conn
}

func (f *fixture) connectVanishing(t *testing.T) *vanishingClient {
	t.Helper()
	v := &vanishingClient{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			v.mu.Lock()
			v.conns = append(v.conns, c)
			v.mu.Unlock()
		}
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	cl := mcp.NewClient(&mcp.Implementation{Name: "vanishing", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
		Endpoint: f.http.URL, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	v.client = &client{ClientSession: cs}
	return v
}

// vanish cuts every connection without a word: no DELETE, no cancel.
func (v *vanishingClient) vanish() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.conns {
		_ = c.Close()
	}
}

// A client that disappears mid-call ends the call's context: the body
// that honours it returns, and its slot is free again.
func TestCallContextEndsWhenClientVanishes(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	b := startBodies(t, cat)
	f := newFixture(t, cat, mcpserve.Options{})
	t.Cleanup(b.free)
	v := f.connectVanishing(t)
	callAsync(t, v.client, "honour")
	wait1(t, b.entered, "honour")
	v.vanish()
	if cause := waitErr(t, b.ended, "the body's context to end after its client vanished"); cause == nil {
		t.Error("the context ended without a cause")
	}
	// The route still answers other clients.
	c := f.connect(streamable, "")
	callAsync(t, c, "honour")
	wait1(t, b.entered, "honour")
}

// A DELETE of the session ends the calls in flight on it and returns,
// whether the body honours its context or not.
func TestDeleteEndsSessionCalls(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	b := startBodies(t, cat)
	f := newFixture(t, cat, mcpserve.Options{ShutdownTimeout: hangGuard})
	t.Cleanup(b.free)
	c := f.connect(streamable, "")
	callAsync(t, c, "honour")
	wait1(t, b.entered, "honour")

	status := make(chan int, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodDelete, f.http.URL, nil)
		if err != nil {
			status <- -1
			return
		}
		req.Header.Set("Mcp-Session-Id", c.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- -1
			return
		}
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitErr(t, b.ended, "the body's context to end on DELETE")
	select {
	case code := <-status:
		if code != http.StatusNoContent {
			t.Errorf("DELETE = %d, want 204", code)
		}
	case <-ctxGuard(t).Done():
		t.Fatal("DELETE never returned")
	}
}

// Server.Close returns within its bound while a body ignores its context,
// and ends, with ErrClosed, the context of a body that honours it: on a
// stateful server, whose calls belong to sessions, and on a stateless
// one, whose calls belong to their requests alone.
func TestCloseIsBoundedWhateverBodiesDo(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			b := startBodies(t, cat)
			srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), ShutdownTimeout: 1, Stateless: stateless})
			if err != nil {
				t.Fatal(err)
			}
			f := wrapFixture(t, cat, srv)
			t.Cleanup(b.free)
			connect := func() *client { return f.connect(streamable, "") }
			if stateless {
				connect = func() *client { return f.connectCurrent("") }
			}
			c1, c2 := connect(), connect()
			callAsync(t, c1, "ignore")
			wait1(t, b.entered, "ignore")
			callAsync(t, c2, "honour")
			wait1(t, b.entered, "honour")

			closed := make(chan error, 1)
			go func() { closed <- srv.Close() }()
			if err := waitErr(t, closed, "Close to return while a body ignores its context"); err != nil {
				t.Errorf("Close = %v", err)
			}
			if cause := waitErr(t, b.ended, "the honouring body's context to end on Close"); !errors.Is(cause, mcpserve.ErrClosed) {
				t.Errorf("the body's context ended with %v, want ErrClosed", cause)
			}
			b.free()
		})
	}
}

// The graceful shutdown of Serve ends, within its bound, the calls still
// running when the grace is over.
func TestServeShutdownIsBoundedWhateverBodiesDo(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	b := startBodies(t, cat)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), ShutdownTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	c1, c2 := connectNoSSE(t, url), connectNoSSE(t, url)
	callAsync(t, c1, "ignore")
	wait1(t, b.entered, "ignore")
	callAsync(t, c2, "honour")
	wait1(t, b.entered, "honour")

	cancel()
	if err := waitErr(t, served, "Serve to return while a body ignores its context"); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	waitErr(t, b.ended, "the honouring body's context to end at the shutdown's bound")
	b.free()
}

// ServeTransport, whose context ends, ends its session's calls and returns
// within its bound.
func TestServeTransportIsBoundedWhateverBodiesDo(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	b := startBodies(t, cat)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), ShutdownTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.ServeTransport(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()}).Connect(ctxGuard(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c := &client{ClientSession: cs}
	callAsync(t, c, "ignore")
	wait1(t, b.entered, "ignore")
	callAsync(t, c, "honour")
	wait1(t, b.entered, "honour")
	cancel()
	if err := waitErr(t, served, "ServeTransport to return while a body ignores its context"); err != nil {
		t.Errorf("ServeTransport = %v, want nil", err)
	}
	waitErr(t, b.ended, "the honouring body's context to end")
	b.free()
}

// wait1 receives one body name from ch and checks it.
func wait1(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("body %q entered, want %q", got, want)
		}
	case <-ctxGuard(t).Done():
		t.Fatalf("gave up waiting for %q to enter", want)
	}
}
