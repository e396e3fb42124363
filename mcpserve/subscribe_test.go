package mcpserve_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

func startWatched(t testing.TB, cat *catalog.Catalog, ctx context.Context, uri string) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartResource(ctx, catalog.Resource{URI: uri}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: uri}, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

// nextUpdate returns the next URI the client was told was updated.
func nextUpdate(t testing.TB, c *surfaceClient) string {
	t.Helper()
	select {
	case uri := <-c.updated:
		return uri
	case <-time.After(eventGuard):
		t.Fatal("gave up waiting for resources/updated")
		return ""
	}
}

// subscribeTransports are those whose client sends resources/subscribe
// (2025-11-25) or subscribes on its listen stream (2026-07-28).
var subscribeTransports = []transport{memoryLegacy, memory, streamable}

func TestSubscribeToUnservedURI(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	c := f.connectSurface(memoryLegacy)
	err := c.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://nobody"})
	if rpcCode(err) != jsonrpc.CodeInvalidParams { // the specification's resource-not-found code
		t.Fatalf("subscribe to a URI nobody serves: %v", err)
	}
	if uris, sessions := f.srv.SubscriptionTable(); uris != 0 || sessions != 0 {
		t.Fatalf("the refused subscription left %d URIs, %d sessions", uris, sessions)
	}
	if !c.InitializeResult().Capabilities.Resources.Subscribe {
		t.Fatal("subscriptions are not advertised")
	}
}

func TestSubscribeOnlySubscribersHear(t *testing.T) {
	for _, tr := range subscribeTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{})
			u := startWatched(t, cat, context.Background(), "test://u")
			v := startWatched(t, cat, context.Background(), "test://v")
			a, b := f.connectSurface(tr), f.connectSurface(tr)
			ctx := ctxGuard(t)
			if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://u"}); err != nil {
				t.Fatal(err)
			}
			if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://v"}); err != nil {
				t.Fatal(err)
			}
			awaitTable(t, f, 2, 2)
			if err := u.Updated(); err != nil {
				t.Fatal(err)
			}
			if got := nextUpdate(t, a); got != "test://u" {
				t.Fatalf("a heard of %s", got)
			}
			if err := v.Updated(); err != nil {
				t.Fatal(err)
			}
			// b hears of v first: it never heard of u, which it did not
			// follow.
			if got := nextUpdate(t, b); got != "test://v" {
				t.Fatalf("b heard of %s first", got)
			}
			if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://u"}); err != nil {
				t.Fatal(err)
			}
			if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://v"}); err != nil {
				t.Fatal(err)
			}
			awaitSubscribers(t, f, "test://u", 0)
			awaitSubscribers(t, f, "test://v", 2)
			if err := u.Updated(); err != nil {
				t.Fatal(err)
			}
			if err := v.Updated(); err != nil {
				t.Fatal(err)
			}
			if got := nextUpdate(t, a); got != "test://v" {
				t.Fatalf("a heard of %s after it unsubscribed from it", got)
			}
		})
	}
}

// awaitTable waits until the subscription table holds uris URIs and
// sessions sessions: a 2026-07-28 client's subscribe returns before the
// server has recorded it.
func awaitTable(t testing.TB, f *fixture, uris, sessions int) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for {
		u, s := f.srv.SubscriptionTable()
		if u == uris && s == sessions {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscription table holds %d URIs and %d sessions, want %d and %d", u, s, uris, sessions)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitSubscribers waits until n sessions follow uri.
func awaitSubscribers(t testing.TB, f *fixture, uri string, n int) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for f.srv.SubscribersOf(uri) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions follow %s, want %d", f.srv.SubscribersOf(uri), uri, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// When the owner dies, a subscriber hears once: updated, then the list
// changed; and the subscription is gone.
func TestSubscribeOwnerDeath(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	k := startWatched(t, cat, ctx, "test://dies")
	v := startWatched(t, cat, context.Background(), "test://v")
	c := f.connectSurface(memoryLegacy)
	if err := c.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://dies"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://v"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-k.Done()
	if got := nextUpdate(t, c); got != "test://dies" {
		t.Fatalf("heard of %s", got)
	}
	wait(t, c.resources, "resources list_changed after the update")
	awaitTable(t, f, 1, 1)
	// A restart later finds no subscriber: the client, told it was gone,
	// subscribes again if it wants. Nor does the SDK's table keep it: a
	// new subscriber's update reaches the new subscriber alone.
	k2 := startWatched(t, cat, context.Background(), "test://dies")
	if err := k2.Updated(); err != nil {
		t.Fatal(err)
	}
	d := f.connectSurface(memoryLegacy)
	if err := d.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://dies"}); err != nil {
		t.Fatal(err)
	}
	if err := k2.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, d); got != "test://dies" {
		t.Fatalf("the new subscriber heard of %s", got)
	}
	if err := v.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, c); got != "test://v" {
		t.Fatalf("heard of %s: told twice, or kept after the death", got)
	}
}

// Thousands of sessions subscribe and go away: the table keeps nothing of
// them.
func TestSubscriptionTableDoesNotLeak(t *testing.T) {
	const sessions, uris = 2000, 10
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	for i := range uris {
		startWatched(t, cat, context.Background(), fmt.Sprintf("test://r%d", i))
	}
	ctx := ctxGuard(t)
	for i := range sessions {
		c := f.connectSurface(memoryLegacy)
		if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("test://r%d", i%uris)}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := c.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: fmt.Sprintf("test://r%d", i%uris)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	awaitTable(t, f, 0, 0)
}

// A restart by another consumer that takes the URI over before the death
// is seen keeps the subscriptions: a subscriber hears one updated, and
// then the successor's updates.
func TestSubscriptionSurvivesTakeover(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	win := newHeldWindow()
	srv, err := mcpserve.NewWithWindow(cat, mcpserve.Options{Logger: quietLogger()}, win.wait)
	if err != nil {
		t.Fatal(err)
	}
	f := wrapFixture(t, cat, srv)
	ctx, cancel := context.WithCancel(context.Background())
	first := startWatched(t, cat, ctx, "test://kept")
	c := f.connectSurface(memoryLegacy)
	if err := c.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://kept"}); err != nil {
		t.Fatal(err)
	}
	// A change opens a window, which the test holds while the owner dies
	// and a successor takes the URI.
	startWatched(t, cat, context.Background(), "test://other")
	wait(t, win.entered, "a coalescing window")
	cancel()
	<-first.Done()
	second := startWatched(t, cat, context.Background(), "test://kept")
	win.end <- struct{}{}
	if got := nextUpdate(t, c); got != "test://kept" {
		t.Fatalf("heard of %s", got)
	}
	awaitTable(t, f, 1, 1)
	if err := second.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, c); got != "test://kept" {
		t.Fatalf("heard of %s", got)
	}
	// The takeover was told once: a later change of the resources, while
	// the successor still serves the URI, tells the subscriber nothing.
	// Once the notifier has entered the window after that change, any
	// updated of its reconcile is on the wire; a ping the server sends
	// then is answered after the client has handled it.
	wait(t, win.entered, "the window of the takeover's notification")
	startWatched(t, cat, context.Background(), "test://third")
	win.end <- struct{}{}
	wait(t, win.entered, "the window of the third resource's notification")
	for ss := range srv.MCP().Sessions() {
		if err := ss.Ping(ctxGuard(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case uri := <-c.updated:
		t.Fatalf("heard of %s again after a change that did not touch it", uri)
	default:
	}
	// The takeover filed the URI under its successor: the successor's
	// death is told too.
	win.end <- struct{}{}
	if err := second.Stop(ctxGuard(t)); err != nil {
		t.Fatal(err)
	}
	wait(t, win.entered, "the window of the successor's death")
	win.end <- struct{}{}
	if got := nextUpdate(t, c); got != "test://kept" {
		t.Fatalf("after the successor's death, heard of %s", got)
	}
}

// A subscription that the table drops while the SDK is still recording it
// (here an unsubscribe of the same session's, run in between) leaves the
// SDK's table too, and the client is told the resource is not found:
// otherwise it would hold a subscription that this table never tells of.
func TestSubscribeDroppedWhileRecorded(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	u := startWatched(t, cat, context.Background(), "test://u")
	v := startWatched(t, cat, context.Background(), "test://v")
	var once sync.Once
	f.srv.SetSubscribeRecorded(func(_ string, unsubscribe func()) { once.Do(unsubscribe) })
	c := f.connectSurface(memoryLegacy)
	ctx := ctxGuard(t)
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://u"}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("a subscription dropped while the SDK recorded it = %v, want resource not found", err)
	}
	// Neither table holds it: another subscriber's update reaches that
	// subscriber alone.
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://v"}); err != nil {
		t.Fatal(err)
	}
	d := f.connectSurface(memoryLegacy)
	if err := d.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://u"}); err != nil {
		t.Fatal(err)
	}
	if err := u.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, d); got != "test://u" {
		t.Fatalf("the subscriber heard of %s", got)
	}
	if err := v.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, c); got != "test://v" {
		t.Fatalf("heard of %s, whose subscription was refused", got)
	}
}

// A consumer restarts on a dead owner's URI, and a new client subscribes
// to it, at the worst moment: the URI has left the server's table, and
// its old subscribers are still in the SDK's. The new subscription waits
// until they are forgotten there, so the successor's update reaches the
// new subscriber alone, never the old one, who was told the URI is gone.
func TestSubscribeOwnerDeathRacesARestart(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	k := startWatched(t, cat, ctx, "test://dies")
	c := f.connectSurface(memoryLegacy)
	if err := c.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://dies"}); err != nil {
		t.Fatal(err)
	}
	d := f.connectSurface(memoryLegacy)
	var k2 *catalog.Consumer
	subscribed := make(chan error, 1)
	restore := mcpserve.SetRecheckDroppedHook(func() {
		k2 = startWatched(t, cat, context.Background(), "test://dies")
		go func() { subscribed <- d.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://dies"}) }()
		select {
		case err := <-subscribed:
			// Recorded while the SDK's table still holds c: an update
			// now would reach c. Send one, and give it time to go out.
			subscribed <- err
			_ = k2.Updated()
			time.Sleep(100 * time.Millisecond)
		case <-time.After(100 * time.Millisecond):
			// Waiting for the re-check to finish, as it must.
		}
	})
	t.Cleanup(restore)
	cancel()
	<-k.Done()
	if got := nextUpdate(t, c); got != "test://dies" {
		t.Fatalf("heard of %s", got)
	}
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	if err := k2.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, d); got != "test://dies" {
		t.Fatalf("the new subscriber heard of %s", got)
	}
	select {
	case uri := <-c.updated:
		t.Fatalf("the subscriber told %s was gone heard of it again, from its successor", uri)
	case <-time.After(100 * time.Millisecond):
	}
}
