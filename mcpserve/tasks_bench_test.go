package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// BenchmarkTaskGet is the server's cost of a 2026-07-28 tasks/get of a
// running task beside a tools/call of a trivial tool, the same request
// shape on the same handler (called directly, as BenchmarkFastPath does):
// issue 30 asks that the first cost no more than the second.
func BenchmarkTaskGet(b *testing.B) {
	cat, err := catalog.New(catalog.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	release := make(chan struct{})
	k, err := cat.StartTool(ctx, catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return catalog.TextResult("done"), nil
			})
		})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Stop(ctx)
	defer close(release) // before the Stop, which drains the task's body
	k2, err := cat.StartTool(ctx, catalog.Tool{Name: "echo"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
	if err != nil {
		b.Fatal(err)
	}
	defer k2.Stop(ctx)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Stateless: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"}}`
	post := func(method, name, params string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+`,`+meta+`}}`)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("MCP-Protocol-Version", "2026-07-28")
		r.Header.Set("Mcp-Method", method)
		r.Header.Set("Mcp-Name", name)
		return r
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, post("tools/call", "job", `"name":"job","arguments":{}`))
	var created struct {
		Result struct {
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil || created.Result.TaskID == "" {
		b.Fatalf("no task: %s", w.Body.Bytes())
	}
	id := created.Result.TaskID
	for _, op := range []struct{ name, method, target, params string }{
		{"tasks-get", "tasks/get", id, `"taskId":"` + id + `"`},
		{"call-trivial", "tools/call", "echo", `"name":"echo","arguments":{}`},
	} {
		b.Run(op.name, func(b *testing.B) {
			req := post(op.method, op.target, op.params)
			body, _ := io.ReadAll(req.Body)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := req.Clone(req.Context())
					r.Body = io.NopCloser(bytes.NewReader(body))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("answered %d %.300s", w.Code, w.Body.Bytes())
					}
				}
			})
		})
	}
}

// BenchmarkTaskGetForwarded is BenchmarkTaskGet across the fleet hop,
// over loopback HTTP: a tasks/get of a running task held by replica B,
// sent to replica A, beside a tools/call of a trivial tool B holds, sent
// to A. Both cross the hop once; the first should cost no more.
func BenchmarkTaskGetForwarded(b *testing.B) {
	_, a, bb := taskFleet(b)
	release := make(chan struct{})
	defer close(release)
	startJob(b, bb.cat, "job", release)
	k, err := bb.cat.StartTool(context.Background(), catalog.Tool{Name: "echo"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
	if err != nil {
		b.Fatal(err)
	}
	defer k.Stop(context.Background())
	a.peers.set(string(catalog.KindTool), "job", bb.fleet)
	a.peers.set(string(catalog.KindTool), "echo", bb.fleet)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"}}`
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	post := func(method, name, params string) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, a.url, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+`,`+meta+`}}`)))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
		req.Header.Set("Authorization", "Bearer "+goodToken)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	_, body := post("tools/call", "job", `"name":"job","arguments":{}`)
	var created struct {
		Result struct {
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if i := bytes.LastIndex(body, []byte("data: ")); i >= 0 {
		body = body[i+len("data: "):]
	}
	if err := json.Unmarshal(bytes.TrimSpace(body), &created); err != nil || created.Result.TaskID == "" {
		b.Fatalf("no task: %s", body)
	}
	id := created.Result.TaskID
	for _, op := range []struct{ name, method, target, params string }{
		{"tasks-get", "tasks/get", id, `"taskId":"` + id + `"`},
		{"call-trivial", "tools/call", "echo", `"name":"echo","arguments":{}`},
	} {
		b.Run(op.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code, body := post(op.method, op.target, op.params); code != http.StatusOK {
						b.Fatalf("answered %d %.300s", code, body)
					}
				}
			})
		})
	}
}
