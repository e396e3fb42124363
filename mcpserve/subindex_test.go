package mcpserve_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// Re-checking after a death costs what the death touched: with 10,000
// subscriptions to URIs of a living template and one to a resource whose
// owner dies, the re-check looks up one URI.
func TestRecheckCostProportional(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{MaxSubscriptionsPerSession: -1, MaxSubscriptions: -1})
	startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"}, varsReader("t"))
	ctx, cancel := context.WithCancel(context.Background())
	k := startWatched(t, cat, ctx, "test://dies")
	c := f.connectSurface(memoryLegacy)
	gctx := ctxGuard(t)
	for i := range n {
		if err := c.Subscribe(gctx, &mcp.SubscribeParams{URI: fmt.Sprintf("test://t/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Subscribe(gctx, &mcp.SubscribeParams{URI: "test://dies"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-k.Done()
	if got := nextUpdate(t, c); got != "test://dies" {
		t.Fatalf("heard of %s", got)
	}
	awaitTable(t, f, n, 1)
	if st := f.srv.Stats(); st.Rechecked != 1 || st.Subscriptions.Held != int64(n) {
		t.Errorf("after one death among %d subscriptions: %+v, want 1 URI re-checked", n+1, st)
	}
}

// A re-check parked in the middle of its lookups holds up nothing: a
// tools list_changed goes out, a subscribe is answered, and another
// resource's update is delivered.
func TestRecheckHoldsNoLock(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	k := startWatched(t, cat, ctx, "test://dies")
	other := startWatched(t, cat, context.Background(), "test://other")
	startWatched(t, cat, context.Background(), "test://later")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer mcpserve.SetRecheckHook(func(string) {
		once.Do(func() { close(entered) })
		<-release
	})()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	c := f.connectSurface(memoryLegacy)
	lc := f.connect(memoryLegacy, "")
	gctx := ctxGuard(t)
	for _, uri := range []string{"test://dies", "test://other"} {
		if err := c.Subscribe(gctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-k.Done()
	wait(t, entered, "the re-check of the dead owner's URI")
	startText(t, cat, context.Background(), "fresh", "hi")
	wait(t, lc.tools, "tools list_changed while a re-check is parked")
	if err := c.Subscribe(gctx, &mcp.SubscribeParams{URI: "test://later"}); err != nil {
		t.Fatalf("subscribe while a re-check is parked: %v", err)
	}
	if err := other.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, c); got != "test://other" {
		t.Fatalf("heard of %s while the re-check is parked", got)
	}
	close(release)
	if got := nextUpdate(t, c); got != "test://dies" {
		t.Fatalf("heard of %s", got)
	}
}

// 40 sessions with 100 subscriptions each (to 256-byte URIs of a
// template) delay nobody's resources list_changed beyond its window: the
// p99 of the delay from a change to each session's notification stays
// within the window plus a slack for a loaded machine.
func TestListChangedDelayUnderSubscriptions(t *testing.T) {
	const sessions, perSession, rounds = 40, 100, 30
	const window = mcpserve.DefaultNotifyWindow
	const slack = 250 * time.Millisecond // 2 shared cores under -race
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"}, varsReader("t"))
	got := make(chan time.Time, sessions*rounds*2)
	gctx := ctxGuard(t)
	for s := range sessions {
		cl := mcp.NewClient(&mcp.Implementation{Name: "lc", Version: "1"}, &mcp.ClientOptions{
			Logger:                     quietLogger(),
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { got <- time.Now() },
		})
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.srv.MCP().Connect(gctx, st, nil); err != nil {
			t.Fatal(err)
		}
		cs, err := cl.Connect(gctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		for i := range perSession {
			id := fmt.Sprintf("%d-%d-", s, i)
			uri := "test://t/" + id + strings.Repeat("x", 256-len("test://t/")-len(id))
			if err := cs.Subscribe(gctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := f.srv.Stats(); st.Subscriptions.Held != sessions*perSession {
		t.Fatalf("%+v, want %d held", st, sessions*perSession)
	}
	var delays []time.Duration
	for r := range rounds {
		start := time.Now()
		k := startWatched(t, cat, context.Background(), fmt.Sprintf("test://change/%d", r))
		for range sessions {
			select {
			case at := <-got:
				delays = append(delays, at.Sub(start))
			case <-time.After(hangGuard):
				t.Fatalf("round %d: a session heard no list_changed", r)
			}
		}
		_ = k.Stop(context.Background())
		// The stop is a change too: let its notification pass, and the
		// window after it close, so that each round starts afresh.
		for range sessions {
			<-got
		}
		time.Sleep(window + 10*time.Millisecond)
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	p99 := delays[len(delays)*99/100]
	t.Logf("list_changed delay over %d notifications: p50 %v, p99 %v, max %v", len(delays), delays[len(delays)/2], p99, delays[len(delays)-1])
	if p99 > window+slack {
		t.Errorf("p99 list_changed delay %v, want within the window %v plus %v", p99, window, slack)
	}
}
