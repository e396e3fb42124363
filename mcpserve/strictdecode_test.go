package mcpserve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// strictCase is one input of TestStrictDecodeBothPaths: a body written
// for 2025-11-25 (currentBody adds 2026-07-28's _meta), headers sent a
// second time, and the answer both paths must give.
type strictCase struct {
	name   string
	body   string
	repeat [][2]string
	status int // HTTP status
	code   int // JSON-RPC error code; 0 for a result, -1 for a plain-text refusal
}

const currentMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"diff","version":"1"}}`

func strictCases() []strictCase {
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	echo := `{"name":"echo","arguments":{"text":"hi"}}`
	longID := `"` + strings.Repeat("i", 300) + `"`
	batch := `[` + call("1", echo) + `]`
	parse := func(name, body string) strictCase {
		return strictCase{name: name, body: body, status: 400, code: -32700}
	}
	invalid := func(name, body string) strictCase {
		return strictCase{name: name, body: body, status: 400, code: -32600}
	}
	header := func(name string, repeat ...string) strictCase {
		return strictCase{name: name, body: call("1", echo), repeat: [][2]string{{repeat[0], repeat[1]}, {repeat[0], repeat[1]}}, status: 400, code: -1}
	}
	return []strictCase{
		{name: "a call", body: call("1", echo), status: 200},
		{name: "escaped method", body: `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":` + echo + `}`, status: 200},
		{name: "escaped name", body: call("1", `{"name":"\u0065cho","arguments":{"text":"hi"}}`), status: 200},

		// Duplicate and case-variant names, at every depth.
		parse("duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":`+echo+`}`),
		parse("case-variant method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":`+echo+`}`),
		parse("duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":`+echo+`}`),
		parse("duplicate jsonrpc", `{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":`+echo+`}`),
		parse("case-variant params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+echo+`,"Params":{"name":"fails"}}`),
		parse("duplicate name", call("1", `{"name":"fails","name":"echo","arguments":{}}`)),
		parse("case-variant name", call("1", `{"name":"echo","Name":"fails","arguments":{}}`)),
		parse("escaped duplicate name", call("1", `{"name":"echo","n\u0061me":"fails","arguments":{}}`)),
		parse("duplicate arguments", call("1", `{"name":"echo","arguments":{},"arguments":{"text":"hi"}}`)),
		parse("duplicate argument", call("1", `{"name":"echo","arguments":{"text":"a","text":"b"}}`)),
		parse("case-variant argument", call("1", `{"name":"echo","arguments":{"text":"a","TEXT":"b"}}`)),
		parse("nested case variant", call("1", `{"name":"echo","arguments":{"o":{"deep":{"k":1,"K":2}}}}`)),
		parse("duplicate in an array", call("1", `{"name":"echo","arguments":{"a":[{"k":1,"k":2}]}}`)),
		parse("duplicate progress token", call("1", `{"name":"echo","_meta":{"progressToken":1,"progressToken":2}}`)),
		parse("duplicate URI", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://fixed","uri":"test://secret"}}`),

		// Trailing data after what would otherwise be refused, or served.
		parse("trailing data", call("1", echo)+" x"),
		parse("trailing id 1.5", call("1.5", echo)+" x"),
		parse("trailing id 2^53+1", call("9007199254740993", echo)+" x"),
		parse("trailing long id", call(longID, echo)+" x"),
		parse("trailing batch", batch+" x"),
		parse("a second message", call("1", echo)+call("2", echo)),

		// Odd ids: one answer on both paths.
		invalid("id -0", call("-0", echo)),
		parse("id lone surrogate", call(`"\ud800"`, echo)),
		parse("id 1e999", call("1e999", echo)),
		invalid("id 1.5", call("1.5", echo)),
		invalid("id 2^53+1", call("9007199254740993", echo)),
		invalid("id a long string", call(longID, echo)),
		invalid("id 1e2", call("1e2", echo)),
		{name: "id 2^53-1", body: call("9007199254740991", echo), status: 200},
		{name: "id an escaped string", body: call(`"\u0041\ud83d\ude00"`, echo), status: 200},
		parse("an argument 1e999", call("1", `{"name":"echo","arguments":{"text":1e999}}`)),
		parse("invalid UTF-8 in a name", call("1", "{\"name\":\"ech\xff\"}")),

		// Repeated protocol headers.
		header("two Mcp-Method", "Mcp-Method", "tools/call"),
		header("two Mcp-Name", "Mcp-Name", "echo"),
		header("two MCP-Protocol-Version", "MCP-Protocol-Version", "2025-11-25"),
		header("two Mcp-Param-Region", "Mcp-Param-Region", "us"),
		header("Mcp-Param-Region twice by case", "mcp-param-region", "us"),
	}
}

// currentBody is body as a 2026-07-28 request: its params carry the
// _meta triple, and the first method and name of the body go in the
// Mcp-Method and Mcp-Name headers (so that the header check is not what
// refuses it).
func currentBody(c strictCase) (string, map[string]string) {
	body := strings.Replace(c.body, `"params":{`, `"params":{`+currentMeta+`,`, 1)
	h := map[string]string{}
	if i := strings.Index(c.body, `"method":"`); i >= 0 {
		m := c.body[i+len(`"method":"`):]
		h["Mcp-Method"] = strings.ReplaceAll(m[:strings.IndexByte(m, '"')], `\/`, "/")
	}
	for _, k := range []string{`"name":"`, `"uri":"`} {
		if i := strings.Index(c.body, k); i >= 0 {
			m := c.body[i+len(k):]
			h["Mcp-Name"] = strings.ReplaceAll(m[:strings.IndexByte(m, '"')], `\u0065`, "e")
		}
	}
	return body, h
}

// TestStrictDecodeBothPaths sends the review's inputs to a server with
// the fast path and to one without, at 2025-11-25 and 2026-07-28, and
// requires the same answer from both, and the one the case names: a
// body outside the strict decoder's rules gets 400 -32700 and an id the
// JSON-RPC 2.0 and MCP rules refuse 400 -32600, before any handler ran;
// a repeated protocol header gets 400.
func TestStrictDecodeBothPaths(t *testing.T) {
	p := newTwoPaths(t)
	for _, v := range fastVersions {
		for _, c := range strictCases() {
			t.Run(v+"/"+c.name, func(t *testing.T) {
				ex := exchange{body: []byte(c.body), headers: map[string]string{"MCP-Protocol-Version": v}, repeat: c.repeat}
				if v == mcpserve.ProtocolStateless {
					body, h := currentBody(c)
					ex.body = []byte(body)
					for k, val := range h {
						ex.headers[k] = val
					}
				}
				before := p.takenCount("tools/call") + p.takenCount("resources/read")
				fast := p.send(t, p.fast.URL, ex)
				if c.status != 200 {
					assert.Equal(t, before, p.takenCount("tools/call")+p.takenCount("resources/read"), "the fast path served a refused request")
				}
				sdk := p.send(t, p.sdk.URL, ex)
				compareAnswers(t, ex, fast, sdk)
				requireStrictAnswer(t, c, fast)
			})
		}
	}
}

// requireStrictAnswer requires a the status and error code c names, and
// a refusal's message to quote little of the body.
func requireStrictAnswer(t *testing.T, c strictCase, a answer) {
	t.Helper()
	require.Equal(t, c.status, a.status, "%v", a.messages)
	require.NotEmpty(t, a.messages)
	switch c.code {
	case -1:
		text, ok := a.messages[0].(string)
		require.True(t, ok, "a plain-text refusal, not %v", a.messages[0])
		assert.Contains(t, text, "more than one")
	case 0:
		msg := a.messages[len(a.messages)-1].(map[string]any)
		assert.Contains(t, msg, "result")
		res, _ := msg["result"].(map[string]any)
		assert.NotEqual(t, true, res["isError"], "%v", msg)
	default:
		msg := a.messages[0].(map[string]any)
		e, _ := msg["error"].(map[string]any)
		require.NotNil(t, e, "%v", msg)
		assert.Equal(t, float64(c.code), e["code"], "%v", msg)
		assert.LessOrEqual(t, len(fmt.Sprint(e["message"])), 200, "the message quotes at most 64 bytes of the body")
		if c.code == -32700 {
			assert.Nil(t, msg["id"])
		}
	}
}

// TestStrictDecodeParamHeaders: the Mcp-Param check reads the method,
// the name and the arguments from the decoded message. An escaped
// method name is checked like a plain one, and a case-variant argument
// beside the marked one is refused before the check or the body could
// read either. Both paths answer alike; no refused call runs the body.
func TestStrictDecodeParamHeaders(t *testing.T) {
	p := newTwoPaths(t)
	routed := func(method, args, region string) exchange {
		ex := hopExchange(mcpserve.ProtocolStateless, "tools/call", `{"name":"routed","arguments":`+args+`}`, "routed", "")
		ex.body = []byte(strings.Replace(string(ex.body), `"method":"tools/call"`, `"method":"`+method+`"`, 1))
		if region != "" {
			ex.headers["Mcp-Param-Region"] = region
		}
		return ex
	}
	tests := []struct {
		name   string
		ex     exchange
		status int
		code   int
		runs   int64
	}{
		{"agrees", routed("tools/call", `{"region":"us"}`, "us"), 200, 0, 1},
		{"disagrees", routed("tools/call", `{"region":"eu"}`, "us"), 400, -32020, 0},
		{"escaped method disagrees", routed(`tools\/call`, `{"region":"eu"}`, "us"), 400, -32020, 0},
		{"escaped method, no header", routed(`tools\u002fcall`, `{"region":"eu"}`, ""), 400, -32020, 0},
		{"escaped method agrees", routed(`tools\/call`, `{"region":"eu"}`, "eu"), 200, 0, 1},
		{"case variant beside", routed("tools/call", `{"region":"us","Region":"eu"}`, "us"), 400, -32700, 0},
		{"duplicate", routed("tools/call", `{"region":"us","region":"eu"}`, "us"), 400, -32700, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, url := range []string{p.fast.URL, p.sdk.URL} {
				before := p.routedRuns.Load()
				a := p.send(t, url, tt.ex)
				require.Equal(t, tt.status, a.status, "%v", a.messages)
				msg := a.messages[len(a.messages)-1].(map[string]any)
				if tt.code != 0 {
					e, _ := msg["error"].(map[string]any)
					require.NotNil(t, e, "%v", msg)
					assert.Equal(t, float64(tt.code), e["code"])
				}
				assert.Equal(t, tt.runs, p.routedRuns.Load()-before, "runs of the body")
			}
			compareAnswers(t, tt.ex, p.send(t, p.fast.URL, tt.ex), p.send(t, p.sdk.URL, tt.ex))
		})
	}
}
