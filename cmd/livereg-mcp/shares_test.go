package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

// greedyFor is how long the greedy client attacks.
const greedyFor = 5 * time.Second

// minOpens is how many sessions or streams the authenticated client must
// open during the attack: in 5 s it opens hundreds when served, and none
// when starved.
const minOpens = 5

// p99 returns the 99th percentile of samples.
func p99(samples []time.Duration) time.Duration {
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*99/100]
}

// aliceWorks runs the authenticated client's work until stop closes (or n
// operations when stop is nil): a tool call and a listing in turn, and
// every tenth operation the opening of what the greedy client is after
// (open, which fails the test if refused). It returns the latency of each
// call and listing.
func aliceWorks(t *testing.T, cs *mcp.ClientSession, n int, stop <-chan struct{}, open func(i int) error) []time.Duration {
	t.Helper()
	ctx := ctxGuard(t)
	var lat []time.Duration
	for i := 0; stop != nil || i < n; i++ {
		if stop != nil {
			select {
			case <-stop:
				return lat
			default:
			}
		}
		if i%10 == 9 {
			if err := open(i); err != nil {
				t.Errorf("the authenticated client was refused: %v", err)
				return lat
			}
			continue
		}
		start := time.Now()
		var err error
		if i%2 == 0 {
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: victimName})
		} else {
			_, err = cs.ListTools(ctx, nil)
		}
		if err != nil {
			t.Errorf("the authenticated client's operation %d failed: %v", i, err)
			return lat
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// rawMCP posts one JSON-RPC message as a client without a credential
// would, and returns the response; the caller closes its body.
func rawMCP(ctx context.Context, hc *http.Client, url, session, body string, current bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if current {
		req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
		req.Header.Set("Mcp-Method", "subscriptions/listen")
	}
	return hc.Do(req)
}

const (
	greedyInit      = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"greedy","version":"1"}}}`
	greedyReady     = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	greedySubscribe = `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"livereg://about"}}`
	greedyListen    = `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
)

// greedy runs attack on 4 goroutines as fast as they can for greedyFor,
// and returns how many times it got what it asked for and was refused.
func greedy(attack func(ctx context.Context) bool) (got, refused int64) {
	ctx, cancel := context.WithTimeout(context.Background(), greedyFor)
	defer cancel()
	var wg sync.WaitGroup
	var g, r atomic.Int64
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if attack(ctx) {
					g.Add(1)
				} else {
					r.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return g.Load(), r.Load()
}

// The black-box test of the shares: a greedy anonymous client opens
// sessions and subscriptions (stateful), or listen streams (stateless), as
// fast as it can for 5 s, while an authenticated client keeps calling,
// listing, and opening sessions, subscriptions or streams of its own.
// Nothing the authenticated client asks for is refused (before the
// shares, the greedy client took every session and stream, and the other
// got 503 for minutes), the greedy client is refused, and the
// authenticated one keeps opening what it asks for throughout. The test
// judges refusals and completions, not latency: shares divide capacity,
// not CPU, and on two cores shared with other work the greedy client's
// refused requests take their cycles from everyone (a quiet p99 of
// 4.8 ms measured 23 ms attacked), which the log line reports.
func TestGreedyClientCannotStarveAnother(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "stateful"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			cfg := localConfig(aliceToken + "@alice:admin")
			cfg.stateless, cfg.maxListens = stateless, 1000
			s := startRun(t, cfg)
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			hc := &http.Client{Transport: tr}
			var held []io.Closer
			var heldMu sync.Mutex
			t.Cleanup(func() {
				for _, c := range held {
					_ = c.Close()
				}
				tr.CloseIdleConnections()
			})
			alice := connect(t, s.url, aliceToken)
			var open func(int) error
			var attack func(context.Context) bool
			if !stateless {
				if err := alice.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "livereg://about"}); err != nil {
					t.Fatal(err)
				}
				open = func(int) error {
					cs := connectErr(s.url, aliceToken)
					if cs == nil {
						return fmt.Errorf("initialize refused")
					}
					defer cs.Close()
					return cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "livereg://about"})
				}
				attack = func(ctx context.Context) bool {
					resp, err := rawMCP(ctx, hc, s.url, "", greedyInit, false)
					if err != nil {
						return false
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					id := resp.Header.Get("Mcp-Session-Id")
					if resp.StatusCode != http.StatusOK || id == "" {
						return false
					}
					for _, b := range []string{greedyReady, greedySubscribe} {
						if resp, err := rawMCP(ctx, hc, s.url, id, b, false); err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}
					return true
				}
			} else {
				open = func(int) error {
					ctx, cancel := context.WithCancel(ctxGuard(t))
					defer cancel()
					return listenAs(ctx, http.DefaultClient, s.url, aliceToken)
				}
				attack = func(ctx context.Context) bool {
					resp, err := rawMCP(ctx, hc, s.url, "", greedyListen, true)
					if err != nil {
						return false
					}
					if first := firstEvent(resp.Body); strings.Contains(first, `"error"`) || first == "" {
						resp.Body.Close()
						return false
					}
					heldMu.Lock()
					held = append(held, resp.Body)
					heldMu.Unlock()
					return true
				}
			}
			quiet := p99(aliceWorks(t, alice, 50, nil, open))
			stop := make(chan struct{})
			var got, refused int64
			attacked := make(chan struct{})
			go func() {
				defer close(attacked)
				got, refused = greedy(attack)
				close(stop)
			}()
			lat := aliceWorks(t, alice, 0, stop, open)
			<-attacked
			// Every tenth operation opens a session or a stream, which
			// aliceWorks fails the test on if refused; nine in ten are
			// timed calls and lists.
			opens := len(lat) / 9
			t.Logf("%s: greedy got %d and was refused %d times; the authenticated client did %d operations and %d opens meanwhile (p99 %v, quiet %v)",
				name, got, refused, len(lat), opens, p99(lat), quiet)
			if refused == 0 {
				t.Errorf("the greedy client was never refused")
			}
			if opens < minOpens {
				t.Errorf("the authenticated client opened %d sessions or streams during the attack, want at least %d: it was held up", opens, minOpens)
			}
		})
	}
}

// connectErr is connect without failing the test: nil if the connection
// was refused.
func connectErr(url, token string) *mcp.ClientSession {
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil
	}
	return cs
}

// listenAs opens a subscriptions/listen stream with a token and returns
// an error if it was refused; the stream ends with ctx.
func listenAs(ctx context.Context, hc *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(greedyListen))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if first := firstEvent(resp.Body); first == "" || strings.Contains(first, `"error"`) {
		return fmt.Errorf("listen refused: HTTP %d, %s", resp.StatusCode, first)
	}
	return nil
}

// firstEvent returns the first JSON-RPC message of a response, an SSE
// event's data or a JSON body; "" if none came.
func firstEvent(body io.Reader) string {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "data:"))
		if json.Valid([]byte(line)) && strings.HasPrefix(line, "{") {
			return line
		}
	}
	return ""
}
