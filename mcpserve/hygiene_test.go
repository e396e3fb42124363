package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// rawAnswer is an HTTP answer to a raw POST.
type rawAnswer struct {
	status int
	ctype  string
	header http.Header
	body   []byte
}

// rpcError returns the JSON-RPC error of a reply, a JSON body or the
// first SSE event, or nil.
func (r rawAnswer) rpcError(t testing.TB) *rpcMessage {
	t.Helper()
	data := r.body
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		for _, line := range strings.Split(string(r.body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = []byte(d)
				break
			}
		}
	}
	var m rpcMessage
	if json.Unmarshal(data, &m) != nil || m.Error == nil {
		return nil
	}
	return &m
}

// rawPost posts body as it is, on session sid if not empty, with the
// protocol version header if version is not empty, and extra headers.
func postRaw(t testing.TB, url, sid, version string, body []byte, extra ...string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), header: resp.Header, body: b}
}

// rawSession opens a session at version over raw HTTP and returns its ID.
func openRawSession(t testing.TB, url, version string) string {
	t.Helper()
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version)
	r := postRaw(t, url, "", "", []byte(init))
	if r.status != http.StatusOK {
		t.Fatalf("initialize: %s: r.status = %v, want http.StatusOK", r.body, r.status)
	}
	sid := r.header.Get("Mcp-Session-Id")
	if len(sid) == 0 {
		t.Fatalf("sid is empty")
	}
	hv := version
	if version < "2025-06-18" {
		hv = "" // the header came with 2025-06-18
	}
	r = postRaw(t, url, sid, hv, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if r.status >= 300 {
		t.Fatalf("initialized: %s: r.status = %v, want < %v", r.body, r.status, 300)
	}
	return sid
}

func req(id, method string, params any) string {
	p, _ := json.Marshal(params)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, p)
}

// hygieneFixture serves a catalog holding a template test://t/{id}/data
// and a tool "echo".
func hygieneFixture(t testing.TB, opts mcpserve.Options) *fixture {
	t.Helper()
	cat := newCatalog(t, catalog.Config{})
	ctx := context.Background()
	k, err := cat.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://t/{id}/data", Name: "t"},
		bindsec.Plan{Public: true}, func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: r.Vars["id"] + " " + r.RawVars["id"]}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(ctx) })
	startText(t, cat, ctx, "echo", "hi")
	return newFixture(t, cat, opts)
}

// TestHTTPBatchesRefused: a JSON array body is refused, 400 with -32600,
// on every session that negotiated 2025-06-18 or later, without one, and
// stateless; a session of 2025-03-26 still gets its batch served.
func TestHTTPBatchesRefused(t *testing.T) {
	batch := []byte("[" + req("1", "tools/list", map[string]any{}) + "," + req("2", "tools/list", map[string]any{}) + "]")
	tests := []struct {
		name      string
		stateless bool
		session   string // the version the session negotiates; "" for none
		header    string
		refused   bool
	}{
		{"session of 2025-11-25, no header", false, "2025-11-25", "", true},
		{"session of 2025-11-25, its header", false, "2025-11-25", "2025-11-25", true},
		{"session of 2025-06-18", false, "2025-06-18", "", true},
		{"no session", false, "", "", true},
		{"stateless", true, "", "", true},
		{"session of 2025-03-26", false, "2025-03-26", "", false},
		{"session of 2025-03-26, a newer header", false, "2025-03-26", "2025-06-18", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := hygieneFixture(t, mcpserve.Options{Stateless: tt.stateless})
			sid := ""
			if tt.session != "" {
				sid = openRawSession(t, f.http.URL, tt.session)
			}
			r := postRaw(t, f.http.URL, sid, tt.header, batch)
			if !tt.refused {
				if r.status != http.StatusOK {
					t.Errorf("%s: r.status = %v, want http.StatusOK", r.body, r.status)
				}
				if got := string(r.body); !strings.Contains(got, `"tools"`) {
					t.Errorf("string(r.body) = %q, want it to contain %q", got, `"tools"`)
				}
				return
			}
			if r.status != http.StatusBadRequest {
				t.Fatalf("%s: r.status = %v, want http.StatusBadRequest", r.body, r.status)
			}
			e := r.rpcError(t)
			if e == nil {
				t.Fatalf("%s: e is nil", r.body)
			}
			if e.Error.Code != int64(-32600) {
				t.Errorf("e.Error.Code = %v, want %v", e.Error.Code, int64(-32600))
			}
			if !strings.Contains(e.Error.Message, "batches are not supported") {
				t.Errorf("e.Error.Message = %q, want it to contain %q", e.Error.Message, "batches are not supported")
			}
		})
	}
}

// TestHTTPIDsThatDoNotRoundTrip: an id beyond ±(2^53-1), not an integer,
// null, or neither a number nor a string, is refused with -32600; one
// that survives a round trip comes back as it was sent.
func TestHTTPIDsThatDoNotRoundTrip(t *testing.T) {
	tests := []struct {
		id      string
		refused bool
	}{
		{`1`, false},
		{`-5`, false},
		{`9007199254740991`, false},
		{`-9007199254740991`, false},
		{`"abc"`, false},
		{`9007199254740992`, true},
		{`-9223372036854775809`, true},
		{`-9223372036854775808`, true},
		{`1.5`, true},
		{`1e3`, true},
		{`1.0`, true},
		{`null`, true},
		{`true`, true},
		{`{"a":1}`, true},
		{`[1]`, true},
		{`"` + strings.Repeat("i", mcpserve.MaxIDBytes+1) + `"`, true},
	}
	for _, stateless := range []bool{false, true} {
		f := hygieneFixture(t, mcpserve.Options{Stateless: stateless})
		sid, version := "", mcpserve.ProtocolStateless
		if !stateless {
			sid, version = openRawSession(t, f.http.URL, "2025-11-25"), "2025-11-25"
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("stateless=%v/%.20s", stateless, tt.id), func(t *testing.T) {
				params := map[string]any{}
				if stateless {
					params["_meta"] = map[string]any{
						"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
						"io.modelcontextprotocol/clientCapabilities": map[string]any{},
					}
				}
				r := postRaw(t, f.http.URL, sid, version, []byte(req(tt.id, "tools/list", params)), "Mcp-Method", "tools/list")
				if !tt.refused {
					if r.status != http.StatusOK {
						t.Fatalf("%s: r.status = %v, want http.StatusOK", r.body, r.status)
					}
					if got := r.rpcError(t); got != nil {
						t.Errorf("r.rpcError(t) = %v, want nil", got)
					}
					if got := string(r.body); !strings.Contains(got, `"id":`+tt.id) {
						t.Errorf("string(r.body) = %q, want it to contain %q", got, `"id":`+tt.id)
					}
					return
				}
				if r.status != http.StatusBadRequest {
					t.Fatalf("%s: r.status = %v, want http.StatusBadRequest", r.body, r.status)
				}
				e := r.rpcError(t)
				if e == nil {
					t.Fatalf("%s: e is nil", r.body)
				}
				if e.Error.Code != int64(-32600) {
					t.Errorf("e.Error.Code = %v, want %v", e.Error.Code, int64(-32600))
				}
				if e.ID != nil {
					t.Errorf("id = %v, want null", e.ID)
				}
				if got := len(r.body); got >= 400 {
					t.Errorf("len(r.body) = %v, want < %v", got, 400)
				}
			})
		}
	}
}

// longRun finds a run of more than quote.Most bytes of the filler a test
// sent: an echo beyond the bound.
var longRun = regexp.MustCompile(`x{65,}`)

// bytesSaid is how a cut quote says how long it was.
var bytesSaid = regexp.MustCompile(`\(\d+ bytes\)|\d+ bytes`)

// TestEchoesBounded: whatever a client sends, an error quotes at most 64
// bytes of it and says how long it was; a 3 MB URI is refused small and
// fast in resources/read and resources/subscribe.
func TestEchoesBounded(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	mid := strings.Repeat("x", 200)
	tests := []struct {
		name    string
		method  string
		params  any
		headers []string
		code    int64
		long    bool // the input is quoted, cut, with its length
	}{
		{"3 MB URI, read", "resources/read", map[string]any{"uri": "test://t/" + huge + "/data"}, nil, -32602, true},
		{"3 MB URI, subscribe", "resources/subscribe", map[string]any{"uri": "test://t/" + huge + "/data"}, nil, -32602, true},
		{"unknown URI, read", "resources/read", map[string]any{"uri": "test://none/" + mid}, nil, 0, true},
		{"unknown URI, subscribe", "resources/subscribe", map[string]any{"uri": "test://none/" + mid}, nil, 0, true},
		{"long tool name", "tools/call", map[string]any{"name": huge[:mcpserve.MaxNameBytes+1]}, nil, -32602, true},
		{"unknown tool", "tools/call", map[string]any{"name": mid}, nil, -32602, true},
		{"long argument name", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{huge[:mcpserve.MaxKeyBytes+1]: 1}}, nil, -32602, true},
		{"3 MB ref.type", "completion/complete", map[string]any{"ref": map[string]any{"type": huge}, "argument": map[string]any{"name": "a", "value": ""}}, nil, 0, true},
		{"unknown method", mid, map[string]any{}, nil, 0, true},
		{"3 MB method", huge, map[string]any{}, nil, -32601, true},
		{"bad log level", "logging/setLevel", map[string]any{"level": mid}, nil, -32602, true},
		{"template variable with NUL", "resources/read", map[string]any{"uri": "test://t/a%00" + mid + "/data"}, nil, -32602, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := hygieneFixture(t, mcpserve.Options{})
			sid := openRawSession(t, f.http.URL, "2025-11-25")
			body := []byte(req("7", tt.method, tt.params))
			start := time.Now()
			r := postRaw(t, f.http.URL, sid, "2025-11-25", body, tt.headers...)
			took := time.Since(start)
			if got := len(r.body); got >= 1<<10 {
				t.Errorf("the answer: %.300s: len(r.body) = %v, want < %v", r.body, got, 1<<10)
			}
			if strings.Contains(tt.name, "3 MB URI") {
				// Refused before any match: the SDK's decoding of the
				// 3 MB body is all it costs.
				if took >= slowdown*500*time.Millisecond {
					t.Errorf("took = %v, want < %v", took, slowdown*500*time.Millisecond)
				}
			}
			if longRun.Match(r.body) {
				t.Errorf("an echo beyond 64 bytes: %.300s: longRun.Match(r.body) is true", r.body)
			}
			if tt.code != 0 {
				e := r.rpcError(t)
				if e == nil {
					t.Fatalf("%.300s: e is nil", r.body)
				}
				if e.Error.Code != tt.code {
					t.Errorf("%s: e.Error.Code = %v, want %v", e.Error.Message, e.Error.Code, tt.code)
				}
			}
			if tt.long {
				if !bytesSaid.Match(r.body) {
					t.Errorf("says how long the input was: %.300s: bytesSaid.Match(r.body) is false", r.body)
				}
			}
		})
	}
}

// TestStatelessNameMismatchBounded: the SDK's Mcp-Name check quotes the
// header and the body; both come back bounded.
func TestStatelessNameMismatchBounded(t *testing.T) {
	f := hygieneFixture(t, mcpserve.Options{Stateless: true})
	name := strings.Repeat("x", 3000)
	resp := post(t, f.http.URL, "", "tools/call", strings.Repeat("x", 40000), map[string]any{"name": name})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("%.300s: resp.StatusCode = %v, want http.StatusBadRequest", b, resp.StatusCode)
	}
	if got := len(b); got >= 1<<10 {
		t.Errorf("%.300s: len(b) = %v, want < %v", b, got, 1<<10)
	}
	if longRun.Match(b) {
		t.Errorf("%.300s: longRun.Match(b) is true", b)
	}
}

// TestLogLevels: logging/setLevel takes MCP's eight levels and refuses
// any other with -32602.
func TestLogLevels(t *testing.T) {
	f := hygieneFixture(t, mcpserve.Options{})
	sid := openRawSession(t, f.http.URL, "2025-11-25")
	for _, tt := range []struct {
		level string
		ok    bool
	}{{"debug", true}, {"emergency", true}, {"bogus", false}, {"", false}, {"DEBUG", false}} {
		t.Run(tt.level, func(t *testing.T) {
			r := postRaw(t, f.http.URL, sid, "2025-11-25", []byte(req("3", "logging/setLevel", map[string]any{"level": tt.level})))
			e := r.rpcError(t)
			if tt.ok {
				if e != nil {
					t.Errorf("%s: e = %v, want nil", r.body, e)
				}
				return
			}
			if e == nil {
				t.Fatalf("%s: e is nil", r.body)
			}
			if e.Error.Code != int64(-32602) {
				t.Errorf("e.Error.Code = %v, want %v", e.Error.Code, int64(-32602))
			}
			if !strings.Contains(e.Error.Message, "unknown log level") {
				t.Errorf("e.Error.Message = %q, want it to contain %q", e.Error.Message, "unknown log level")
			}
		})
	}
}

// TestTemplateVarsOverMCP: a body gets a variable decoded and raw; one
// that decodes to NUL is refused with -32602.
func TestTemplateVarsOverMCP(t *testing.T) {
	f := hygieneFixture(t, mcpserve.Options{})
	sid := openRawSession(t, f.http.URL, "2025-11-25")
	r := postRaw(t, f.http.URL, sid, "2025-11-25", []byte(req("4", "resources/read", map[string]any{"uri": "test://t/..%2F..%2Fetc%2Fpasswd/data"})))
	if got := r.rpcError(t); got != nil {
		t.Fatalf("%s: r.rpcError(t) = %v, want nil", r.body, got)
	}
	if got := string(r.body); !strings.Contains(got, `../../etc/passwd ..%2F..%2Fetc%2Fpasswd`) {
		t.Errorf("string(r.body) = %q, want it to contain %q", got, `../../etc/passwd ..%2F..%2Fetc%2Fpasswd`)
	}
	r = postRaw(t, f.http.URL, sid, "2025-11-25", []byte(req("5", "resources/read", map[string]any{"uri": "test://t/a%00b/data"})))
	e := r.rpcError(t)
	if e == nil {
		t.Fatalf("%s: e is nil", r.body)
	}
	if e.Error.Code != int64(-32602) {
		t.Errorf("e.Error.Code = %v, want %v", e.Error.Code, int64(-32602))
	}
	if !strings.Contains(e.Error.Message, "NUL") {
		t.Errorf("e.Error.Message = %q, want it to contain %q", e.Error.Message, "NUL")
	}
}

// TestEchoesBoundedInProcess: off HTTP, where no front filters, the
// middleware bounds every error a handler returns, its data included.
func TestEchoesBoundedInProcess(t *testing.T) {
	f := hygieneFixture(t, mcpserve.Options{})
	c := f.connect(memoryLegacy, "")
	mid := strings.Repeat("x", 200)
	ctx := ctxGuard(t)
	_, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://none/" + mid})
	if err == nil {
		t.Fatalf("err returned no error")
	}
	if longRun.MatchString(err.Error()) {
		t.Errorf("%s: longRun.MatchString(err.Error()) is true", err)
	}
	uri, _ := rpcData(err)["uri"].(string)
	if longRun.MatchString(uri) {
		t.Errorf("data: %s: longRun.MatchString(uri) is true", uri)
	}
	if !strings.Contains(uri, "(212 bytes)") {
		t.Errorf("uri = %q, want it to contain %q", uri, "(212 bytes)")
	}
	err = c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://none/" + mid})
	if err == nil {
		t.Fatalf("err returned no error")
	}
	if longRun.MatchString(err.Error()) {
		t.Errorf("%s: longRun.MatchString(err.Error()) is true", err)
	}
	_, err = c.GetPrompt(ctx, &mcp.GetPromptParams{Name: mid})
	if err == nil {
		t.Fatalf("err returned no error")
	}
	if longRun.MatchString(err.Error()) {
		t.Errorf("%s: longRun.MatchString(err.Error()) is true", err)
	}
}
