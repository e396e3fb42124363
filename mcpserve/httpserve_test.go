package mcpserve_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// logSink is a slog.Handler that keeps records and signals each message it
// is told to watch for.
type logSink struct {
	mu      sync.Mutex
	records []slog.Record
	watch   map[string]chan struct{}
}

func newLogSink(watch ...string) *logSink {
	s := &logSink{watch: map[string]chan struct{}{}}
	for _, w := range watch {
		s.watch[w] = make(chan struct{}, 16)
	}
	return s
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.records = append(s.records, r)
	s.mu.Unlock()
	for w, ch := range s.watch {
		if strings.Contains(r.Message, w) {
			ch <- struct{}{}
		}
	}
	return nil
}

func (s *logSink) has(level slog.Level, substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.Level == level && strings.Contains(r.Message, substr) {
			return true
		}
	}
	return false
}

func TestServeFailsClosedWhenExposed(t *testing.T) {
	srv, err := mcpserve.New(newCatalog(t, catalog.Config{}), mcpserve.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		err := srv.ListenAndServe(context.Background(), addr)
		if !errors.Is(err, mcpserve.ErrExposed) {
			t.Errorf("ListenAndServe(%q) without an authenticator = %v, want ErrExposed", addr, err)
		}
	}
}

// The address is judged before anything is bound: a refused address is
// never listened on, not even for an instant.
func TestCheckListenAddress(t *testing.T) {
	guard := bindsec.NewStaticTokens(nil)
	for _, tc := range []struct {
		addr          string
		open, guarded error // nil: accepted
	}{
		{"127.0.0.1:8931", nil, nil},
		{"127.0.0.2:0", nil, nil},
		{"[::1]:0", nil, nil},
		{"localhost:0", nil, nil},
		{":8931", mcpserve.ErrExposed, nil},
		{"0.0.0.0:0", mcpserve.ErrExposed, nil},
		{"[::]:0", mcpserve.ErrExposed, nil},
		{"192.0.2.1:80", mcpserve.ErrExposed, nil},
		{"no-port", errMalformed, errMalformed},
	} {
		for _, c := range []struct {
			auth bindsec.Authenticator
			want error
			what string
		}{{nil, tc.open, "without an authenticator"}, {guard, tc.guarded, "with an authenticator"}} {
			err := mcpserve.CheckListenAddress(context.Background(), tc.addr, c.auth)
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s %s: %v, want accepted", tc.addr, c.what, err)
			case c.want == errMalformed && (err == nil || errors.Is(err, mcpserve.ErrExposed)):
				t.Errorf("%s %s: %v, want a parse error", tc.addr, c.what, err)
			case c.want == mcpserve.ErrExposed && !errors.Is(err, mcpserve.ErrExposed):
				t.Errorf("%s %s: %v, want ErrExposed", tc.addr, c.what, err)
			}
		}
	}
}

// errMalformed marks the cases of TestCheckListenAddress that must fail to
// parse.
var errMalformed = errors.New("malformed")

func TestServeExposedWithAuthenticatorWarns(t *testing.T) {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{"t": bindsec.NewPrincipal("s")})
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	startText(t, cat, context.Background(), "hello", "hi")
	sink := newLogSink()
	// Per route: this test is about the warning; the credential every
	// request needs beyond loopback by default is TestCredentialPolicy's.
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: slog.New(sink), RequireCredential: mcpserve.CredentialPerRoute})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// Tests listen on loopback only: the listener is a loopback one that
	// reports the wildcard address, which is all Serve judges exposure by.
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lo.Addr().(*net.TCPAddr).Port
	ln := wildcardListener{lo}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	c := connectURL(t, "http://127.0.0.1:"+itoa(port)+"/mcp")
	if res, err := call(t, c, "hello"); err != nil || text(t, res) != "hi" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	if !sink.has(slog.LevelWarn, "non-loopback") {
		t.Error("no warning logged for a non-loopback address")
	}
	_ = c.Close()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
}

// A shutdown lets an in-flight call finish and deliver its result, then
// closes the sessions, which ends the standalone SSE streams, so that it
// completes without forcing connections closed; Serve returns nil.
func TestServeShutsDownGracefully(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	sink := newLogSink("shutting down")
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: slog.New(sink), ShutdownTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/mcp"

	// A listens on its standalone SSE stream; B, without one, calls. (A
	// client fails its whole session when its standalone stream ends, and
	// may see that before a response that arrived just earlier, so the call
	// goes through a client that has no such stream.)
	notified := make(chan struct{}, 4)
	connectURL(t, url, func(context.Context, *mcp.ToolListChangedRequest) { notified <- struct{}{} })
	b := connectNoSSE(t, url)

	entered, release := make(chan struct{}, 1), make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			<-release
			return catalog.TextResult("finished"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	// The notification travels on A's standalone SSE stream: it is open.
	wait(t, notified, "list_changed on the standalone stream")

	result := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := call(t, b, "slow")
		if err != nil {
			t.Errorf("in-flight call failed during shutdown: %v", err)
		}
		result <- res
	}()
	wait(t, entered, "the call to reach the body")
	cancel()
	wait(t, sink.watch["shutting down"], "the shutdown to begin")
	close(release)
	if res := <-result; res == nil || text(t, res) != "finished" {
		t.Errorf("in-flight call = %+v", res)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if sink.has(slog.LevelWarn, "graceful shutdown incomplete") {
		t.Error("the shutdown had to force connections closed")
	}
}

func connectNoSSE(t *testing.T, url string) *client {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &client{ClientSession: cs}
}

func TestServeTransportEndsWithContext(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	startText(t, cat, context.Background(), "hello", "hi")
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeTransport(ctx, st) }()
	cl := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "hello"})
	if err != nil || text(t, res) != "hi" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("ServeTransport after cancel = %v, want nil", err)
	}
	_ = cs.Close()
}

// connectURL connects a client to url, with an optional tools/list_changed
// handler.
func connectURL(t *testing.T, url string, onTools ...func(context.Context, *mcp.ToolListChangedRequest)) *client {
	t.Helper()
	o := &mcp.ClientOptions{Logger: quietLogger()}
	if len(onTools) > 0 {
		o.ToolListChangedHandler = onTools[0]
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, o)
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &client{ClientSession: cs}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A connection that never sent a request (a forwarding peer's spare
// keep-alive connection, say) does not hold a graceful shutdown: net/http
// counts such a connection as active for its first 5 s, and a Shutdown
// alone waits for it that long, whatever the grace. Serve closes it once
// every request has ended. The 4 s bound below is the only clock in the
// test: the fixed shutdown returns in milliseconds, the broken one after 5 s.
func TestServeShutdownClosesSilentConnections(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), ShutdownTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A served request first, so that Serve is certainly accepting.
	connectNoSSE(t, "http://"+ln.Addr().String()+"/mcp")

	began := time.Now()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if d := time.Since(began); d >= 4*time.Second {
		t.Fatalf("the shutdown took %v: it waited for a connection that never sent a request", d)
	}
}
