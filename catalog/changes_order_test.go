package catalog_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Changes is closed only once the change it announces can be seen: a
// follower takes the channel, reads Version and waits, and when woken does
// the same again. Woken before the change, it would read the old version,
// take a channel the change has already passed, and never hear of it. A
// start is held just before its route becomes ready: no signal may have
// fired yet, and once the start returns the route is listed and the
// channel closed. It catches a start that signals before it marks its
// route ready.
func TestChangesSignalAStartOnlyOnceItIsListed(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	changes := c.Changes()
	v0 := c.Version()
	var early atomic.Bool
	c.SetBeforeReadyHook(func(string) { early.Store(isClosed(changes)) })
	startTool(t, c, bg, "t", public, reply(""))
	if early.Load() {
		t.Errorf("a start signalled a change before its route was ready: early.Load() is true")
	}
	if !isClosed(changes) {
		t.Errorf("a start signalled no change: isClosed(changes) is false")
	}
	if got := c.Version(); got <= v0 {
		t.Errorf("c.Version() = %v, want > %v", got, v0)
	}
	if got, want := toolNames(c), ([]string{"t"}); !reflect.DeepEqual(got, want) {
		t.Errorf("toolNames(c) = %v, want %v", got, want)
	}
}

// The same for a death: the reclaim of a dead owner's route is held before
// it removes the entry, and no signal may have fired for it yet; once let
// go, the entry is gone and the channel closed. It catches a reclaim that
// signals before it removes the entry.
func TestChangesSignalADeathOnlyOnceItIsReclaimed(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	p := newPause()
	c.SetBeforeRetireHook(p.hookName)
	ctx, cancel := context.WithCancel(bg)
	k := startTool(t, c, ctx, "t", public, reply(""))
	changes := c.Changes()
	cancel()
	waitClosed(t, p.reached, "the reclaim of the dead owner's route")
	early := isClosed(changes)
	close(p.release)
	if early {
		t.Fatalf("a death was signalled before its route was reclaimed: early is true")
	}
	waitClosed(t, changes, "the signal of the death")
	if got := c.ToolEntries(); got != 0 {
		t.Errorf("the signal came before the entry was removed: c.ToolEntries() = %v, want 0", got)
	}
	waitClosed(t, k.Done(), "the death")
}

// A consumer that dies while its start completes is counted once: the
// start marks itself complete and then looks whether the reclaim ran, and
// the reclaim marks itself and then looks whether the start completed, so
// one of the two counts the death. The death is made to happen, reclaim
// included, between the start's two steps. It catches a start that looks
// before it marks itself: neither then counts the death.
func TestDeathDuringStartIsCounted(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	retiring, retired := signal()
	c.SetBeforeRetireHook(func(string) { retiring() })
	var armed atomic.Bool
	armed.Store(true)
	c.SetReadyingHook(func(string) {
		if armed.CompareAndSwap(true, false) {
			cancel()
			select {
			case <-retired:
			case <-time.After(guard):
				t.Error("the dead consumer's route was never reclaimed")
			}
		}
	})
	k, err := c.StartTool(ctx, catalog.Tool{Name: "t"}, public, reply(""))
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, k.Done(), "the death")
	if got, want := c.Stats().Deaths, (catalog.DeathCounts{Cancel: 1}); !reflect.DeepEqual(got, want) {
		t.Errorf("a death during the start's completion: c.Stats().Deaths = %v, want %v", got, want)
	}
}
