package mcpserve_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/mcpserve"
)

// A caller gets through a forward what it gets from the holder itself:
// replica a holds nothing and forwards every route of the fast path's
// fixture (startAll) to replica b, and each request goes to a's public
// endpoint and to b's, and the two answers must match field by field:
// HTTP status, result, error code, message and data, and the progress
// notifications and log messages before the response, in order. The
// holder serves the hop
// on its fast path, and again with the fast path off (the SDK's answers,
// framed by hopWriter), so that the forwarder reads both alike.
func TestForwardMatchesLocal(t *testing.T) {
	for _, holderFast := range []bool{true, false} {
		t.Run(fmt.Sprintf("holder fast path %v", holderFast), func(t *testing.T) {
			a, b := newReplica(t, statelessOpt), newReplica(t, statelessOpt)
			if !holderFast {
				mcpserve.NoFastPath(b.srv)
			}
			var fast atomic.Int64
			mcpserve.OnFastForwarded(b.srv, func(string) { fast.Add(1) })
			p := &twoPaths{t: t, cat: b.cat, busyIn: make(chan struct{}), busyOut: make(chan struct{})}
			p.startAll()
			for _, name := range []string{"echo", "structured", "unstructured", "contents", "fails", "toolerror", "guarded", "big", "talks", "busy"} {
				a.peers.set("tool", name, b.fleet)
			}
			for _, uri := range []string{"test://fixed", "test://blob", "test://secret", "test://broken", "test://t/7"} {
				a.peers.set("resource", uri, b.fleet)
			}
			sent := 0
			for _, version := range []string{"2026-07-28", "2025-11-25"} {
				for _, tc := range hopCases {
					for _, token := range []string{"", goodToken, noRoleToken} {
						ex := hopExchange(version, tc.method, tc.params, tc.name, token)
						got, want := p.send(t, a.url, ex), p.send(t, b.url, ex)
						if !reflect.DeepEqual(got, want) {
							t.Errorf("%s %s %s, token %q:\n forwarded %+v\n     local %+v", version, tc.method, tc.params, token, got, want)
						}
						sent++
					}
				}
			}
			// Every forward was served by the holder's fast path, or by
			// none of them.
			if n := fast.Load(); holderFast && n != int64(sent) || !holderFast && n != 0 {
				t.Fatalf("the holder's fast path served %d of %d forwards", n, sent)
			}
		})
	}
}

// hopCases are the requests of TestForwardMatchesLocal: every answer a
// tools/call and a resources/read has.
var hopCases = []struct{ method, name, params string }{
	{"tools/call", "echo", `{"name":"echo","arguments":{"text":"hi"}}`},
	{"tools/call", "echo", `{"name":"echo","arguments":{"text":7}}`},
	{"tools/call", "echo", `{"name":"echo"}`},
	{"tools/call", "structured", `{"name":"structured","arguments":{}}`},
	{"tools/call", "unstructured", `{"name":"unstructured","arguments":{}}`},
	{"tools/call", "contents", `{"name":"contents","arguments":{}}`},
	{"tools/call", "fails", `{"name":"fails","arguments":{}}`},
	{"tools/call", "toolerror", `{"name":"toolerror","arguments":{}}`},
	{"tools/call", "guarded", `{"name":"guarded","arguments":{}}`},
	{"tools/call", "big", `{"name":"big","arguments":{}}`},
	{"tools/call", "talks", `{"name":"talks","arguments":{},"_meta":{"progressToken":"p-1"}}`},
	{"tools/call", "talks", `{"name":"talks","arguments":{},"_meta":{"progressToken":42}}`},
	{"tools/call", "talks", `{"name":"talks","arguments":{}}`},
	{"tools/call", "busy", `{"name":"busy","arguments":{}}`},
	{"resources/read", "test://fixed", `{"uri":"test://fixed"}`},
	{"resources/read", "test://blob", `{"uri":"test://blob"}`},
	{"resources/read", "test://secret", `{"uri":"test://secret"}`},
	{"resources/read", "test://broken", `{"uri":"test://broken"}`},
	{"resources/read", "test://t/7", `{"uri":"test://t/7"}`},
}

// hopExchange is a request of protocol version, with its _meta and
// headers for 2026-07-28, presenting token if it is set.
func hopExchange(version, method, params, name, token string) exchange {
	h := map[string]string{"MCP-Protocol-Version": version}
	if version == "2026-07-28" {
		h["Mcp-Method"], h["Mcp-Name"] = method, name
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		if i := len(params) - 1; params[i-1] == '}' && strings.Contains(params, `"_meta":{`) {
			params = params[:i-1] + "," + meta + "}}" // into the _meta there
		} else {
			params = params[:i] + `,"_meta":{` + meta + "}}"
		}
	}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return exchange{body: []byte(`{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":` + params + `}`), headers: h}
}

func statelessOpt(o *mcpserve.Options) { o.Stateless = true }
