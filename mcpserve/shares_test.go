package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A greedy anonymous client that initializes as fast as it can holds its
// share of the sessions and no more: the authenticated client is served.
func TestSessionShareGreedyClient(t *testing.T) {
	srv := newServer(t, tokenCatalog(t), mcpserve.Options{MaxSessions: 8})
	url := serve(t, srv, false)
	served := 0
	for range 20 {
		code, _ := rawPost(t, url, initializeBody, nil)
		switch code {
		case http.StatusOK:
			served++
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("greedy initialize = %d", code)
		}
	}
	if served != 2 { // a quarter of 8
		t.Errorf("the greedy client holds %d sessions, want its share, 2", served)
	}
	if code, id := rawPost(t, url, initializeBody, bearerHeader(exposureToken)); code != http.StatusOK || id == "" {
		t.Fatalf("the authenticated client's initialize = %d, want 200", code)
	}
	if n := srv.Stats().Sessions.RefusedOverShare; n != 18 {
		t.Errorf("share refusals = %d, want 18", n)
	}
	if n := srv.Stats().Sessions.RefusedAtCap; n != 0 {
		t.Errorf("cap refusals = %d, want 0", n)
	}
}

// A refusal answers 503 with Retry-After, as at the cap, and says why.
func TestSessionShareRefusal(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{MaxSessions: 4})
	url := serve(t, srv, false)
	if code, _ := rawPost(t, url, initializeBody, nil); code != http.StatusOK {
		t.Fatalf("first initialize = %d", code)
	}
	req, _ := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(b.String(), "share") {
		t.Errorf("over the share: %d, Retry-After %q, %q", resp.StatusCode, resp.Header.Get("Retry-After"), b.String())
	}
}

// listenOnce opens a subscriptions/listen stream over plain HTTP and
// reports the JSON-RPC error code it was refused with, or 0 when the
// stream was admitted (it then stays open until the test ends).
func listenOnce(t *testing.T, url, token string) int64 {
	t.Helper()
	resp := post(t, url, token, "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
	t.Cleanup(func() { resp.Body.Close() })
	first := make(chan rpcMessage, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "data:")
			var m rpcMessage
			if json.Unmarshal([]byte(strings.TrimSpace(line)), &m) == nil && (m.Error != nil || m.Method != "" || m.Result != nil) {
				first <- m
				return
			}
		}
		close(first)
	}()
	select {
	case m, ok := <-first:
		if ok && m.Error != nil {
			return m.Error.Code
		}
		return 0
	case <-time.After(hangGuard):
		t.Fatal("no answer to subscriptions/listen")
		return 0
	}
}

// A greedy anonymous client holds its share of the listen streams; the
// authenticated client still opens one.
func TestListenShareGreedyClient(t *testing.T) {
	cat := tokenCatalog(t)
	f := newStateless(t, cat, mcpserve.Options{MaxListenStreams: 8})
	admitted := 0
	for range 6 {
		switch code := listenOnce(t, f.http.URL, ""); code {
		case 0:
			admitted++
		case mcpserve.CodeOverloaded:
		default:
			t.Fatalf("greedy listen refused with %d", code)
		}
	}
	if admitted != 2 {
		t.Errorf("the greedy client holds %d streams, want its share, 2", admitted)
	}
	if code := listenOnce(t, f.http.URL, exposureToken); code != 0 {
		t.Fatalf("the authenticated client's listen refused with %d", code)
	}
	if n := f.srv.Stats().ListenStreams.RefusedOverShare; n != 4 {
		t.Errorf("share refusals = %d, want 4", n)
	}
}

// subscriberOver connects an SDK client of 2025-11-25 over streamable HTTP
// with a bearer token.
func subscriberOver(t *testing.T, f *fixture, token string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "subscriber", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
		Endpoint: f.http.URL, HTTPClient: bearerClient(token), MaxRetries: -1, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A greedy anonymous client holds its share of the subscriptions, over as
// many sessions as it likes; the authenticated client still subscribes.
func TestSubscriptionShareGreedyClient(t *testing.T) {
	cat := tokenCatalog(t)
	f := newFixture(t, cat, mcpserve.Options{MaxSubscriptions: 8})
	for i := range 10 {
		startWatched(t, cat, context.Background(), fmt.Sprintf("test://r%d", i))
	}
	ctx := ctxGuard(t)
	held := 0
	for range 3 {
		cs := subscriberOver(t, f, "")
		for i := range 10 {
			err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("test://r%d", i)})
			switch {
			case err == nil:
				held++
			case rpcCode(err) != mcpserve.CodeOverloaded:
				t.Fatalf("greedy subscribe: %v", err)
			}
		}
	}
	if held != 2 {
		t.Errorf("the greedy client holds %d subscriptions, want its share, 2", held)
	}
	alice := subscriberOver(t, f, exposureToken)
	if err := alice.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://r9"}); err != nil {
		t.Fatalf("the authenticated client's subscribe: %v", err)
	}
	if st := f.srv.Stats().Subscriptions; st.Held != 3 {
		t.Errorf("Stats().Subscriptions = %+v, want 3 held", st)
	}
}

// Beyond MaxSubscriptionsPerSession a subscribe to a new URI is refused
// with a clear error and changes nothing; a subscribe again to a URI held
// is not a new one, and an unsubscribe makes room.
func TestSubscriptionsPerSessionCap(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{MaxSubscriptionsPerSession: 3})
	for i := range 4 {
		startWatched(t, cat, context.Background(), fmt.Sprintf("test://r%d", i))
	}
	c := f.connectSurface(memoryLegacy)
	ctx := ctxGuard(t)
	for i := range 3 {
		if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("test://r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://r3"})
	if rpcCode(err) != mcpserve.CodeOverloaded || rpcData(err)["reason"] != "too_many_subscriptions" || !strings.Contains(err.Error(), "3 subscriptions") {
		t.Fatalf("a fourth subscribe = %v (data %v), want CodeOverloaded, too_many_subscriptions", err, rpcData(err))
	}
	if n := f.srv.SubscribersOf("test://r3"); n != 0 {
		t.Errorf("the refused URI has %d subscribers", n)
	}
	if st := f.srv.Stats(); st.Subscriptions.Held != 3 || st.MaxSubscriptionsPerSession != 3 {
		t.Errorf("Stats = %+v", st)
	}
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://r0"}); err != nil {
		t.Errorf("subscribing again to a URI held: %v", err)
	}
	if err := c.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://r0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://r3"}); err != nil {
		t.Errorf("after an unsubscribe: %v", err)
	}
	if n := f.srv.Stats().Subscriptions.RefusedPerSession; n != 1 {
		t.Errorf("per-session refusals = %d, want 1", n)
	}
}

// The share options are validated.
func TestShareOptionsValidated(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for _, o := range []mcpserve.Options{{ClientShare: -0.1}, {ClientShare: 1.5}, {AnonymousShare: 2}, {AnonymousShare: -1}} {
		if _, err := mcpserve.New(cat, o); !errors.Is(err, mcpserve.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// Refusals are logged at most once a second per cap, and the next line
// says how many were left out.
func TestRefusalLogsRateLimited(t *testing.T) {
	var logs lockedBuffer
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{MaxSessions: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	url := serve(t, srv, false)
	var now atomic.Int64 // the fake clock, in nanoseconds
	now.Store(time.Now().UnixNano())
	mcpserve.SetRefusalClock(t, func() time.Time { return time.Unix(0, now.Load()) })
	for range 21 {
		rawPost(t, url, initializeBody, nil)
	}
	if got := logs.lines("sessions refused"); len(got) != 1 {
		t.Fatalf("20 refusals within a second logged %d lines: %q", len(got), got)
	}
	now.Add(int64(1100 * time.Millisecond))
	rawPost(t, url, initializeBody, nil)
	got := logs.lines("sessions refused")
	if len(got) < 2 || !strings.Contains(got[len(got)-1], "suppressed=") || strings.Contains(got[len(got)-1], "suppressed=0") {
		t.Errorf("the line after a quiet second: %q, want a count of those left out", got)
	}
	if n := srv.Stats().Sessions.RefusedAtCap + srv.Stats().Sessions.RefusedOverShare; n != 21 {
		t.Errorf("%d refusals counted, want 21", n)
	}
}
