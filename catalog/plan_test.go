package catalog_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		require.ErrorIs(t, err, catalog.ErrDuplicate)
	}
	_, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, bindsec.Plan{}, reply("dup"), catalog.WithoutPlan())
	require.ErrorIs(t, err, catalog.ErrDuplicate)

	_, err = callText(t, c, "tool", "")
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "the duplicate's public plan is in force")
	_, err = callText(t, c, "tool", "tok-b")
	assert.ErrorIs(t, err, bindsec.ErrForbidden, "the duplicate's plan is in force")
	text, err := callText(t, c, "tool", "tok-a")
	require.NoError(t, err)
	assert.Equal(t, "a", text)
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
				require.ErrorIs(t, err, catalog.ErrRoutePanicked)
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
			assert.ErrorIs(t, err, catalog.ErrNotFound)
			assert.Zero(t, ran.Load(), "a dead owner's public plan let its body run")
			assert.Empty(t, c.Tools().List())
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
	require.NoError(t, err)
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
