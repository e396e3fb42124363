package mcpserve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/mcpserve"
)

// maxFuzzAnswer bounds any answer to the fuzzed requests: the catalog's
// results are a few hundred bytes, and every error is bounded.
const maxFuzzAnswer = 16 << 10

// FuzzHTTPRequest posts arbitrary bodies to a stateful server, on a
// session or without one, and checks that each gets an answer, in time,
// that is valid JSON, SSE carrying JSON, or a plain-text refusal; that no
// answer is larger than maxFuzzAnswer; and that none echoes more than 64
// bytes of a client's string (the seeds' strings are runs of "x", and
// nothing the catalog holds has one). Seeds: oversized URIs, names, keys,
// methods and ref types, ids beyond 2^53, batches.
func FuzzHTTPRequest(f *testing.F) {
	x := func(n int) string { return strings.Repeat("x", n) }
	seeds := []string{
		req("1", "tools/list", map[string]any{}),
		req("1", "resources/read", map[string]any{"uri": "test://t/" + x(100<<10) + "/data"}),
		req("1", "resources/subscribe", map[string]any{"uri": "test://t/" + x(100<<10) + "/data"}),
		req("1", "resources/read", map[string]any{"uri": "test://none/" + x(300)}),
		req("1", "resources/read", map[string]any{"uri": "test://t/a%00b" + x(100) + "/data"}),
		req("1", "tools/call", map[string]any{"name": x(5000)}),
		req("1", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{x(2000): 1}}),
		req("1", "completion/complete", map[string]any{"ref": map[string]any{"type": x(10000)}, "argument": map[string]any{"name": "a", "value": ""}}),
		req("1", x(300), map[string]any{}),
		req("1", "logging/setLevel", map[string]any{"level": x(300)}),
		req("-9223372036854775808", "tools/list", map[string]any{}),
		req("9007199254740993", "ping", map[string]any{}),
		req("1.5", "ping", map[string]any{}),
		req(`"`+x(1000)+`"`, "ping", map[string]any{}),
		"[" + req("1", "ping", map[string]any{}) + "," + req("2", "tools/list", map[string]any{}) + "]",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + `"` + x(70) + `",` + `"arguments":"` + x(100) + `"}}`,
		`not json ` + x(500),
	}
	for _, s := range seeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	fx := hygieneFixture(f, mcpserve.Options{MaxListenStreams: -1})
	sid := openRawSession(f, fx.http.URL, "2025-11-25")
	hc := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, body []byte, onSession bool) {
		r, err := http.NewRequest(http.MethodPost, fx.http.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if onSession {
			r.Header.Set("Mcp-Session-Id", sid)
			r.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(io.LimitReader(resp.Body, maxFuzzAnswer+1))
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		if len(got) > maxFuzzAnswer {
			t.Fatalf("an answer of more than %d bytes to a body of %d: %.200s", maxFuzzAnswer, len(body), got)
		}
		if longRun.Match(got) {
			t.Fatalf("an echo beyond 64 bytes: %.300s", got)
		}
		ct := resp.Header.Get("Content-Type")
		switch {
		case len(got) == 0:
		case strings.HasPrefix(ct, "application/json"):
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %.300s", got)
			}
		case strings.HasPrefix(ct, "text/event-stream"):
			for _, line := range strings.Split(string(got), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" && !json.Valid([]byte(d)) {
					t.Fatalf("invalid JSON in an event: %.300s", d)
				}
			}
		case strings.HasPrefix(ct, "text/plain"):
			if resp.StatusCode < 400 {
				t.Fatalf("plain text with status %d: %.300s", resp.StatusCode, got)
			}
		default:
			t.Fatalf("answer of type %q, status %d: %.300s", ct, resp.StatusCode, got)
		}
	})
}
