package mcpserve_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// heldWindow is a coalescing window that ends only when the test says so.
type heldWindow struct {
	entered chan struct{} // a value each time the notifier starts a window
	end     chan struct{} // a value ends the current window
}

func newHeldWindow() *heldWindow {
	return &heldWindow{entered: make(chan struct{}, 16), end: make(chan struct{})}
}

func (h *heldWindow) wait(stop <-chan struct{}) bool {
	h.entered <- struct{}{}
	select {
	case <-h.end:
		return true
	case <-stop:
		return false
	}
}

// A restart storm of 1,000 consumers, with deaths by Stop and by
// cancellation, costs each client one notification: the one that ends the
// window, not one per change.
func TestRestartStormCoalesced(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	win := newHeldWindow()
	srv, err := mcpserve.NewWithWindow(cat, mcpserve.Options{Logger: quietLogger()}, win.wait)
	if err != nil {
		t.Fatal(err)
	}
	f := wrapFixture(t, cat, srv)
	var sent atomic.Int64 // tools/list_changed sent, all sessions together
	srv.MCP().AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/tools/list_changed" {
				sent.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	clients := []*client{f.connect(memory, ""), f.connect(memoryLegacy, ""), f.connect(streamable, "")}

	public := bindsec.Plan{Public: true}
	handler := func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("x"), nil }
	first, err := cat.StartTool(context.Background(), catalog.Tool{Name: "first"}, public, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Stop(context.Background()) }()
	// The first change is sent at once, and opens a window.
	wait(t, win.entered, "the first window")
	for _, c := range clients {
		wait(t, c.tools, "the first notification")
	}

	for i := range 1000 {
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

	// Reclaim the storm's last dead entries now, inside this window: left
	// to the consumers' goroutines, a reclaim could land in the next one
	// and be, rightly, a change of its own.
	if st := cat.Stats(); st.ToolSlots != 1 {
		t.Fatalf("after the storm the catalog holds %d tool slots, want 1", st.ToolSlots)
	}
	// Ending the window sends the whole storm as one notification and
	// opens the next window.
	win.end <- struct{}{}
	wait(t, win.entered, "the second window")
	for _, c := range clients {
		wait(t, c.tools, "the storm's notification")
		if names := toolNames(t, c); len(names) != 1 || names[0] != "first" {
			t.Errorf("tools/list after the storm = %v", names)
		}
	}
	// Nothing changed during the second window: ending it sends nothing.
	// A wrong send would reach the wire only after the SDK's own 10ms
	// debounce, so give it well over that before closing and counting.
	win.end <- struct{}{}
	time.Sleep(100 * time.Millisecond)
	_ = srv.Close()
	if got, want := sent.Load(), int64(2*len(clients)); got != want {
		t.Errorf("%d tools/list_changed notifications sent to %d sessions, want %d", got, len(clients), want)
	}
	for _, c := range clients {
		if n := len(c.tools); n != 0 {
			t.Errorf("a client received %d extra notifications", n)
		}
	}
}
