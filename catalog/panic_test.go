package catalog_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	if !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	if got := len(err.Error()); got >= 150 {
		t.Errorf("the caller's error stays short: %s: len(err.Error()) = %v, want < %v", err, got, 150)
	}
	if got := err.Error(); strings.Contains(got, "end-of-value") {
		t.Errorf("err.Error() = %q, want it not to contain %q", got, "end-of-value")
	}
	if got := err.Error(); strings.Contains(got, "goroutine") {
		t.Errorf("err.Error() = %q, want it not to contain %q", got, "goroutine")
	}
	waitClosed(t, k.Done(), "the death of the consumer whose body panicked")

	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "level=ERROR") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") {
		t.Fatalf("the death logs the panic: out = %q, want it to contain %q", out, "level=ERROR")
	}
	if got := strings.Count(out, "level=ERROR"); got != 1 {
		t.Errorf("logged once: strings.Count(out, \"level=ERROR\") = %v, want 1", got)
	}
	if !strings.Contains(out, "end-of-value") {
		t.Errorf("the whole value: out = %q, want it to contain %q", out, "end-of-value")
	}
	if !strings.Contains(out, `kind=tool name="\"boom\""`) {
		t.Errorf("out = %q, want it to contain %q", out, `kind=tool name="\"boom\""`)
	}
	if !strings.Contains(out, "panickingBody") {
		t.Errorf("the stack, down to the body that panicked: out = %q, want it to contain %q", out, "panickingBody")
	}
	if !strings.Contains(out, "goroutine") {
		t.Errorf("a stack as runtime/debug formats it: out = %q, want it to contain %q", out, "goroutine")
	}
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
	if err := <-errs; !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	if err := <-errs; !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	waitClosed(t, k.Done(), "the death of the consumer")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "level=ERROR") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, "first-panic") {
		t.Errorf("out = %q, want it to contain %q", out, "first-panic")
	}
	if strings.Contains(out, "second-panic") {
		t.Errorf("out = %q, want it not to contain %q", out, "second-panic")
	}
}
