package mcpserve_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

const exposureToken = "exposure-token-5d1c7a"

func tokenCatalog(t *testing.T) *catalog.Catalog {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{exposureToken: bindsec.NewPrincipal("alice")})
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	startText(t, cat, context.Background(), "hello", "hi")
	return cat
}

// wildcardListener is a loopback listener that reports a wildcard address,
// so that Serve treats it as reachable beyond loopback while the test's
// connections stay on loopback.
type wildcardListener struct{ net.Listener }

func (l wildcardListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4zero, Port: l.Listener.Addr().(*net.TCPAddr).Port}
}

// serve runs srv.Serve on a loopback listener (reported as a wildcard one
// if wildcard is set) and returns the endpoint URL; the cleanup stops it.
func serve(t *testing.T, srv *mcpserve.Server, wildcard bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wildcard {
		ln = wildcardListener{ln}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return "http://" + addr + "/mcp"
}

func newServer(t *testing.T, cat *catalog.Catalog, opts mcpserve.Options) *mcpserve.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.Path == "" {
		opts.Path = "/mcp"
	}
	srv, err := mcpserve.New(cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func bearerHeader(token string) map[string][]string {
	if token == "" {
		return nil
	}
	return map[string][]string{"Authorization": {"Bearer " + token}}
}

// ---- bounded sessions --------------------------------------------

func TestSessionTimeoutDefaults(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for _, tt := range []struct {
		opts mcpserve.Options
		want time.Duration
	}{
		{mcpserve.Options{}, mcpserve.DefaultSessionTimeout},
		{mcpserve.Options{SessionTimeout: time.Minute}, time.Minute},
		{mcpserve.Options{SessionTimeout: -1}, 0},
	} {
		srv := newServer(t, cat, tt.opts)
		if got := mcpserve.SessionTimeoutOf(srv); got != tt.want {
			t.Errorf("SessionTimeout %v: the SDK got %v, want %v", tt.opts.SessionTimeout, got, tt.want)
		}
	}
}

// waitUntil polls cond until it holds, or fails the test after eventGuard:
// what it waits for (a session ended by a DELETE or its short idle
// timeout) happens within milliseconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A session nobody deletes ends once idle, and gives back its slot.
func TestIdleSessionEnds(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{SessionTimeout: 20 * time.Millisecond})
	url := serve(t, srv, false)
	code, id := rawPost(t, url, initializeBody, nil)
	if code != http.StatusOK || id == "" {
		t.Fatalf("initialize = %d, session %q", code, id)
	}
	waitUntil(t, "the idle session to end", func() bool { return srv.Stats().Sessions.Held == 0 })
	if code, _ := rawPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string][]string{"Mcp-Session-Id": {id}}); code != http.StatusNotFound {
		t.Errorf("a request on the ended session = %d, want 404", code)
	}
}

// At the cap an initialize gets 503; the live sessions still answer, and a
// slot freed by a DELETE is taken again. A request that creates no
// session takes no slot.
func TestSessionCap(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{MaxSessions: 2, ClientShare: 1})
	url := serve(t, srv, false)
	if code, _ := rawPost(t, url, `{"jsonrpc":"2.0","id":1,"method":"nonsense"}`, nil); code == http.StatusOK {
		t.Fatalf("a bad first request was accepted")
	}
	var ids []string
	for range 2 {
		code, id := rawPost(t, url, initializeBody, nil)
		if code != http.StatusOK || id == "" {
			t.Fatalf("initialize under the cap = %d", code)
		}
		ids = append(ids, id)
	}
	code, id := rawPost(t, url, initializeBody, nil)
	if code != http.StatusServiceUnavailable || id != "" {
		t.Fatalf("initialize at the cap = %d (session %q), want 503", code, id)
	}
	for _, id := range ids {
		if code, _ := rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string][]string{"Mcp-Session-Id": {id}}); code != http.StatusAccepted {
			t.Errorf("a live session at the cap answered %d, want 202", code)
		}
	}
	if st := srv.Stats().Sessions; st.Held != 2 || st.RefusedAtCap != 1 || st.Opened != 2 || st.Max != 2 {
		t.Errorf("Stats().Sessions = %+v", st)
	}
	if code := rawDelete(t, url, ids[0], ""); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("DELETE = %d", code)
	}
	waitUntil(t, "the deleted session's slot", func() bool { return srv.Stats().Sessions.Held == 1 })
	if code, _ := rawPost(t, url, initializeBody, nil); code != http.StatusOK {
		t.Errorf("initialize after a DELETE = %d, want 200", code)
	}
}

// The probe of the issue: initializes that are never deleted. The sessions
// held, and the memory they take, stay bounded by the cap.
func TestManyUndeletedSessionsBounded(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	const maxSessions = 100
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{MaxSessions: maxSessions, ClientShare: 1})
	url := serve(t, srv, false)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	work := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for range work {
				code, _ := rawPost(t, url, initializeBody, nil)
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if open := srv.Stats().Sessions.Held; open > maxSessions {
					t.Errorf("%d sessions open, cap %d", open, maxSessions)
				}
			}
		})
	}
	for range n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if codes[http.StatusOK] != maxSessions || codes[http.StatusServiceUnavailable] != n-maxSessions {
		t.Errorf("answers = %v, want %d × 200 and %d × 503", codes, maxSessions, n-maxSessions)
	}
	http.DefaultClient.CloseIdleConnections()
	// Unbounded, each session holds about 15 KB: 150 MB for 10,000.
	if grew := int64(heap()) - int64(before); grew > 40<<20 {
		t.Errorf("heap grew by %d MB for %d initializes", grew>>20, n)
	}
}

// ---- a credential on every request --------------------------------

func TestCredentialPolicy(t *testing.T) {
	cat := tokenCatalog(t)
	for _, tt := range []struct {
		name     string
		policy   mcpserve.CredentialPolicy
		wildcard bool
		token    string
		want     int
	}{
		{"auto on loopback, no token", mcpserve.CredentialAuto, false, "", http.StatusOK},
		{"auto beyond loopback, no token", mcpserve.CredentialAuto, true, "", http.StatusUnauthorized},
		{"auto beyond loopback, bad token", mcpserve.CredentialAuto, true, "not-a-token-at-all", http.StatusUnauthorized},
		{"auto beyond loopback, token", mcpserve.CredentialAuto, true, exposureToken, http.StatusOK},
		{"always on loopback, no token", mcpserve.CredentialAlways, false, "", http.StatusUnauthorized},
		{"always on loopback, token", mcpserve.CredentialAlways, false, exposureToken, http.StatusOK},
		{"per route beyond loopback, no token", mcpserve.CredentialPerRoute, true, "", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, cat, mcpserve.Options{RequireCredential: tt.policy})
			url := serve(t, srv, tt.wildcard)
			if code, _ := rawPost(t, url, initializeBody, bearerHeader(tt.token)); code != tt.want {
				t.Errorf("initialize = %d, want %d", code, tt.want)
			}
		})
	}
	// Handler, mounted by hand: CredentialAlways holds there too.
	srv := newServer(t, cat, mcpserve.Options{RequireCredential: mcpserve.CredentialAlways})
	f := wrapFixture(t, cat, srv)
	if code, _ := rawPost(t, f.http.URL, initializeBody, nil); code != http.StatusUnauthorized {
		t.Errorf("Handler without a token = %d, want 401", code)
	}
}

func TestExposureOptionsValidated(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for _, o := range []mcpserve.Options{
		{RequireCredential: 7},
		{RequireCredential: -1},
		{AllowedOrigins: []string{"not an origin"}},
		{Limits: mcpserve.Limits{MaxHeaderBytes: -2}},
	} {
		if _, err := mcpserve.New(cat, o); !errors.Is(err, mcpserve.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// ---- Origin --------------------------------------------------------

func TestCrossOriginRefused(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	url := serve(t, newServer(t, cat, mcpserve.Options{}), false)
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	for _, tt := range []struct {
		header map[string][]string
		want   int
	}{
		{nil, http.StatusOK},
		{map[string][]string{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		{map[string][]string{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{map[string][]string{"Origin": {"http://" + host}}, http.StatusOK},
	} {
		if code, _ := rawPost(t, url, initializeBody, tt.header); code != tt.want {
			t.Errorf("initialize with %v = %d, want %d", tt.header, code, tt.want)
		}
	}
	// The standalone stream's GET is checked as well.
	req, _ := http.NewRequestWithContext(ctxGuard(t), http.MethodGet, url, nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET from another origin = %d, want 403", resp.StatusCode)
	}

	allowed := serve(t, newServer(t, cat, mcpserve.Options{AllowedOrigins: []string{"https://app.example"}}), false)
	if code, _ := rawPost(t, allowed, initializeBody, map[string][]string{"Origin": {"https://app.example"}}); code != http.StatusOK {
		t.Errorf("initialize from an allowed origin = %d, want 200", code)
	}
	if code, _ := rawPost(t, allowed, initializeBody, map[string][]string{"Origin": {"http://evil.example"}}); code != http.StatusForbidden {
		t.Errorf("initialize from another origin = %d, want 403", code)
	}
}

// ---- bounded echoes -----------------------------------------------

// A 3 MB name, URI or cursor comes back cut short in the error.
func TestHugeNamesNotEchoed(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	c := f.connect(streamable, "")
	huge := strings.Repeat("n", 3<<20)
	ctx := ctxGuard(t)
	_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: huge})
	checkShort(t, "tools/call", err)
	_, err = c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "x://" + huge})
	checkShort(t, "resources/read", err)
	_, err = c.ListTools(ctx, &mcp.ListToolsParams{Cursor: huge})
	checkShort(t, "tools/list", err)
}

func checkShort(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s with a 3 MB argument succeeded", what)
	}
	if n := len(err.Error()); n > 1024 {
		t.Errorf("%s: the error is %d bytes long", what, n)
	}
}
