package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

const legacyVersion = "2025-11-25"

// newStateless is a fixture whose server runs stateless.
func newStateless(t testing.TB, cat *catalog.Catalog, opts mcpserve.Options) *fixture {
	t.Helper()
	opts.Stateless = true
	return newFixture(t, cat, opts)
}

// connectAt connects an SDK client over streamable HTTP asking for version
// ("" for the newest the SDK speaks, which it asks for first), presenting
// token as a bearer token. A client that negotiated ProtocolStateless is
// returned once the server acknowledged its subscriptions/listen.
func (f *fixture) connectAt(version, token string) *client {
	f.t.Helper()
	return f.connectWith(version, bearerClient(token))
}

func (f *fixture) connectWith(version string, hc *http.Client) *client {
	f.t.Helper()
	c := &client{tools: make(chan struct{}, 4096), resources: make(chan struct{}, 4096)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		Logger:                     quietLogger(),
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { c.tools <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.resources <- struct{}{} },
	})
	var o *mcp.ClientSessionOptions
	if version != "" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := cl.Connect(ctxGuard(f.t), &mcp.StreamableClientTransport{
		Endpoint: f.http.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true,
	}, o)
	if err != nil {
		f.t.Fatalf("connect at %q: %v", version, err)
	}
	f.t.Cleanup(func() { _ = cs.Close() })
	c.ClientSession = cs
	if cs.InitializeResult().ProtocolVersion == mcpserve.ProtocolStateless {
		wait(f.t, f.acks, "subscriptions/listen acknowledged")
	}
	return c
}

// connectCurrent connects a client of the current revision and fails the
// test if the server did not let it speak that revision.
func (f *fixture) connectCurrent(token string) *client {
	f.t.Helper()
	c := f.connectAt("", token)
	if v := c.InitializeResult().ProtocolVersion; v != mcpserve.ProtocolStateless {
		f.t.Fatalf("the SDK client negotiated %q, want %q", v, mcpserve.ProtocolStateless)
	}
	return c
}

// post sends one JSON-RPC request of the current revision over plain HTTP,
// as curl would, and returns the HTTP response; the caller closes its body.
func post(t testing.TB, url, token, method, name string, params map[string]any) *http.Response {
	t.Helper()
	resp, err := postCtx(ctxGuard(t), url, token, method, name, params)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// postCtx is post under ctx, for a goroutine of a test: it returns the
// error instead of failing the test.
func postCtx(ctx context.Context, url, token, method, name string, params map[string]any) (*http.Response, error) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return http.DefaultClient.Do(req)
}

// rpcMessage is a JSON-RPC message as the server sends it.
type rpcMessage struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// messages reads the JSON-RPC messages of a response, a JSON body or a
// server-sent event stream, until the body ends.
func messages(t testing.TB, resp *http.Response) []rpcMessage {
	t.Helper()
	defer resp.Body.Close()
	var out []rpcMessage
	add := func(data string) {
		var m rpcMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("undecodable message %q: %v", data, err)
		}
		out = append(out, m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	for sc.Scan() {
		line := sc.Text()
		if !sse {
			if strings.TrimSpace(line) != "" {
				add(line)
			}
			continue
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			add(data)
		}
	}
	return out
}

// The current revision's handshake, as the README runs it with curl:
// server/discover, then tools/list with the version in _meta and the
// header. Stateful or stateless, a server speaks it, and the SDK's client
// negotiates it; a stateful one also keeps a session for a client that
// asks for 2025-11-25.
func TestStatelessDiscover(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	startText(t, cat, context.Background(), "hello", "hi")
	for _, stateless := range []bool{false, true} {
		f := newFixture(t, cat, mcpserve.Options{Stateless: stateless, Name: "reg"})
		msgs := messages(t, post(t, f.http.URL, "", "server/discover", "", nil))
		if len(msgs) != 1 {
			t.Fatalf("stateless=%v: discover answered %d messages", stateless, len(msgs))
		}
		var disc struct {
			SupportedVersions []string                      `json:"supportedVersions"`
			Capabilities      mcp.ServerCapabilities        `json:"capabilities"`
			Meta              map[string]mcp.Implementation `json:"_meta"`
		}
		if msgs[0].Error != nil || json.Unmarshal(msgs[0].Result, &disc) != nil {
			t.Fatalf("stateless=%v: discover = %+v", stateless, msgs[0])
		}
		if !slices.Contains(disc.SupportedVersions, mcpserve.ProtocolStateless) {
			t.Errorf("stateless=%v: supportedVersions = %v", stateless, disc.SupportedVersions)
		}
		if !stateless {
			c := f.connectAt(legacyVersion, "")
			if v := c.InitializeResult().ProtocolVersion; v != legacyVersion || c.ID() == "" {
				t.Fatalf("against a stateful server a client asking %q negotiated %q, session %q", legacyVersion, v, c.ID())
			}
		}
		if !slices.Contains(disc.SupportedVersions, legacyVersion) {
			t.Errorf("supportedVersions = %v, want the legacy ones too", disc.SupportedVersions)
		}
		if c := disc.Capabilities; c.Tools == nil || !c.Tools.ListChanged || c.Resources == nil || !c.Resources.ListChanged {
			t.Errorf("capabilities = %+v, want tools and resources with listChanged", c)
		}
		if info := disc.Meta["io.modelcontextprotocol/serverInfo"]; info.Name != "reg" {
			t.Errorf("serverInfo = %+v", info)
		}
		msgs = messages(t, post(t, f.http.URL, "", "tools/list", "", nil))
		var list mcp.ListToolsResult
		if len(msgs) != 1 || json.Unmarshal(msgs[0].Result, &list) != nil || len(list.Tools) != 1 || list.Tools[0].Name != "hello" {
			t.Fatalf("tools/list = %+v", msgs)
		}
		f.connectCurrent("")
	}
}

// Tools and resources answer a client of the current revision and one of
// 2025-11-25 alike, with the same error mapping as a stateful server.
func TestStatelessListAndCall(t *testing.T) {
	g := newGuarded(t)
	startText(t, g.cat, context.Background(), "hello", "hi")
	k, err := g.cat.StartTool(context.Background(), catalog.Tool{Name: "broken"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			return catalog.Result{}, errors.New("out of order")
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	f := newStateless(t, g.cat, mcpserve.Options{})
	for _, version := range []string{mcpserve.ProtocolStateless, legacyVersion} {
		for _, token := range []string{"", goodToken} {
			c := f.connectAt(version, token)
			if v := c.InitializeResult().ProtocolVersion; v != version {
				t.Fatalf("negotiated %q, want %q", v, version)
			}
			if names := toolNames(t, c); !slices.Equal(slices.Sorted(slices.Values(names)), []string{"broken", "guarded", "hello"}) {
				t.Errorf("%s: tools/list = %v", version, names)
			}
			calls := []struct {
				tool    string
				code    int64  // JSON-RPC error code, or 0
				isError bool   // a tool error result
				text    string // the result's text contains it
			}{
				{"hello", 0, false, "hi"},
				{"nosuch", jsonrpc.CodeInvalidParams, false, ""},
				{"broken", 0, true, "out of order"},
				{"guarded", 0, token == "", map[bool]string{true: "bearer credential is required", false: "hello alice"}[token == ""]},
			}
			for _, tc := range calls {
				res, err := call(t, c, tc.tool)
				if tc.code != 0 {
					if rpcCode(err) != tc.code {
						t.Errorf("%s token=%q %s: err = %v, want code %d", version, token, tc.tool, err, tc.code)
					}
					continue
				}
				if err != nil || res.IsError != tc.isError || !strings.Contains(text(t, res), tc.text) {
					t.Errorf("%s token=%q %s = %+v, %v; want isError=%v and %q", version, token, tc.tool, res, err, tc.isError, tc.text)
				}
			}
			rr, err := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
			switch {
			case token == "" && rpcCode(err) != mcpserve.CodeDenied:
				t.Errorf("%s: anonymous read = %v, want CodeDenied", version, err)
			case token != "" && (err != nil || rr.Contents[0].Text != "classified"):
				t.Errorf("%s: read = %+v, %v", version, rr, err)
			}
			if _, err := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "nosuch://x"}); rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("%s: unknown resource = %v, want -32602", version, err)
			}
		}
	}
}

// The credential is the bearer token of each request, also of requests
// that share a client: nothing binds it to the first one.
func TestStatelessCredentialPerRequest(t *testing.T) {
	g := newGuarded(t)
	f := newStateless(t, g.cat, mcpserve.Options{})
	var token atomic.Value
	token.Store(goodToken)
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		if tok := token.Load().(string); tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	c := f.connectWith("", hc)
	for _, step := range []struct{ token, want string }{
		{goodToken, "hello alice"},
		{"", "bearer credential is required"},
		{noRoleToken, "role"},
		{goodToken, "hello alice"},
	} {
		token.Store(step.token)
		res, err := call(t, c, "guarded")
		if err != nil || !strings.Contains(text(t, res), step.want) {
			t.Errorf("token %q: %+v, %v; want %q", step.token, res, err, step.want)
		}
	}
}

// Where the policy asks every request for a credential, server/discover and
// subscriptions/listen are refused without one, like any other request.
func TestStatelessCredentialAlways(t *testing.T) {
	g := newGuarded(t)
	f := newStateless(t, g.cat, mcpserve.Options{RequireCredential: mcpserve.CredentialAlways})
	for _, method := range []string{"server/discover", "subscriptions/listen", "tools/list"} {
		resp := post(t, f.http.URL, "", method, "", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: HTTP %d, want 401", method, resp.StatusCode)
		}
	}
	if got := f.srv.Stats().ListenStreams.Opened; got != 0 {
		t.Errorf("%d listen streams opened without a credential", got)
	}
	f.connectCurrent(goodToken)
}

func TestStatelessOptions(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	cases := []struct {
		name      string
		opts      mcpserve.Options
		ok        bool
		stateless bool
	}{
		{"default", mcpserve.Options{}, true, false},
		{"Stateless", mcpserve.Options{Stateless: true}, true, true},
		{"session limits off", mcpserve.Options{Stateless: true, SessionTimeout: -1, MaxSessions: -1}, true, true},
		{"SessionTimeout", mcpserve.Options{Stateless: true, SessionTimeout: time.Minute}, false, true},
		{"MaxSessions", mcpserve.Options{Stateless: true, MaxSessions: 10}, false, true},
		{"EventStore", mcpserve.Options{Stateless: true, EventStore: mcp.NewMemoryEventStore(nil)}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = quietLogger()
			srv, err := mcpserve.New(cat, tc.opts)
			if !tc.ok {
				if !errors.Is(err, mcpserve.ErrInvalidOptions) {
					t.Fatalf("New = %v, want ErrInvalidOptions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if mcpserve.StatelessOf(srv) != tc.stateless {
				t.Errorf("stateless = %v, want %v", mcpserve.StatelessOf(srv), tc.stateless)
			}
			if tc.stateless && mcpserve.SessionTimeoutOf(srv) != 0 {
				t.Errorf("a stateless server gave the SDK a session timeout of %v", mcpserve.SessionTimeoutOf(srv))
			}
		})
	}
}

// Without sessions every request is a session of the SDK's, which logs
// each one's lifecycle at INFO: those lines are demoted to DEBUG, so that
// an INFO log is not three lines per request.
// An older client's call in flight when the tools change has no stream for
// the SDK's list_changed: that is stateless serving, not a fault, so it is
// no WARN.

// A route at its concurrency limit answers a client of the current revision
// with CodeOverloaded and its data, as it answers a session.
func TestStatelessOverloaded(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release, entered := make(chan struct{}), make(chan struct{}, 8)
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			<-release
			return catalog.TextResult("done"), nil
		}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	c := newStateless(t, cat, mcpserve.Options{}).connectCurrent("")
	first := make(chan error, 1)
	go func() { _, err := call(t, c, "slow"); first <- err }()
	wait(t, entered, "the first call to occupy the slot")
	const more = 3 // one waits, two are refused
	results := make(chan error, more)
	for range more {
		go func() { _, err := call(t, c, "slow"); results <- err }()
	}
	for range more - 1 {
		err := <-results
		if d := rpcData(err); rpcCode(err) != mcpserve.CodeOverloaded || d["reason"] != "overloaded" || d["retryable"] != true {
			t.Fatalf("err = %v (data %v), want CodeOverloaded", err, d)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the first call: %v", err)
	}
	if err := <-results; err != nil {
		t.Errorf("the waiting call: %v", err)
	}
}
