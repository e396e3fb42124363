package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// lateDeathPaths kill a consumer without sending any request to the server:
// a request would poke the notifier after its lookup, and that poke, not
// the catalog's Changes, could carry the death. Each returns once the
// consumer's owner is dead.
var lateDeathPaths = []struct {
	name string
	kill func(t *testing.T, cat *catalog.Catalog, k **catalog.Consumer, cancel context.CancelFunc)
}{
	{"stop", func(t *testing.T, _ *catalog.Catalog, k **catalog.Consumer, _ context.CancelFunc) {
		if err := (*k).Stop(ctxGuard(t)); err != nil {
			t.Fatal(err)
		}
	}},
	{"cancel", func(t *testing.T, _ *catalog.Catalog, k **catalog.Consumer, cancel context.CancelFunc) {
		cancel()
		wait(t, (*k).Done(), "the cancelled owner to die")
	}},
	{"panic", func(t *testing.T, cat *catalog.Catalog, k **catalog.Consumer, _ context.CancelFunc) {
		// Through the catalog, not the server: see above.
		_, err := cat.CallTool(ctxGuard(t), "victim", json.RawMessage(`{"panic":true}`), "")
		if !errors.Is(err, catalog.ErrRoutePanicked) {
			t.Fatalf("panicking call: err = %v, want ErrRoutePanicked", err)
		}
		wait(t, (*k).Done(), "the unwound owner to die")
	}},
	{"drop", func(t *testing.T, _ *catalog.Catalog, k **catalog.Consumer, _ context.CancelFunc) {
		done := (*k).Done()
		*k = nil // the only reference: the token is collected at a GC
		gcUntil(t, done)
	}},
}

// A death that comes after the coalescing window has closed, when the
// notifier is idle and only the catalog's Changes channel can wake it,
// reaches every client as a list_changed within the window plus a margin,
// and the next listing no longer shows the route. Every transport, every
// death path.
//
// It catches a catalog whose deaths no longer signal Changes (every path but
// stop, which signals on its own): the notifier then sleeps through the
// death and the wait below gives up. A death inside the window would not
// catch it, since the window's end re-reads the versions anyway. The margin
// is eventGuard's: a notification takes milliseconds, so only a missing one
// can fail the test, and it fails within seconds.
func TestDeathAfterWindowNotifies(t *testing.T) {
	const (
		window = mcpserve.DefaultNotifyWindow
		margin = eventGuard
	)
	for _, tr := range allTransports {
		for _, dp := range lateDeathPaths {
			t.Run(string(tr)+"/"+dp.name, func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				creator := goroutineID()
				f := newFixture(t, cat, mcpserve.Options{NotifyWindow: window}) // starts the notifier
				c := f.connect(tr, "")

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
				// The start's notification opened a window: wait until it has
				// closed, and the notifier has looked at the versions once
				// more and gone idle.
				awaitNotifierIdle(t, creator)

				dp.kill(t, cat, &k, cancel)
				select {
				case <-c.tools:
				case <-time.After(window + margin):
					t.Fatalf("no list_changed within %v of a %s death after the window", window+margin, dp.name)
				}
				if names := toolNames(t, c); slices.Contains(names, "victim") {
					t.Fatalf("tools/list after the death = %v", names)
				}
			})
		}
	}
}

// goroutineID returns the calling goroutine's number, as tracebacks print
// it.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// awaitNotifierIdle waits until the notifier started by goroutine creator
// is blocked in its own select, waiting for a change: past its coalescing
// window (which blocks inside the window function) and past its reading of
// the versions. A notifier that never gets there fails the test after
// eventGuard; that includes one whose loop was restructured so that the
// check below no longer recognises it.
func awaitNotifierIdle(t *testing.T, creator string) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for !notifierIdle(creator) {
		if time.Now().After(deadline) {
			t.Fatal("the notifier never went idle after its window")
		}
		time.Sleep(time.Millisecond)
	}
}

// notifierIdle looks for the notifier's goroutine in a dump of all
// goroutines: status select, (*notifier).run as its innermost frame (the
// runtime's own frames are left out of dumps), created by creator.
func notifierIdle(creator string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	const run = "github.com/livereg/livereg/mcpserve.(*notifier).run("
	createdBy := fmt.Sprintf(" in goroutine %s\n", creator)
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		_, status, _ := strings.Cut(header, " [")
		if strings.HasPrefix(status, "select") && strings.HasPrefix(frames, run) && strings.Contains(g+"\n", createdBy) {
			return true
		}
	}
	return false
}
