package catalog_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// The plan guarantees of ADR-0068, where they live now: in the route entry,
// which carries its owner's plan. TestLiveDuplicateAndLateStop pins that a
// late stop cannot remove a successor's plan, TestWithoutPlan that a route
// without a plan is denied by default, and TestPlanBoundToEntryOwnerNotSuccessor
// and TestPlanGoneIsNotMissingPlan that a call is judged by its own entry's
// plan only.

// A failed duplicate start with a looser plan than the incumbent's cannot
// touch the incumbent's: its calls are still judged by the incumbent's
// roles, and the incumbent's body answers.
func TestFailedDuplicateKeepsIncumbentPlan(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: tokens})
	startTool(t, c, bg, "tool", bindsec.Plan{Roles: []string{"a"}}, reply("a"))
	for _, p := range []bindsec.Plan{{Public: true}, {Roles: []string{"b"}}, {}} {
		_, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, p, reply("dup"))
		if !errors.Is(err, catalog.ErrDuplicate) {
			t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
		}
	}
	_, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, bindsec.Plan{}, reply("dup"), catalog.WithoutPlan())
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}

	_, err = callText(t, c, "tool", "")
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("the duplicate's public plan is in force: err = %v, want bindsec.ErrUnauthenticated", err)
	}
	_, err = callText(t, c, "tool", "tok-b")
	if !errors.Is(err, bindsec.ErrForbidden) {
		t.Errorf("the duplicate's plan is in force: err = %v, want bindsec.ErrForbidden", err)
	}
	text, err := callText(t, c, "tool", "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	if text != "a" {
		t.Errorf("text = %q, want \"a\"", text)
	}
}

// A dead owner's plan grants nothing, whichever way the owner died: while
// its reclaim is held back, its entry and public plan are still in the
// registry, and a call finds no route rather than running the dead body.
func TestDeadOwnersPlanGrantsNothing(t *testing.T) {
	for _, death := range []struct {
		name string
		// start starts the public route "doomed" and returns a function
		// that kills its consumer and waits for the death.
		start func(t *testing.T, c *catalog.Catalog, ran *atomic.Int64) func()
	}{
		{"cancel", func(t *testing.T, c *catalog.Catalog, ran *atomic.Int64) func() {
			ctx, cancel := context.WithCancel(bg)
			k := startTool(t, c, ctx, "doomed", public, counting(ran, false))
			return func() { cancel(); <-k.Done() }
		}},
		{"panic", func(t *testing.T, c *catalog.Catalog, ran *atomic.Int64) func() {
			k := startTool(t, c, bg, "doomed", public, counting(ran, true))
			return func() {
				_, err := c.CallTool(bg, "doomed", nil, "")
				if !errors.Is(err, catalog.ErrRoutePanicked) {
					t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
				}
				ran.Store(0)
				<-k.Done()
			}
		}},
		{"drop", func(t *testing.T, c *catalog.Catalog, ran *atomic.Int64) func() {
			done := startDropped(t, c, ran)
			return func() {
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					runtime.GC()
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
				t.Fatal("a dropped consumer never died")
			}
		}},
	} {
		t.Run(death.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{MissingPlan: bindsec.PassThrough})
			held, reached := make(chan struct{}), make(chan struct{}, 1)
			c.SetBeforeRetireHook(func(string) {
				reached <- struct{}{}
				<-held
			})
			t.Cleanup(func() { close(held) })
			var ran atomic.Int64
			kill := death.start(t, c, &ran)
			kill()
			waitReclaimBegun(t, reached)
			_, err := c.CallTool(bg, "doomed", nil, "")
			if !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("err = %v, want catalog.ErrNotFound", err)
			}
			if got := ran.Load(); got != 0 {
				t.Errorf("a dead owner's public plan let its body run: ran.Load() = %v, want 0", got)
			}
			if len(c.Tools().List()) != 0 {
				t.Errorf("c.Tools().List() = %v, want empty", c.Tools().List())
			}
		})
	}
}

// counting is a body that counts its runs, and panics if asked to.
func counting(ran *atomic.Int64, panics bool) catalog.ToolHandler {
	return func(context.Context, catalog.Call) (catalog.Result, error) {
		ran.Add(1)
		if panics {
			panic("doomed")
		}
		return catalog.TextResult("ran"), nil
	}
}

// startDropped starts "doomed" and keeps nothing of its consumer.
//
//go:noinline
func startDropped(t *testing.T, c *catalog.Catalog, ran *atomic.Int64) <-chan struct{} {
	k, err := c.StartTool(bg, catalog.Tool{Name: "doomed"}, public, counting(ran, false))
	if err != nil {
		t.Fatal(err)
	}
	return k.Done()
}

func waitReclaimBegun(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the reclaim of the dead owner's route never began")
	}
}
