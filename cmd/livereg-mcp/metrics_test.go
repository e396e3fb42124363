package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// -metrics serves the catalog's and the sessions' counters in the
// Prometheus text format.
func TestMetricsEndpoint(t *testing.T) {
	murl := make(chan string, 1)
	cfg := localConfig("")
	cfg.metricsAddr, cfg.onMetrics = "127.0.0.1:0", func(u string) { murl <- u }
	s := startRun(t, cfg)
	var url string
	select {
	case url = <-murl:
	case <-time.After(guard):
		t.Fatal("no metrics URL")
	}
	cs := connect(t, s.url, "")
	// One call that reaches no route: the catalog counts it by outcome.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no-such-tool"}); err == nil {
		t.Fatal("a call to an unknown tool succeeded")
	}
	wants := []string{
		`livereg_routes_live{kind="tool"} 7`,
		`livereg_routes_live{kind="resource"} 1`,
		"livereg_mcp_sessions_open 1",
		"livereg_mcp_sessions_opened_total 1",
		"livereg_mcp_sessions_refused_total 0",
		"livereg_mcp_sessions_max 1000",
		"livereg_mcp_listen_streams_open 0",
		"livereg_mcp_listen_streams_max 1000",
		`livereg_mcp_refusals_total{cap="sessions",reason="share"} 0`,
		`livereg_mcp_refusals_total{cap="subscriptions",reason="session"} 0`,
		"livereg_mcp_subscriptions_held 0",
		`livereg_routes_live{kind="prompt"} `,
		`livereg_routes_live{kind="resource_template"} `,
		`livereg_calls_total{outcome="unknown"} 1`,
		`livereg_calls_total{outcome="ok"} 0`,
		`livereg_consumer_deaths_total{path="drop"} 0`,
		`livereg_start_refusals_total{reason="duplicate"} 0`,
		"go_goroutines ",
	}
	// A request's session slot is released once its handler has returned,
	// which may be just after the client has its answer: scrape until the
	// figures settle, within the guard.
	var body string
	for deadline := time.Now().Add(guard); ; time.Sleep(10 * time.Millisecond) {
		body = scrape(t, url)
		if !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(body, w) }) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
