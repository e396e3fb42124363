package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

// postCurrent sends what the README's curl hand-run sends: one JSON-RPC
// request of the current revision, the version in _meta and in the
// MCP-Protocol-Version header, the method (and the name) in headers.
func postCurrent(t *testing.T, url, method, name string, params map[string]any) *http.Response {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
	}
	return resp
}

// events sends the data of each server-sent event of resp on the channel
// returned, or its body when it is one JSON message, and closes it when
// the stream ends.
func events(resp *http.Response) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if b, err := io.ReadAll(resp.Body); err == nil {
				ch <- strings.TrimSpace(string(b))
			}
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				ch <- data
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("the stream ended before %s", what)
		}
		return ev
	case <-time.After(guard):
		t.Fatalf("gave up waiting for %s", what)
	}
	return ""
}

// With -stateless: the README's hand-run (server/discover, then tools/list
// with the version in _meta) works as written, the SDK's client speaks the
// current revision, and every death of fortune, and its restart, reaches a
// subscriptions/listen stream as tools/list_changed.
func TestStatelessServesCurrentRevision(t *testing.T) {
	cfg := localConfig(aliceToken + "@alice:admin")
	cfg.stateless, cfg.maxListens = true, 4
	s := startRun(t, cfg)

	disc := next(t, events(postCurrent(t, s.url, "server/discover", "", map[string]any{})), "the discover result")
	if !strings.Contains(disc, `"supportedVersions":["2026-07-28"`) || !strings.Contains(disc, `"name":"livereg-mcp"`) {
		t.Errorf("server/discover = %s", disc)
	}
	list := next(t, events(postCurrent(t, s.url, "tools/list", "", map[string]any{})), "the tools/list result")
	if !strings.Contains(list, `"name":"fortune"`) {
		t.Errorf("tools/list = %s", list)
	}

	listen := events(postCurrent(t, s.url, "subscriptions/listen", "",
		map[string]any{"notifications": map[string]any{"toolsListChanged": true}}))
	if ack := next(t, listen, "the acknowledgement"); !strings.Contains(ack, "notifications/subscriptions/acknowledged") {
		t.Fatalf("the listen stream began with %s", ack)
	}
	alice := connectAt(t, s.url, aliceToken, "")
	if v := alice.InitializeResult().ProtocolVersion; v != mcpserve.ProtocolStateless {
		t.Fatalf("the SDK client negotiated %q", v)
	}
	listed := func() bool {
		res, err := alice.ListTools(ctxGuard(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == victimName })
	}
	// await reads notifications until the listing agrees with want.
	await := func(want bool) {
		t.Helper()
		for {
			if ev := next(t, listen, "tools/list_changed"); !strings.Contains(ev, "notifications/tools/list_changed") {
				t.Fatalf("the listen stream carried %s", ev)
			}
			if listed() == want {
				return
			}
		}
	}
	for _, how := range []string{"stop", "cancel", "panic", "drop"} {
		if got, isErr := callText(t, alice, crashName, map[string]any{"how": how}); isErr {
			t.Fatalf("demo_crash %s = %q", how, got)
		}
		await(false)
		if got, isErr := callText(t, alice, restartName, nil); isErr {
			t.Fatalf("demo_restart after %s = %q", how, got)
		}
		await(true)
	}
	_ = alice.Close()
	s.stop(t)
	// The shutdown ended the listen stream.
	for range listen {
	}
}
