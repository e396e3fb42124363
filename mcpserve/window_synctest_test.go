package mcpserve_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// TestNotifyWindowOnFakeClock follows the default coalescing window on
// synctest's clock, which moves only once every goroutine of the test
// waits: the first change of a quiet catalog goes out at once, the
// changes of the next 50 ms go out together when the window ends, and a
// window with nothing in it sends nothing. The times are exact, so a
// window that is shorter, longer, or restarted by each change fails, and
// so does any notification more. (Each arrives 10 ms after it is sent:
// the SDK debounces list_changed by that much.)
func TestNotifyWindowOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cat := newCatalog(t, catalog.Config{})
		srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })

		var (
			mu    sync.Mutex
			start time.Time
			at    []time.Duration
		)
		c := connectInMemory(t, srv)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-c.tools:
					mu.Lock()
					at = append(at, time.Since(start))
					mu.Unlock()
				case <-done:
					return
				}
			}
		}()
		synctest.Wait()

		mu.Lock()
		start = time.Now()
		mu.Unlock()
		startText(t, cat, t.Context(), "a", "a") // t=0: sent at once, opens a window
		time.Sleep(20 * time.Millisecond)
		startText(t, cat, t.Context(), "b", "b") // t=20ms: held for the window's end
		time.Sleep(20 * time.Millisecond)
		startText(t, cat, t.Context(), "c", "c") // t=40ms: the same window
		time.Sleep(time.Second)                  // the window at 50ms, then twenty quiet ones' worth

		mu.Lock()
		defer mu.Unlock()
		want := []time.Duration{10 * time.Millisecond, 60 * time.Millisecond} // the window is 50 ms by default
		if !slices.Equal(at, want) {
			t.Errorf("tools/list_changed arrived at %v, want %v", at, want)
		}
	})
}

// connectInMemory connects a 2025-11-25 client to srv over in-memory
// transports, which a synctest bubble can hold (a loopback listener it
// cannot), and closes it at the end of the test. Its list_changed
// notifications arrive on its channels.
func connectInMemory(t *testing.T, srv *mcpserve.Server) *client {
	t.Helper()
	c := &client{tools: make(chan struct{}, 64), resources: make(chan struct{}, 64)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		Logger:                     quietLogger(),
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { c.tools <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.resources <- struct{}{} },
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.MCP().Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	c.ClientSession = cs
	t.Cleanup(func() { _ = cs.Close() })
	return c
}
