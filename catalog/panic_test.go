package catalog_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
)

// panickingBody panics with a value longer than the caller's error keeps, so
// that the test can tell the log's full value from the error's quote, and
// its name must appear in the logged stack.
func panickingBody(context.Context, catalog.Call) (catalog.Result, error) {
	panic("boom " + strings.Repeat("x", 200) + " end-of-value")
}

// A body's panic reaches its caller as a short ErrRoutePanicked, without a
// stack, while the catalog's logger gets, once, at the consumer's death, the
// whole value and the stack of the goroutine it unwound, naming the body.
func TestPanicLoggedWithStackAtDeath(t *testing.T) {
	var logs syncBuffer
	c := newCatalog(t, catalog.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	k := startTool(t, c, bg, "boom", public, panickingBody)

	_, err := c.CallTool(bg, "boom", nil, "")
	require.ErrorIs(t, err, catalog.ErrRoutePanicked)
	assert.Less(t, len(err.Error()), 150, "the caller's error stays short: %s", err)
	assert.NotContains(t, err.Error(), "end-of-value")
	assert.NotContains(t, err.Error(), "goroutine")
	waitClosed(t, k.Done(), "the death of the consumer whose body panicked")

	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "level=ERROR") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out := logs.String()
	require.Contains(t, out, "level=ERROR", "the death logs the panic")
	assert.Equal(t, 1, strings.Count(out, "level=ERROR"), "logged once")
	assert.Contains(t, out, "end-of-value", "the whole value")
	assert.Contains(t, out, `kind=tool name="\"boom\""`)
	assert.Contains(t, out, "panickingBody", "the stack, down to the body that panicked")
	assert.Contains(t, out, "goroutine", "a stack as runtime/debug formats it")
}

// Of two bodies that panic on a route, only the first, which killed the
// consumer, is logged.
func TestPanicLoggedOnlyFirst(t *testing.T) {
	var logs syncBuffer
	c := newCatalog(t, catalog.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	entered, release := make(chan struct{}, 2), make(chan struct{})
	var n atomic.Int32
	k := startTool(t, c, bg, "twice", public, func(context.Context, catalog.Call) (catalog.Result, error) {
		mine := n.Add(1)
		entered <- struct{}{}
		<-release
		if mine == 1 {
			panic("first-panic")
		}
		time.Sleep(10 * time.Millisecond) // after the first
		panic("second-panic")
	})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.CallTool(bg, "twice", nil, "")
			errs <- err
		}()
	}
	<-entered
	<-entered
	close(release)
	require.ErrorIs(t, <-errs, catalog.ErrRoutePanicked)
	require.ErrorIs(t, <-errs, catalog.ErrRoutePanicked)
	waitClosed(t, k.Done(), "the death of the consumer")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "level=ERROR") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out := logs.String()
	assert.Contains(t, out, "first-panic")
	assert.NotContains(t, out, "second-panic")
}
