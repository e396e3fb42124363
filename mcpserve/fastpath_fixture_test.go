package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// twoPaths is one catalog served twice: by a Server with its fast path
// and by one without, so that a test can send both the same request and
// compare what they answer. Stateful, each has a session of its own, made
// with the same requests, whose ID each request carries.
type twoPaths struct {
	t         testing.TB
	cat       *catalog.Catalog
	fast, sdk *httptest.Server
	fastSrv   *mcpserve.Server
	sessions  map[string]string // by server URL
	// busyIn and busyOut hold the one call "busy" admits: a request sent
	// while it is held finds the tool overloaded.
	busyIn, busyOut chan struct{}
	holdBusy        atomic.Bool // "busy" holds its call only while set
	// routedRuns counts the calls of "routed", whose region argument
	// travels in an Mcp-Param-Region header too.
	routedRuns atomic.Int64

	mu    sync.Mutex
	taken map[string]int // requests the fast path served, by method
}

const diffMaxResult = 4 << 10

// pathsMode is how twoPaths serves: stateless, or with sessions whose
// setup is the messages given (after initialize).
type pathsMode struct {
	name     string
	stateful bool
	setup    []string // messages each session sends after its initialize
	caps     string   // the client's capabilities in initialize
}

var (
	statelessMode = pathsMode{name: "stateless"}
	sessionMode   = pathsMode{name: "session", stateful: true, caps: `{}`,
		setup: []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`}}
	leveledMode = pathsMode{name: "session at warning", stateful: true, caps: `{}`,
		setup: []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"warning"}}`}}
)

func newTwoPaths(t testing.TB, modes ...pathsMode) *twoPaths {
	mode := statelessMode
	if len(modes) > 0 {
		mode = modes[0]
	}
	t.Helper()
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		goodToken:   bindsec.NewPrincipal("alice", "reader"),
		noRoleToken: bindsec.NewPrincipal("bob"),
	})
	p := &twoPaths{t: t, cat: newCatalog(t, catalog.Config{Authenticator: auth}), sessions: map[string]string{},
		busyIn: make(chan struct{}), busyOut: make(chan struct{}), taken: map[string]int{}}
	p.startAll()
	restore := mcpserve.SetFastHook(func(method string) {
		p.mu.Lock()
		p.taken[method]++
		p.mu.Unlock()
	})
	t.Cleanup(restore)
	serve := func(fast bool) *httptest.Server {
		srv, err := mcpserve.New(p.cat, mcpserve.Options{Stateless: !mode.stateful, Logger: quietLogger(), MaxResultBytes: diffMaxResult, PageSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		if fast {
			p.fastSrv = srv
		} else {
			mcpserve.NoFastPath(srv)
		}
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { ts.Close(); _ = srv.Close() })
		return ts
	}
	p.fast, p.sdk = serve(true), serve(false)
	if mode.stateful {
		for _, ts := range []*httptest.Server{p.fast, p.sdk} {
			p.sessions[ts.URL] = p.openSession(ts.URL, mode)
		}
		// The SDK answers notifications/initialized before it handles
		// it: the fast path takes the session a moment later.
		if len(mode.setup) > 0 && mode.caps == `{}` {
			id, guard := p.sessions[p.fast.URL], ctxGuard(t)
			for !mcpserve.OnFastPath(p.fastSrv, id) {
				select {
				case <-guard.Done():
					t.Fatal("the session never reached the fast path")
				case <-time.After(time.Millisecond):
				}
			}
		}
	}
	return p
}

// openSession initializes a session of mode at url and returns its ID.
func (p *twoPaths) openSession(url string, mode pathsMode) string {
	p.t.Helper()
	init := exchange{body: []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` +
		mode.caps + `,"clientInfo":{"name":"diff","version":"1"}}}`)}
	req, err := http.NewRequestWithContext(ctxGuard(p.t), http.MethodPost, url, bytes.NewReader(init.body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		p.t.Fatalf("initialize at %s: HTTP %d, no session", url, resp.StatusCode)
	}
	for _, m := range mode.setup {
		p.sessions[url] = id
		if a := p.send(p.t, url, exchange{body: []byte(m), headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}}); a.status/100 != 2 {
			p.t.Fatalf("%s at %s: %+v", m, url, a)
		}
	}
	return id
}

// takenCount is how many requests of method the fast path has served.
func (p *twoPaths) takenCount(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.taken[method]
}

func (p *twoPaths) tool(name string, tool catalog.Tool, plan bindsec.Plan, h catalog.ToolHandler, opts ...catalog.StartOption) {
	p.t.Helper()
	tool.Name = name
	k, err := p.cat.StartTool(context.Background(), tool, plan, h, opts...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = k.Stop(context.Background()) })
}

var public = bindsec.Plan{Public: true}

// startAll starts the routes of the comparison: a tool, resource and
// prompt for every kind of answer each method has.
func (p *twoPaths) startAll() {
	ctx := context.Background()
	text := func(s string) catalog.ToolHandler {
		return func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult(s), nil }
	}
	p.tool("echo", catalog.Tool{Description: "echoes", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}, public,
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult(string(c.Arguments)), nil
		})
	p.tool("routed", catalog.Tool{InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}, public,
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			p.routedRuns.Add(1)
			return catalog.TextResult(string(c.Arguments)), nil
		})
	p.tool("structured", catalog.Tool{OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}, public,
		func(context.Context, catalog.Call) (catalog.Result, error) {
			return catalog.Result{Content: []catalog.Content{{Type: catalog.TypeText, Text: `{"n":1}`}}, StructuredContent: map[string]any{"n": 1}}, nil
		})
	p.tool("unstructured", catalog.Tool{OutputSchema: json.RawMessage(`{"type":"object","required":["n"]}`)}, public, text("no structure"))
	p.tool("contents", catalog.Tool{}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{Content: []catalog.Content{
			{Type: catalog.TypeText, Text: "<b>&</b> \u2028"},
			{Type: catalog.TypeImage, MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			{Type: catalog.TypeAudio, MIMEType: "audio/wav", Data: []byte("RIFF")},
			{Type: catalog.TypeResource, Resource: &catalog.Contents{URI: "test://r/text", MIMEType: "text/plain", Text: "t"}},
			{Type: catalog.TypeResource, Resource: &catalog.Contents{URI: "test://r/blob", Blob: []byte{0, 1, 2}}},
		}}, nil
	})
	p.tool("fails", catalog.Tool{}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{}, errors.New("the body failed")
	})
	p.tool("toolerror", catalog.Tool{}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.ErrorResult("a tool error"), nil
	})
	p.tool("guarded", catalog.Tool{}, bindsec.Plan{Roles: []string{"reader"}}, text("guarded"))
	p.tool("big", catalog.Tool{}, public, text(strings.Repeat("x", 2*diffMaxResult)))
	p.tool("talks", catalog.Tool{}, public, func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelError} {
			if err := c.Log(ctx, l, map[string]any{"level": l.String()}); err != nil {
				return catalog.Result{}, err
			}
		}
		if err := c.ReportProgress(ctx, catalog.Progress{Progress: 1, Total: 2, Message: "half"}); err != nil {
			return catalog.Result{}, err
		}
		_, err := c.Sample(ctx, catalog.SampleRequest{MaxTokens: 1})
		return catalog.TextResult("talked: " + err.Error()), nil
	})
	p.tool("busy", catalog.Tool{}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		if p.holdBusy.Load() {
			p.busyIn <- struct{}{}
			<-p.busyOut
		}
		return catalog.TextResult("done"), nil
	}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(0))
	k, err := p.cat.StartTool(ctx, catalog.Tool{Name: "stopped"}, public, text("stopped"))
	p.check(k, err)
	if err := k.Stop(ctx); err != nil {
		p.t.Fatal(err)
	}
	k, err = p.cat.StartResource(ctx, catalog.Resource{URI: "test://fixed", Name: "fixed", MIMEType: "text/plain"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: "fixed", CacheTTL: 30 * time.Second, CachePublic: true}, nil
		})
	p.check(k, err)
	k, err = p.cat.StartResource(ctx, catalog.Resource{URI: "test://blob", Name: "blob"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Blob: []byte{1, 2, 3}, CacheTTL: 2 * time.Second}, nil
		})
	p.check(k, err)
	k, err = p.cat.StartResource(ctx, catalog.Resource{URI: "test://secret", Name: "secret"}, bindsec.Plan{Roles: []string{"reader"}},
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: "secret"}, nil
		})
	p.check(k, err)
	k, err = p.cat.StartResource(ctx, catalog.Resource{URI: "test://broken", Name: "broken"}, public,
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{}, errors.New("unreadable")
		})
	p.check(k, err)
	k, err = p.cat.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"}, public,
		func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: r.Vars["id"]}, nil
		})
	p.check(k, err)
	k, err = p.cat.StartPrompt(ctx, catalog.Prompt{Name: "greet", Arguments: []catalog.PromptArgument{{Name: "who", Required: true}}}, public,
		func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			return catalog.PromptResult{Description: "a greeting", Messages: []catalog.PromptMessage{
				{Role: "user", Content: catalog.Content{Type: catalog.TypeText, Text: "hello " + g.Arguments["who"]}},
			}}, nil
		})
	p.check(k, err)
	k, err = p.cat.StartPrompt(ctx, catalog.Prompt{Name: "sulks"}, public,
		func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
			return catalog.PromptResult{}, errors.New("no prompt today")
		})
	p.check(k, err)
}

func (p *twoPaths) check(k *catalog.Consumer, err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = k.Stop(context.Background()) })
}

// exchange is one request as both paths get it.
type exchange struct {
	body    []byte
	headers map[string]string
	repeat  [][2]string // headers added after headers, as a second value
}

// answer is a response reduced to what a client reads of it: the
// status, and the JSON-RPC messages decoded (a plain-text refusal is one
// string).
type answer struct {
	status   int
	messages []any
}

func (p *twoPaths) send(t testing.TB, url string, ex exchange) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, bytes.NewReader(ex.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id := p.sessions[url]; id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	for k, v := range ex.headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	for _, kv := range ex.repeat {
		req.Header.Add(kv[0], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				a.messages = append(a.messages, decodeAny(t, []byte(data)))
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		a.messages = append(a.messages, decodeAny(t, body))
	case len(body) == 0:
	default:
		a.messages = append(a.messages, ct+": "+string(body))
	}
	return a
}

func decodeAny(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("undecodable message %q: %v", data, err)
	}
	return v
}
