package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// BenchmarkFastPath is the server's own cost of a tools/call of a trivial
// echo tool with an input schema, and of a tools/list of 100 tools, over
// the Server's HTTP handler called directly (no socket, no client): on
// the fast path, stateless and on a session, and through the SDK's path
// (fast path off) for comparison. cmd/wirebench measures the same over
// loopback, server and client in processes of their own. Each call's
// request is a copy, its header included, which the figures count.
func BenchmarkFastPath(b *testing.B) {
	for _, mode := range []struct {
		name           string
		stateless, sdk bool
	}{{"stateless", true, false}, {"session", false, false}, {"sdk-stateless", true, true}, {"sdk-session", false, true}} {
		for _, op := range []struct {
			name, body string
		}{
			{"call", `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}}`},
			{"list", `,"method":"tools/list","params":{}}`},
		} {
			b.Run(op.name+"/"+mode.name, func(b *testing.B) {
				h, session := benchServer(b, mode.stateless, mode.sdk)
				var ids atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					// An id of its own: a session refuses a request whose
					// id is in flight.
					body := []byte(`{"jsonrpc":"2.0","id":` + itoa(int(ids.Add(1))) + op.body)
					req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("MCP-Protocol-Version", "2025-11-25")
					if session != "" {
						req.Header.Set("Mcp-Session-Id", session)
					}
					for pb.Next() {
						// The front and the SDK write to a request's
						// header and body: each call gets a copy.
						r := req.Clone(req.Context())
						r.Body = io.NopCloser(bytes.NewReader(body))
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"result"`)) {
							b.Fatalf("answered %d %.300s", w.Code, w.Body.Bytes())
						}
					}
				})
			})
		}
	}
}

// benchServer is a Server of echo and 99 more tools, and the ID of an
// initialized session on it when it is stateful.
func benchServer(b *testing.B, stateless, sdk bool) (http.Handler, string) {
	cat := newCatalog(b, catalog.Config{})
	ctx := context.Background()
	for i := range 100 {
		name := "echo"
		if i > 0 {
			name = "tool-" + itoa(i)
		}
		k, err := cat.StartTool(ctx, catalog.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
			bindsec.Plan{Public: true}, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
				return catalog.TextResult(string(c.Arguments)), nil
			})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = k.Stop(ctx) })
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Stateless: stateless, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	if sdk {
		mcpserve.NoFastPath(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	if stateless {
		return srv.Handler(), ""
	}
	code, id := rawPost(b, ts.URL, initializeBody, nil)
	if code != http.StatusOK || id == "" {
		b.Fatalf("initialize = %d", code)
	}
	if code, _ := rawPost(b, ts.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string][]string{"Mcp-Session-Id": {id}}); code != http.StatusAccepted {
		b.Fatalf("notifications/initialized = %d", code)
	}
	return srv.Handler(), id
}
