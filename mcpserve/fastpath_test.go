package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// The revisions the fast path serves.
var fastVersions = []string{"2025-11-25", mcpserve.ProtocolStateless}

// fastCase is one request of TestFastPathMatchesSDK.
type fastCase struct {
	name   string
	method string
	params map[string]any
	token  string
	// taken: the fast path must serve it (else either may).
	taken bool
}

func fastCases() []fastCase {
	x := strings.Repeat("x", 300)
	call := func(name string, args any) map[string]any {
		p := map[string]any{"name": name}
		if args != nil {
			p["arguments"] = args
		}
		return p
	}
	withProgress := func(p map[string]any, tok any) map[string]any {
		p["_meta"] = map[string]any{"progressToken": tok}
		return p
	}
	// A 2026-07-28 request's own log level; in a 2025 request's _meta,
	// an unknown key.
	atLevel := func(p map[string]any, level any) map[string]any {
		p["_meta"] = map[string]any{"io.modelcontextprotocol/logLevel": level}
		return p
	}
	return []fastCase{
		{"echo", "tools/call", call("echo", map[string]any{"text": "hi"}), "", true},
		{"echo without arguments", "tools/call", call("echo", nil), "", true},
		{"arguments not an object", "tools/call", call("echo", []any{1}), "", true},
		{"arguments against the schema", "tools/call", call("echo", map[string]any{"text": 5}), "", true},
		{"structured output", "tools/call", call("structured", map[string]any{}), "", true},
		{"output against its schema", "tools/call", call("unstructured", map[string]any{}), "", true},
		{"every content type", "tools/call", call("contents", map[string]any{}), "", true},
		{"body error", "tools/call", call("fails", map[string]any{}), "", true},
		{"tool error", "tools/call", call("toolerror", map[string]any{}), "", true},
		{"denied without credential", "tools/call", call("guarded", map[string]any{}), "", true},
		{"denied without role", "tools/call", call("guarded", map[string]any{}), noRoleToken, true},
		{"admitted", "tools/call", call("guarded", map[string]any{}), goodToken, true},
		{"unknown token", "tools/call", call("guarded", map[string]any{}), "nobody", true},
		{"result over the limit", "tools/call", call("big", map[string]any{}), "", true},
		{"logs and progress", "tools/call", withProgress(call("talks", map[string]any{}), "p"), "", true},
		{"logs, numeric progress token", "tools/call", withProgress(call("talks", map[string]any{}), 7), "", true},
		{"logs without progress", "tools/call", call("talks", map[string]any{}), "", true},
		{"logs at warning", "tools/call", atLevel(call("talks", map[string]any{}), "warning"), "", true},
		{"logs at debug", "tools/call", atLevel(call("talks", map[string]any{}), "debug"), "", true},
		{"logs at a level MCP does not name", "tools/call", atLevel(call("talks", map[string]any{}), "verbose"), "", true},
		{"logs at an empty level", "tools/call", atLevel(call("talks", map[string]any{}), ""), "", true},
		{"a log level not a string", "tools/call", atLevel(call("talks", map[string]any{}), 7), "", true},
		{"stopped tool", "tools/call", call("stopped", map[string]any{}), "", true},
		{"unknown tool", "tools/call", call("nope", map[string]any{}), "", true},
		{"name too long", "tools/call", call(strings.Repeat("n", 200), map[string]any{}), "", true},
		{"argument name too long", "tools/call", call("echo", map[string]any{strings.Repeat("k", 2000): 1}), "", true},
		{"tools", "tools/list", map[string]any{}, "", true},
		{"bad cursor", "tools/list", map[string]any{"cursor": "!!" + x}, "", true},
		{"resources", "resources/list", map[string]any{}, "", true},
		{"templates", "resources/templates/list", map[string]any{}, "", true},
		{"prompts", "prompts/list", map[string]any{}, "", true},
		{"read text", "resources/read", map[string]any{"uri": "test://fixed"}, "", true},
		{"read blob", "resources/read", map[string]any{"uri": "test://blob"}, "", true},
		{"read denied", "resources/read", map[string]any{"uri": "test://secret"}, "", true},
		{"read admitted", "resources/read", map[string]any{"uri": "test://secret"}, goodToken, true},
		{"read fails", "resources/read", map[string]any{"uri": "test://broken"}, "", true},
		{"read a template", "resources/read", map[string]any{"uri": "test://t/abc"}, "", true},
		{"read unknown", "resources/read", map[string]any{"uri": "test://none/" + x}, "", true},
		{"read URI too long", "resources/read", map[string]any{"uri": "test://t/" + strings.Repeat("u", 20<<10)}, "", true},
		{"prompt", "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"who": "ada"}}, "", true},
		{"prompt missing argument", "prompts/get", map[string]any{"name": "greet"}, "", true},
		{"prompt fails", "prompts/get", map[string]any{"name": "sulks"}, "", true},
		{"unknown prompt", "prompts/get", map[string]any{"name": "nope"}, "", true},
	}
}

// body is a request of version v for c: the 2026-07-28 _meta triple
// added for that revision.
func (c fastCase) exchange(v string, id any) exchange {
	params := map[string]any{}
	for k, val := range c.params {
		params[k] = val
	}
	h := map[string]string{"MCP-Protocol-Version": v}
	if v == mcpserve.ProtocolStateless {
		meta := map[string]any{
			"io.modelcontextprotocol/protocolVersion":    v,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "diff", "version": "1"},
		}
		if m, ok := params["_meta"].(map[string]any); ok {
			for k, val := range m {
				meta[k] = val
			}
		}
		params["_meta"] = meta
		h["Mcp-Method"] = c.method
		if name, ok := c.params["name"].(string); ok {
			h["Mcp-Name"] = name
		} else if uri, ok := c.params["uri"].(string); ok {
			h["Mcp-Name"] = uri
		}
	}
	if c.token != "" {
		h["Authorization"] = "Bearer " + c.token
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": c.method, "params": params})
	return exchange{body: body, headers: h}
}

// TestFastPathMatchesSDK sends every hot method's requests, of each
// revision the fast path serves, to a stateless server with its fast path
// and to one without, over the same catalog, and compares the answers:
// the status and every JSON-RPC message, field by field. Each of these
// requests must have taken the fast path.
//
// With sessions, each server's session is made with the same requests:
// a 2026-07-28 request is refused alike (a session speaks 2025-11-25),
// and a request with a credential other than the one that made the
// session (none; an unknown token is anonymous too) alike (sessions are
// bound to their principal); every other must have taken the fast path. A session that set its log level
// gets the log messages at and above it.
func TestFastPathMatchesSDK(t *testing.T) {
	for _, mode := range []pathsMode{statelessMode, sessionMode, leveledMode} {
		t.Run(mode.name, func(t *testing.T) {
			p := newTwoPaths(t, mode)
			for _, v := range fastVersions {
				for i, c := range fastCases() {
					t.Run(v+"/"+c.name, func(t *testing.T) {
						taken := c.taken && !(mode.stateful && (v == mcpserve.ProtocolStateless || c.token != ""))
						for _, id := range []any{i + 1, fmt.Sprintf("id-%d", i)} {
							ex := c.exchange(v, id)
							before := p.takenCount(c.method)
							fast := p.send(t, p.fast.URL, ex)
							if got := p.takenCount(c.method) - before; taken && got != 1 || mode.stateful && v == mcpserve.ProtocolStateless && got != 0 {
								t.Errorf("the fast path served %s %d times, want %d", ex.body, got, map[bool]int{true: 1}[taken])
							}
							sdk := p.send(t, p.sdk.URL, ex)
							compareAnswers(t, ex, fast, sdk)
						}
					})
				}
			}
		})
	}
}

// TestFastPathOverloaded: a call refused at a route's concurrency limit
// is answered alike.
func TestFastPathOverloaded(t *testing.T) {
	for _, mode := range []pathsMode{statelessMode, sessionMode} {
		t.Run(mode.name, func(t *testing.T) { overloaded(t, newTwoPaths(t, mode), mode) })
	}
}

func overloaded(t *testing.T, p *twoPaths, mode pathsMode) {
	c := fastCase{"busy", "tools/call", map[string]any{"name": "busy", "arguments": map[string]any{}}, "", true}
	p.holdBusy.Store(true)
	versions := fastVersions
	if mode.stateful {
		versions = []string{"2025-11-25"}
	}
	for _, v := range versions {
		held := make(chan answer, 1)
		go func() { held <- p.send(t, p.sdk.URL, c.exchange(v, 0)) }()
		<-p.busyIn
		ex := c.exchange(v, 1)
		fast, sdk := p.send(t, p.fast.URL, ex), p.send(t, p.sdk.URL, ex)
		p.busyOut <- struct{}{}
		<-held
		compareAnswers(t, ex, fast, sdk)
		if !strings.Contains(fmt.Sprint(fast.messages), "-32029") && !strings.Contains(fmt.Sprint(fast.messages), "overloaded") {
			t.Errorf("%s: fast path answered %v, want overloaded", v, fast.messages)
		}
	}
}

// compareAnswers fails t if the fast path's answer differs from the SDK's.
func compareAnswers(t *testing.T, ex exchange, fast, sdk answer) {
	t.Helper()
	if fast.status != sdk.status {
		t.Errorf("%s\nstatus: fast path %d, SDK %d\nfast: %v\nsdk:  %v", ex.body, fast.status, sdk.status, fast.messages, sdk.messages)
		return
	}
	if !reflect.DeepEqual(fast.messages, sdk.messages) {
		fj, _ := json.Marshal(fast.messages)
		sj, _ := json.Marshal(sdk.messages)
		t.Errorf("%.300s\nfast path: %.2000s\nSDK:       %.2000s", ex.body, fj, sj)
	}
}

// TestFastPathLeavesToSDK: requests the fast path cannot judge as the SDK
// would go to the SDK untouched, and are answered as the SDK answers
// them (a few it may take, as it judges them alike).
func TestFastPathLeavesToSDK(t *testing.T) {
	p := newTwoPaths(t)
	echo := fastCase{"echo", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}}, "", true}
	current := echo.exchange(mcpserve.ProtocolStateless, 1)
	legacy := echo.exchange("2025-11-25", 1)
	with := func(ex exchange, h ...string) exchange {
		out := exchange{body: ex.body, headers: map[string]string{}}
		for k, v := range ex.headers {
			out.headers[k] = v
		}
		for i := 0; i+1 < len(h); i += 2 {
			out.headers[h[i]] = h[i+1]
		}
		return out
	}
	body := func(ex exchange, b string) exchange { return exchange{body: []byte(b), headers: ex.headers} }
	meta := func(m string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":` + m + `}}`
	}
	tests := []struct {
		name    string
		ex      exchange
		mayTake bool // judged alike either way
	}{
		{"no protocol header", with(legacy, "MCP-Protocol-Version", ""), false},
		{"2025-03-26", with(legacy, "MCP-Protocol-Version", "2025-03-26"), false},
		{"unknown protocol", with(legacy, "MCP-Protocol-Version", "1999-01-01"), false},
		{"a session ID", with(legacy, "Mcp-Session-Id", "abc"), false},
		{"Last-Event-ID", with(legacy, "Last-Event-ID", "1"), false},
		{"text/plain", with(legacy, "Content-Type", "text/plain"), false},
		{"Accept without events", with(legacy, "Accept", "application/json"), false},
		{"another Host", with(legacy, "Host", "example.com"), false},
		{"method header mismatch", with(current, "Mcp-Method", "tools/list"), false},
		{"no method header", with(current, "Mcp-Method", ""), false},
		{"name header mismatch", with(current, "Mcp-Name", "other"), false},
		{"no name header", with(current, "Mcp-Name", ""), false},
		{"no client capabilities", body(current, meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)), false},
		{"capabilities not an object", body(current, meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5}`)), false},
		{"client info not an object", body(current, meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":"me"}`)), false},
		{"no _meta", body(current, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`), false},
		{"header and _meta disagree", body(current, meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-29","io.modelcontextprotocol/clientCapabilities":{}}`)), false},
		{"legacy with a _meta version", body(legacy, meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)), false},
		{"progress token an object", body(legacy, meta(`{"progressToken":{}}`)), false},
		{"jsonrpc 1.0", body(legacy, `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}`), false},
		{"no jsonrpc", body(legacy, `{"id":1,"method":"tools/call","params":{"name":"echo"}}`), false},
		{"a result too", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"result":{}}`), false},
		{"no params", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), true},
		{"null params", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`), false},
		{"no params, current", body(current, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), false},
		{"call without params", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), false},
		{"params an array", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}`), false},
		{"params of the wrong type", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`), false},
		{"a method named by case", body(legacy, `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"echo"}}`), false},
		{"no id", body(legacy, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`), false},
		{"id null", body(legacy, `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}`), false},
		{"id not an integer", body(legacy, `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}`), false},
		{"id an object", body(legacy, `{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"echo"}}`), false},
		{"trailing data", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}} {}`), false},
		{"a batch", body(legacy, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]`), false},
		{"a field named by case", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"echo"}}`), true},
		{"malformed", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}`), false},
		{"deep arguments", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":`+strings.Repeat("[", 1200)+strings.Repeat("]", 1200)+`}}}`), false},
		{"another method", body(legacy, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}`), false},
		{"a notification", body(legacy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.takenCount("tools/call") + p.takenCount("tools/list")
			fast := p.send(t, p.fast.URL, tt.ex)
			if got := p.takenCount("tools/call") + p.takenCount("tools/list"); got != before && !tt.mayTake {
				t.Errorf("the fast path served %s", tt.ex.body)
			}
			compareAnswers(t, tt.ex, fast, p.send(t, p.sdk.URL, tt.ex))
		})
	}
}

// FuzzFastPath sends arbitrary bodies, as a 2025-11-25 or a 2026-07-28
// request (its Mcp-Method and Mcp-Name headers read from the body, so
// that most bodies reach the fast path), to a server with the fast path
// and one without, and fails on any difference in what they answer.
func FuzzFastPath(f *testing.F) {
	for i, c := range fastCases() {
		for _, v := range fastVersions {
			f.Add(c.exchange(v, i).body, v == mcpserve.ProtocolStateless)
		}
	}
	for _, b := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"echo"}}`,
		`{"jsonrpc":"2.0","id":"\u0041","method":"tools/call","params":{"name":"echo","arguments":{"a":"\u2028<>&"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"talks"}}`,
		`{"jsonrpc":"2.0","id":-0,"method":"resources/read","params":{"uri":"test://t/%41"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":null,"_meta":null}}`,
	} {
		f.Add([]byte(b), false)
		f.Add([]byte(b), true)
	}
	for _, c := range strictCases() {
		body, _ := currentBody(c)
		f.Add([]byte(c.body), false)
		f.Add([]byte(body), true)
	}
	p := newTwoPaths(f)
	f.Fuzz(func(t *testing.T, body []byte, current bool) {
		v := "2025-11-25"
		if current {
			v = mcpserve.ProtocolStateless
		}
		ex := exchange{body: body, headers: map[string]string{"MCP-Protocol-Version": v}}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && current {
			for k, v := range map[string]string{"Mcp-Method": msg.Method, "Mcp-Name": msg.Params.Name + msg.Params.URI} {
				if !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
					ex.headers[k] = v // a value no client could send stays out
				}
			}
		}
		compareAnswers(t, ex, p.send(t, p.fast.URL, ex), p.send(t, p.sdk.URL, ex))
	})
}

// TestFastPathServesSDKClient: the SDK's own client, at the current
// revision and at 2025-11-25, reaches the fast path for every hot method
// it sends, and gets what it asked for.
func TestFastPathServesSDKClient(t *testing.T) {
	var mu sync.Mutex
	taken := map[string]int{}
	t.Cleanup(mcpserve.SetFastHook(func(method string) {
		mu.Lock()
		taken[method]++
		mu.Unlock()
	}))
	cat := newCatalog(t, catalog.Config{})
	startText(t, cat, context.Background(), "echo", "hi")
	f := newStateless(t, cat, mcpserve.Options{})
	for _, c := range []*client{f.connectCurrent(""), f.connectAt(legacyVersion, "")} {
		mu.Lock()
		clear(taken)
		mu.Unlock()
		v := c.InitializeResult().ProtocolVersion
		res, err := call(t, c, "echo")
		if err != nil || text(t, res) != "hi" {
			t.Fatalf("%s: echo = %v, %v", v, res, err)
		}
		if _, err := c.ListTools(ctxGuard(t), nil); err != nil {
			t.Fatalf("%s: tools/list: %v", v, err)
		}
		if _, err := c.ListResources(ctxGuard(t), nil); err != nil {
			t.Fatalf("%s: resources/list: %v", v, err)
		}
		mu.Lock()
		for _, m := range []string{"tools/call", "tools/list", "resources/list"} {
			if taken[m] != 1 {
				t.Errorf("%s: the fast path served %s %d times, want 1", v, m, taken[m])
			}
		}
		mu.Unlock()
	}
}

// FuzzFastPathSession is FuzzFastPath on a session of 2025-11-25 that set
// its log level: arbitrary bodies on the session, to a server with the
// fast path and one without, must be answered alike.
func FuzzFastPathSession(f *testing.F) {
	for i, c := range fastCases() {
		f.Add(c.exchange("2025-11-25", i).body)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`))
	p := newTwoPaths(f, leveledMode)
	f.Fuzz(func(t *testing.T, body []byte) {
		ex := exchange{body: body, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}}
		compareAnswers(t, ex, p.send(t, p.fast.URL, ex), p.send(t, p.sdk.URL, ex))
	})
}
