package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
)

// goexitBody ends its goroutine as testing's FailNow does.
func goexitBody(context.Context, catalog.Call) (catalog.Result, error) {
	runtime.Goexit()
	return catalog.Result{}, nil
}

// A body that ends the caller's goroutine with runtime.Goexit is an
// unwind: Go does not stop it, so the call never returns, but its
// consumer dies as a panic's would, and its slot and gate are released
// on the way out, for a tool call, a resource read and a prompt alike.
func TestGoexitInCallBodyKillsConsumer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(c *catalog.Catalog) (*catalog.Consumer, error)
		call  func(c *catalog.Catalog)
	}{
		{"tool", func(c *catalog.Catalog) (*catalog.Consumer, error) {
			return c.StartTool(bg, catalog.Tool{Name: "exit"}, public, goexitBody, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(0))
		}, func(c *catalog.Catalog) { _, _ = c.CallTool(bg, "exit", nil, "") }},
		{"resource", func(c *catalog.Catalog) (*catalog.Consumer, error) {
			return c.StartResource(bg, catalog.Resource{URI: "test://exit", Name: "exit"}, public,
				func(context.Context, catalog.Read) (catalog.Contents, error) {
					runtime.Goexit()
					return catalog.Contents{}, nil
				}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(0))
		}, func(c *catalog.Catalog) { _, _ = c.ReadResource(bg, "test://exit", "") }},
		{"prompt", func(c *catalog.Catalog) (*catalog.Consumer, error) {
			return c.StartPrompt(bg, catalog.Prompt{Name: "exit"}, public,
				func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
					runtime.Goexit()
					return catalog.PromptResult{}, nil
				}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(0))
		}, func(c *catalog.Catalog) { _, _ = c.GetPrompt(bg, "exit", nil, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			k, err := tc.start(c)
			require.NoError(t, err)
			t.Cleanup(func() { stopBounded(k) })

			returned, done := false, make(chan struct{})
			go func() {
				defer close(done)
				tc.call(c)
				returned = true
			}()
			waitClosed(t, done, "the calling goroutine's end")
			require.False(t, returned, "Go does not stop a Goexit: the call cannot return")
			waitClosed(t, k.Done(), "the death of the consumer whose body called Goexit")
			assert.Zero(t, k.Running(), "a body still counted in the gate")
			assert.Zero(t, k.SlotsHeld(), "a slot still held")
			assert.Equal(t, uint64(1), c.Stats().Calls.Panicked, "the call is counted as an unwind")
		})
	}
}

// A task whose body calls runtime.Goexit fails with ErrRouteExited, at
// once, by its own end rather than by its consumer's death (the reclaim
// is held off until the task has been looked at); the consumer dies and
// the slot is released. So does a call's rest that the body detached into
// a task (Call.Detach).
func TestGoexitInTaskBodyFailsTask(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  catalog.ToolHandler
		start func(c *catalog.Catalog) (*catalog.Task, error)
	}{
		{"StartTask", goexitBody, func(c *catalog.Catalog) (*catalog.Task, error) {
			return c.StartTask(bg, "exit", nil, "")
		}},
		{"detached rest", func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
			return call.Detach(ctx, func(ctx context.Context) (catalog.Result, error) { return goexitBody(ctx, call) })
		}, func(c *catalog.Catalog) (*catalog.Task, error) {
			res, err := c.CallTool(bg, "exit", nil, "", catalog.WithTasks())
			return res.Task, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			retire := make(chan struct{})
			c.SetBeforeRetireHook(func(string) { <-retire })
			// Two slots: a detaching call holds its own while the task
			// that takes the rest is admitted.
			k, err := c.StartTool(bg, catalog.Tool{Name: "exit", TaskSupport: catalog.TaskOptional}, public, tc.body,
				catalog.WithMaxConcurrent(2), catalog.WithWaitingRoom(0))
			require.NoError(t, err)
			t.Cleanup(func() { stopBounded(k) })
			var once sync.Once
			release := func() { once.Do(func() { close(retire) }) }
			t.Cleanup(release)

			task, err := tc.start(c)
			require.NoError(t, err)
			require.NotNil(t, task)
			ctx, cancel := context.WithTimeout(bg, guard)
			defer cancel()
			info, err := task.Wait(ctx)
			require.NoError(t, err, "the task never ended")
			assert.Equal(t, catalog.TaskFailed, info.Status)
			assert.ErrorIs(t, info.Err, catalog.ErrRouteExited, "the task's own end, not the death's")
			assert.ErrorIs(t, info.Err, catalog.ErrRoutePanicked, "a Goexit is an unwind")
			release()
			waitClosed(t, k.Done(), "the death of the consumer whose task body called Goexit")
			// The task ended first; Stop waits for the body's way out.
			require.NoError(t, k.Stop(ctx))
			assert.Zero(t, k.Running())
			assert.Zero(t, k.SlotsHeld())
		})
	}
}

// errCorrupt is a sentinel a body panics with.
var errCorrupt = errors.New("index corrupt")

// corruptError is an error type a body panics with.
type corruptError struct{ page int }

func (e *corruptError) Error() string { return fmt.Sprintf("page %d corrupt", e.page) }

// A panic's error value stays reachable through the caller's error, for
// errors.Is and errors.As, beside ErrRoutePanicked; one that is no error
// is only quoted. Neither is a Goexit.
func TestPanicErrorValueUnwraps(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	for _, tc := range []struct {
		name  string
		value any
		is    error
	}{
		{"sentinel", fmt.Errorf("reading: %w", errCorrupt), errCorrupt},
		{"typed", &corruptError{page: 7}, nil},
		{"string", "boom", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startTool(t, c, bg, tc.name, public, func(context.Context, catalog.Call) (catalog.Result, error) { panic(tc.value) })
			_, err := c.CallTool(bg, tc.name, nil, "")
			require.ErrorIs(t, err, catalog.ErrRoutePanicked)
			assert.NotErrorIs(t, err, catalog.ErrRouteExited)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			var ce *corruptError
			assert.Equal(t, tc.name == "typed", errors.As(err, &ce))
			if ce != nil {
				assert.Equal(t, 7, ce.page)
			}
			assert.Contains(t, err.Error(), fmt.Sprint(tc.value))
		})
	}
}
