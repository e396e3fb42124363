package mcpserve_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// The notifier takes the catalog's Changes channel before it reads the
// versions, so that a change made after the read closes the channel it
// then waits on. A start made exactly there, by a hook on the notifier's
// own goroutine, is announced; a notifier that took the channel after the
// read would wait on a channel the start never closes, and go idle with
// the start unannounced, which synctest.Wait shows at once: everything
// waits, and no window opened.
func TestNotifierMissesNoChangeAfterItsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cat := newCatalog(t, catalog.Config{})
		var armed atomic.Bool
		late := make(chan *catalog.Consumer, 1)
		restore := mcpserve.SetNotifierAfterRead(func() {
			if !armed.CompareAndSwap(true, false) {
				return
			}
			k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "late"}, bindsec.Plan{Public: true}, victimHandler("late"))
			if err != nil {
				t.Errorf("start between the read and the wait: %v", err)
			}
			late <- k
		})
		win := newHeldWindow()
		srv, err := mcpserve.NewWithWindow(cat, mcpserve.Options{Logger: quietLogger()}, win.wait)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		c := connectInMemory(t, srv)
		// Idle, the notifier wakes only once a start is complete; its
		// first look, made as it starts, could see a start half done and
		// announce it in two.
		synctest.Wait()

		// A first start is announced and opens a window. The read that
		// ends the window finds nothing new: it is the one the hook
		// follows with a start, so that the notifier's next step is its
		// wait.
		startText(t, cat, context.Background(), "first", "x")
		wait(t, win.entered, "the window of the first start")
		wait(t, c.tools, "list_changed for the first start")
		armed.Store(true)
		win.end <- struct{}{}
		synctest.Wait()
		select {
		case k := <-late:
			if k != nil {
				t.Cleanup(func() { _ = k.Stop(context.Background()) })
			}
		default:
			t.Fatal("the notifier did not read the versions after its window")
		}

		// Announced, the start opens the next window; missed, the
		// notifier waits in its select, and nothing moves.
		select {
		case <-win.entered:
		default:
			t.Fatal("the notifier went idle with a start made after its read unannounced: it took Changes after reading the versions")
		}
		wait(t, c.tools, "list_changed for the start after the read")
		if names := toolNames(t, c); !slices.Contains(names, "late") {
			t.Fatalf("tools/list after the notification = %v", names)
		}
	})
}

// Once a notification's window ends with nothing changed in it, the
// notifier goes idle: it neither announces the same change again nor opens
// another window (there is no polling), for each kind it announces. On
// synctest's clock an hour passes in an instant once everything waits, so
// a notifier that polls, on any period, opens a window the test sees.
func TestNotifierQuietAfterItsWindow(t *testing.T) {
	public := bindsec.Plan{Public: true}
	changes := map[string]func(t *testing.T, cat *catalog.Catalog) (*catalog.Consumer, error){
		"tools": func(t *testing.T, cat *catalog.Catalog) (*catalog.Consumer, error) {
			return cat.StartTool(context.Background(), catalog.Tool{Name: "t"}, public, victimHandler("t"))
		},
		"resources": func(t *testing.T, cat *catalog.Catalog) (*catalog.Consumer, error) {
			return cat.StartResource(context.Background(), catalog.Resource{URI: "test://r"}, public,
				func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: "r"}, nil })
		},
		"templates": func(t *testing.T, cat *catalog.Catalog) (*catalog.Consumer, error) {
			return cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{URITemplate: "test://x/{id}", Name: "x"}, public, varsReader("x"))
		},
		"prompts": func(t *testing.T, cat *catalog.Catalog) (*catalog.Consumer, error) {
			return cat.StartPrompt(context.Background(), catalog.Prompt{Name: "p"}, public, sayPrompt("p"))
		},
	}
	for kind, change := range changes {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				win := newHeldWindow()
				srv, err := mcpserve.NewWithWindow(cat, mcpserve.Options{Logger: quietLogger()}, win.wait)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = srv.Close() })
				// Idle, the notifier wakes only once the change is
				// complete; its first look, made as it starts, could see
				// it half done.
				synctest.Wait()
				k, err := change(t, cat)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = k.Stop(context.Background()) })
				wait(t, win.entered, "the window of the change")
				win.end <- struct{}{}
				time.Sleep(time.Hour)
				synctest.Wait()
				select {
				case <-win.entered:
					t.Fatal("the notifier opened another window with nothing changed: it announced again, or it polls")
				default:
				}
			})
		})
	}
}
