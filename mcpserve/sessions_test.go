package mcpserve_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawPost posts body to url with the headers given (each value is one
// header line) and returns the status code and the session ID answered.
func rawPost(t testing.TB, url, body string, headers map[string][]string) (int, string) {
	t.Helper()
	resp := rawPostResponse(t, url, body, headers)
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// rawPostResponse is the request rawPost and rawPostBody send; the caller
// closes the body.
func rawPostResponse(t testing.TB, url, body string, headers map[string][]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawDelete ends session id, presenting authorization (if any).
func rawDelete(t *testing.T, url, id, authorization string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", id)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// ---- item: more than one Authorization header ---------------------------

// A proxy in front may judge one header and the catalog the other: a
// request with two is refused before anything reads either.
func TestTwoAuthorizationHeadersRefused(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{})
	code, _ := rawPost(t, f.http.URL, initializeBody, map[string][]string{"Authorization": {"Bearer " + goodToken, "Bearer " + noRoleToken}})
	if code != http.StatusBadRequest {
		t.Errorf("two Authorization headers: status %d, want 400", code)
	}
	code, _ = rawPost(t, f.http.URL, initializeBody, map[string][]string{"Authorization": {"Bearer " + goodToken}})
	if code != http.StatusOK {
		t.Errorf("one Authorization header: status %d, want 200", code)
	}
}

// ---- item: sessions bound to their creator ------------------------------

// With an authenticator, a session belongs to the principal that created
// it: nobody else can use it or end it, with another token or none.
func TestSessionBoundToCreator(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{})
	alice := f.connect(streamable, goodToken)
	id := alice.ID()

	for name, authz := range map[string]string{"no credential": "", "another principal": "Bearer " + noRoleToken, "an unknown token": "Bearer wrong-token"} {
		if code := rawDelete(t, f.http.URL, id, authz); code != http.StatusForbidden {
			t.Errorf("DELETE with %s: status %d, want 403", name, code)
		}
		code, _ := rawPost(t, f.http.URL, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`,
			map[string][]string{"Mcp-Session-Id": {id}, "Authorization": nonEmpty(authz)})
		if code != http.StatusForbidden {
			t.Errorf("POST with %s: status %d, want 403", name, code)
		}
	}
	res, err := call(t, alice, "guarded")
	if err != nil || res.IsError {
		t.Fatalf("the owner's session stopped working: %+v, %v", res, err)
	}
	if code := rawDelete(t, f.http.URL, "no-such-session", "Bearer "+goodToken); code != http.StatusNotFound {
		t.Errorf("DELETE of an unknown session: status %d, want 404", code)
	}
	if code := rawDelete(t, f.http.URL, id, "Bearer "+goodToken); code != http.StatusNoContent {
		t.Errorf("the owner's DELETE: status %d, want 204", code)
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// recorder keeps every record, attributes included, as text; loggers
// derived with With share its lines.
type recorder struct {
	lines *recLines
	attrs []slog.Attr
}

type recLines struct {
	mu    sync.Mutex
	lines []string
}

func newRecorder() *recorder { return &recorder{lines: &recLines{}} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{lines: r.lines, attrs: append(append([]slog.Attr{}, r.attrs...), as...)}
}
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
	for _, a := range r.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	r.lines.mu.Lock()
	r.lines.lines = append(r.lines.lines, b.String())
	r.lines.mu.Unlock()
	return nil
}

// The SDK logs session IDs at INFO; the server's logger never sees one.
func TestSessionIDsStayOutOfLogs(t *testing.T) {
	rec := newRecorder()
	cat := newCatalog(t, catalog.Config{})
	startText(t, cat, context.Background(), "hello", "hi")
	f := newFixture(t, cat, mcpserve.Options{Logger: slog.New(rec)})
	c := f.connect(streamable, "")
	if _, err := call(t, c, "hello"); err != nil {
		t.Fatal(err)
	}
	id := c.ID()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = f.srv.Close()
	rec.lines.mu.Lock()
	defer rec.lines.mu.Unlock()
	if len(rec.lines.lines) == 0 {
		t.Fatal("nothing was logged: the test proves nothing")
	}
	for _, l := range rec.lines.lines {
		if strings.Contains(l, id) {
			t.Errorf("a log line holds the session ID: %s", l)
		}
	}
}

// A stateless handler has no sessions to bind: calls with a credential
// work as before.
func TestStatelessWithAuthenticatorServes(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{Stateless: true})
	cl := mcp.NewClient(&mcp.Implementation{Name: "stateless", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
		Endpoint: f.http.URL, HTTPClient: bearerClient(goodToken), MaxRetries: -1, DisableStandaloneSSE: true,
	}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := call(t, &client{ClientSession: cs}, "guarded")
	if err != nil || res.IsError || text(t, res) != "hello alice" {
		t.Fatalf("stateless call = %+v, %v", res, err)
	}
}
