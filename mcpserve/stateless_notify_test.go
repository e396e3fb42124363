package mcpserve_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// Every death path, and the restart that follows: a client of the current
// revision is told over subscriptions/listen, the route leaves the listing,
// a call gets -32602, and the successor's answer follows.
func TestStatelessDeathPathsNotify(t *testing.T) {
	for _, dp := range deathPaths {
		t.Run(dp.name, func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newStateless(t, cat, mcpserve.Options{})
			c := f.connectCurrent("")
			public := bindsec.Plan{Public: true}
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			a, err := cat.StartTool(ctxA, catalog.Tool{Name: "victim"}, public, victimHandler("A"))
			if err != nil {
				t.Fatal(err)
			}
			wait(t, c.tools, "list_changed for the start")
			if res, err := call(t, c, "victim"); err != nil || text(t, res) != "A" {
				t.Fatalf("call A = %+v, %v", res, err)
			}
			dp.kill(t, c, &a, cancelA)
			wait(t, c.tools, "list_changed for the death")
			if names := toolNames(t, c); slices.Contains(names, "victim") {
				t.Fatalf("tools/list after the death = %v", names)
			}
			if _, err := call(t, c, "victim"); rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("call after the death: err = %v, want -32602", err)
			}
			b, err := cat.StartTool(context.Background(), catalog.Tool{Name: "victim"}, public, victimHandler("B"))
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			defer func() { _ = b.Stop(context.Background()) }()
			wait(t, c.tools, "list_changed for the restart")
			if res, err := call(t, c, "victim"); err != nil || text(t, res) != "B" {
				t.Fatalf("call B = %+v, %v", res, err)
			}
		})
	}
}

// A death after the coalescing window, which only the catalog's Changes
// channel can carry (no request pokes the notifier), reaches a client of
// the current revision too.
func TestStatelessDeathAfterWindowNotifies(t *testing.T) {
	for _, dp := range lateDeathPaths {
		t.Run(dp.name, func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			creator := goroutineID()
			f := newStateless(t, cat, mcpserve.Options{})
			c := f.connectCurrent("")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			k, err := cat.StartTool(ctx, catalog.Tool{Name: "victim"}, bindsec.Plan{Public: true}, victimHandler("A"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if k != nil {
					_ = k.Stop(context.Background())
				}
			}()
			wait(t, c.tools, "list_changed for the start")
			awaitNotifierIdle(t, creator)
			dp.kill(t, cat, &k, cancel)
			wait(t, c.tools, "list_changed for the "+dp.name+" after the window")
			if names := toolNames(t, c); slices.Contains(names, "victim") {
				t.Fatalf("tools/list after the death = %v", names)
			}
		})
	}
}

// A resource's death and restart reach a client of the current revision as
// resources/list_changed.
func TestStatelessResourceDeathNotifies(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newStateless(t, cat, mcpserve.Options{})
	c := f.connectCurrent("")
	res := catalog.Resource{URI: "test://r", Name: "r"}
	reader := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: "x"}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	a, err := cat.StartResource(ctx, res, bindsec.Plan{Public: true}, reader)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c.resources, "resources/list_changed for the start")
	cancel()
	wait(t, a.Done(), "the owner to die")
	wait(t, c.resources, "resources/list_changed for the death")
	if lr, err := c.ListResources(ctxGuard(t), nil); err != nil || len(lr.Resources) != 0 {
		t.Fatalf("resources/list after the death = %+v, %v", lr, err)
	}
}

// A restart storm costs a client of the current revision one notification
// per window, as it does a legacy session.
func TestStatelessStormCoalesced(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	win := newHeldWindow()
	srv, err := mcpserve.NewWithWindow(cat, mcpserve.Options{Logger: quietLogger(), Stateless: true}, win.wait)
	if err != nil {
		t.Fatal(err)
	}
	f := wrapFixture(t, cat, srv)
	c := f.connectCurrent("")
	public := bindsec.Plan{Public: true}
	handler := func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("x"), nil }
	first, err := cat.StartTool(context.Background(), catalog.Tool{Name: "first"}, public, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Stop(context.Background()) }()
	wait(t, win.entered, "the first window")
	wait(t, c.tools, "the first notification")
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		k, err := cat.StartTool(ctx, catalog.Tool{Name: "storm"}, public, handler)
		if err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		if i%2 == 0 {
			_ = k.Stop(context.Background())
		}
		cancel()
		<-k.Done()
	}
	if st := cat.Stats(); st.ToolSlots != 1 {
		t.Fatalf("after the storm the catalog holds %d tool slots, want 1", st.ToolSlots)
	}
	win.end <- struct{}{}
	wait(t, win.entered, "the second window")
	wait(t, c.tools, "the storm's notification")
	// Nothing changes in the second window; give a wrong send time to
	// arrive (past the SDK's 10ms debounce) before counting.
	win.end <- struct{}{}
	time.Sleep(100 * time.Millisecond)
	if n := len(c.tools); n != 0 {
		t.Errorf("the client received %d notifications more than one per window", n)
	}
}

// In stateless mode every request is a session of the SDK's own, whose
// lifecycle it logs at INFO; those records are demoted to DEBUG, so that
// a busy server's log is not three lines per request.
func TestStatelessDemotesSessionLifecycleLogs(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	sink := newLogSink()
	f := newStateless(t, cat, mcpserve.Options{Logger: slog.New(sink)})
	// Through the SDK's path, where every request is a session (the fast
	// path makes none).
	mcpserve.NoFastPath(f.srv)
	toolNames(t, f.connectCurrent(""))
	for _, msg := range []string{"server connecting", "server session connected", "server session disconnected"} {
		// A session's end is logged once its request has been answered,
		// a moment after the client read the answer.
		waitUntil(t, fmt.Sprintf("%q logged at DEBUG", msg), func() bool { return sink.has(slog.LevelDebug, msg) })
		if sink.has(slog.LevelInfo, msg) {
			t.Errorf("%q logged at INFO", msg)
		}
	}
}

// A change while a legacy client's call is in flight on a stateless
// server, whose request has no stream to carry list_changed, logs no
// warning, and the call and the current client's notification both
// arrive. Over the SDK's path the SDK made the call a session of its
// own and its undelivered notification is logged at DEBUG; the fast path
// makes none.
func TestStatelessLegacyCallDuringChangeWarnsNothing(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(map[bool]string{false: "sdk", true: "fast"}[fast], func(t *testing.T) {
			legacyCallDuringChange(t, fast)
		})
	}
}

func legacyCallDuringChange(t *testing.T, fast bool) {
	cat := newCatalog(t, catalog.Config{})
	sink := newLogSink()
	f := newStateless(t, cat, mcpserve.Options{Logger: slog.New(sink)})
	if !fast {
		mcpserve.NoFastPath(f.srv)
	}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			<-release
			return catalog.TextResult("done"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	legacy, current := f.connectAt(legacyVersion, ""), f.connectCurrent("")
	answered := make(chan string, 1)
	go func() {
		res, err := call(t, legacy, "slow")
		if err != nil {
			t.Errorf("the legacy call: %v", err)
			answered <- ""
			return
		}
		answered <- text(t, res)
	}()
	wait(t, entered, "the legacy call to reach the body")
	startText(t, cat, context.Background(), "other", "x")
	// The current client hears of it: the notification has gone out to
	// every session, the legacy call's among them.
	wait(t, current.tools, "list_changed for the start")
	if !fast {
		// The SDK tells its own sessions one after another, after the
		// current client's stream has had it: wait for the legacy call's
		// turn while that call still holds its session open.
		waitUntil(t, "the undelivered list_changed logged at DEBUG", func() bool {
			return sink.has(slog.LevelDebug, "undelivered message")
		})
	}
	close(release)
	if got := <-answered; got != "done" {
		t.Errorf("the legacy call answered %q", got)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, r := range sink.records {
		if r.Level >= slog.LevelWarn {
			t.Errorf("logged at %v: %s", r.Level, r.Message)
		}
	}
}
