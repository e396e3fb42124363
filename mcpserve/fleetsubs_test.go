package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

// updatesClient is a 2025-11-25 session on r's server, in memory, that
// records the URIs it is told were updated.
func updatesClient(t testing.TB, r *replica) (*mcp.ClientSession, chan string) {
	t.Helper()
	updated := make(chan string, 1024)
	cl := mcp.NewClient(&mcp.Implementation{Name: "updates-client", Version: "1"}, &mcp.ClientOptions{
		Logger: quietLogger(),
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := r.srv.MCP().Connect(ctxGuard(t), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Connect(ctxGuard(t), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, updated
}

// heard returns the next URI on ch.
func heard(t testing.TB, ch <-chan string) string {
	t.Helper()
	select {
	case uri := <-ch:
		return uri
	case <-time.After(eventGuard):
		t.Fatal("gave up waiting for resources/updated")
		return ""
	}
}

// listenFor opens a 2026-07-28 subscriptions/listen on url for uris and
// returns its acknowledgement and the URIs of the updates that follow;
// cancel ends it.
func listenFor(t testing.TB, url string, uris ...string) (ack rpcMessage, updated chan string, cancel func()) {
	t.Helper()
	ctx, end := context.WithCancel(context.Background())
	resp, err := postCtx(ctx, url, "", "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}})
	if err != nil {
		end()
		t.Fatal(err)
	}
	type message struct {
		rpcMessage
		uri string
	}
	msgs := make(chan message, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(msgs)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m message
			var p struct {
				Params struct{ URI string }
			}
			if json.Unmarshal([]byte(data), &m.rpcMessage) == nil && json.Unmarshal([]byte(data), &p) == nil {
				m.uri = p.Params.URI
				msgs <- m
			}
		}
	}()
	stop := func() { end(); <-done }
	t.Cleanup(stop)
	select {
	case m := <-msgs:
		ack = m.rpcMessage
	case <-time.After(eventGuard):
		t.Fatal("no acknowledgement")
	}
	updated = make(chan string, 1024)
	go func() {
		defer close(updated)
		for m := range msgs {
			if m.Method == "notifications/resources/updated" {
				updated <- m.uri
			}
		}
	}()
	return ack, updated, stop
}

// untilSubscribers waits until n sessions of r's follow uri.
func untilSubscribers(t testing.TB, r *replica, uri string, n int) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for r.srv.SubscribersOf(uri) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions follow %s, want %d", r.srv.SubscribersOf(uri), uri, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A session on B subscribed to a URI A serves hears A's updates, over
// resources/subscribe and over subscriptions/listen; once both leave,
// B's stream to A carries the URI no more, and the other URI it still
// carries goes on.
func TestFleetSubscribeHearsHolder(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	u := startWatched(t, a.cat, context.Background(), "test://u")
	v := startWatched(t, a.cat, context.Background(), "test://v")
	b.peers.set("resource", "test://u", a.fleet)
	b.peers.set("resource", "test://v", a.fleet)

	cs, updated := updatesClient(t, b)
	for _, uri := range []string{"test://u", "test://v"} {
		if err := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe to %s on B: %v", uri, err)
		}
	}
	ack, listened, stopListen := listenFor(t, b.url, "test://u")
	if ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("listen on B: first message %+v", ack)
	}
	// One stream, one subscription per URI, on A.
	untilListens(t, a.srv, 1)
	untilSubscribers(t, a, "test://u", 1)
	untilSubscribers(t, a, "test://v", 1)
	if err := u.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := heard(t, updated); got != "test://u" {
		t.Fatalf("the 2025 session heard of %s", got)
	}
	if got := heard(t, listened); got != "test://u" {
		t.Fatalf("the listen heard of %s", got)
	}

	if err := cs.Unsubscribe(ctxGuard(t), &mcp.UnsubscribeParams{URI: "test://u"}); err != nil {
		t.Fatal(err)
	}
	stopListen()
	untilSubscribers(t, a, "test://u", 0)
	untilSubscribers(t, a, "test://v", 1)
	if err := u.Updated(); err != nil {
		t.Fatal(err)
	}
	if err := v.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := heard(t, updated); got != "test://v" {
		t.Fatalf("heard of %s after unsubscribing from it", got)
	}
	if err := cs.Unsubscribe(ctxGuard(t), &mcp.UnsubscribeParams{URI: "test://v"}); err != nil {
		t.Fatal(err)
	}
	untilListens(t, a.srv, 0)
}

// A subscribe to a URI whose replica cannot be reached fails with
// CodePeerUnavailable, retryable, and leaves nothing recorded.
func TestFleetSubscribePeerUnavailable(t *testing.T) {
	b := newReplica(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + mcpserve.DefaultFleetPath
	_ = ln.Close()
	b.peers.set("resource", "test://far", gone)
	cs, _ := updatesClient(t, b)
	err = cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://far"})
	if rpcCode(err) != mcpserve.CodePeerUnavailable || rpcData(err)["retryable"] != true {
		t.Fatalf("subscribe to an unreachable replica's URI: %v (data %v)", err, rpcData(err))
	}
	if uris, _ := b.srv.SubscriptionTable(); uris != 0 {
		t.Fatalf("the failed subscribe left %d URIs", uris)
	}
	msg := firstMessage(t, post(t, b.url, "", "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{"test://far"}}}))
	if msg.Error == nil || msg.Error.Code != mcpserve.CodePeerUnavailable {
		t.Fatalf("listen for an unreachable replica's URI: %+v", msg)
	}
}

// When A's consumer dies and no replica serves the URI, B drops its
// subscribers (told once), here and at A; a successor's later update is
// not heard but by those who subscribe again.
func TestFleetSubscriptionDroppedWithHolder(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	ctx, kill := context.WithCancel(context.Background())
	k := startWatched(t, a.cat, ctx, "test://dies")
	v := startWatched(t, a.cat, context.Background(), "test://v")
	b.peers.set("resource", "test://dies", a.fleet)
	b.peers.set("resource", "test://v", a.fleet)
	cs, updated := updatesClient(t, b)
	for _, uri := range []string{"test://dies", "test://v"} {
		if err := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	kill()
	<-k.Done()
	// Told twice: A's last update, relayed, and B's drop. v may be told
	// too: B's stream broke when A dropped the URI, and what it carries
	// is told once it is back.
	for range 2 {
		for heard(t, updated) != "test://dies" {
		}
	}
	untilSubscribers(t, b, "test://dies", 0)
	untilSubscribers(t, a, "test://dies", 0)
	untilSubscribers(t, b, "test://v", 1)
	k2 := startWatched(t, a.cat, context.Background(), "test://dies")
	if err := k2.Updated(); err != nil {
		t.Fatal(err)
	}
	// Two updates of v: the first may be the stream's.
	for range 2 {
		if err := v.Updated(); err != nil {
			t.Fatal(err)
		}
		if got := heard(t, updated); got != "test://v" {
			t.Fatalf("heard of %s: the successor's update reached a dropped subscription", got)
		}
	}
	if err := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://dies"}); err != nil {
		t.Fatal(err)
	}
	if err := k2.Updated(); err != nil {
		t.Fatal(err)
	}
	// v may be told again: B's stream to A broke when A dropped the
	// URI, and the subscribers of what it carries are told once it is
	// back.
	for heard(t, updated) != "test://dies" {
	}
}

// When the view moves a URI from A to C, B's subscription follows it to
// C: C's updates are heard, A's no more, even while A's stream is open.
func TestFleetSubscriptionFollowsHolder(t *testing.T) {
	a, b, c := newReplica(t), newReplica(t), newReplica(t)
	ua := startWatched(t, a.cat, context.Background(), "test://moves")
	va := startWatched(t, a.cat, context.Background(), "test://v")
	b.peers.set("resource", "test://moves", a.fleet)
	b.peers.set("resource", "test://v", a.fleet)
	cs, updated := updatesClient(t, b)
	for _, uri := range []string{"test://moves", "test://v"} {
		if err := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	uc := startWatched(t, c.cat, context.Background(), "test://moves")
	b.peers.set("resource", "test://moves", c.fleet)
	// A change of B's view: here a route of its own; in a fleet, the
	// Remote's change when C's consumer started.
	startText(t, b.cat, context.Background(), "poke", "poke")
	// The move is told once C acknowledged it.
	if got := heard(t, updated); got != "test://moves" {
		t.Fatalf("the move was told as %s", got)
	}
	untilSubscribers(t, c, "test://moves", 1)
	untilSubscribers(t, a, "test://moves", 0)
	if err := ua.Updated(); err != nil {
		t.Fatal(err)
	}
	// An update of the URI in flight on A's stream (which still carries
	// v) is not delivered either.
	b.srv.RelayFrom(a.fleet, "test://moves")
	if err := va.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := heard(t, updated); got != "test://v" {
		t.Fatalf("heard of %s: the old holder's update after the move", got)
	}
	if err := uc.Updated(); err != nil {
		t.Fatal(err)
	}
	if got := heard(t, updated); got != "test://moves" {
		t.Fatalf("heard of %s, want the new holder's update", got)
	}
}

// Close ends B's streams: goleak (TestMain) finds none of their
// goroutines.
func TestFleetSubscriptionClose(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	startWatched(t, a.cat, context.Background(), "test://u")
	b.peers.set("resource", "test://u", a.fleet)
	cs, _ := updatesClient(t, b)
	if err := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: "test://u"}); err != nil {
		t.Fatal(err)
	}
	b.shut()
	untilListens(t, a.srv, 0)
}
