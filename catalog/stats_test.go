package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// syncBuffer is a log sink safe for the reclaim's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every call outcome is counted in its own field, once.
func TestStatsCountCallsByOutcome(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: tokens})
	// Set before any route starts: hooks are plain fields.
	p := newPause()
	c.SetBeforeAdmitHook(func(name string) {
		if name == "dying" {
			p.hook()
		}
	})
	fail := errors.New("the body's own error")
	startTool(t, c, bg, "ok", public, reply("ok"))
	startTool(t, c, bg, "err", public, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, fail })
	startTool(t, c, bg, "boom", public, func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") })
	startTool(t, c, bg, "role", bindsec.Plan{Roles: []string{"r"}}, reply("r"))

	release, started := make(chan struct{}), make(chan struct{}, 1)
	busy, err := c.StartTool(bg, catalog.Tool{Name: "busy"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		started <- struct{}{}
		<-release
		return catalog.Result{}, nil
	}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopBounded(busy) })

	call := func(ctx context.Context, name, cred string, args json.RawMessage) error {
		_, err := c.CallTool(ctx, name, args, cred)
		return err
	}
	if err := call(bg, "ok", "", nil); err != nil {
		t.Fatal(err)
	}
	if err := call(bg, "ok", "", nil); err != nil {
		t.Fatal(err)
	}
	if err := call(bg, "err", "", nil); !errors.Is(err, fail) {
		t.Fatalf("err = %v, want %v", err, fail)
	}
	if err := call(bg, "boom", "", nil); !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	if !catalog.Denied(call(bg, "role", "", nil)) {
		t.Fatalf("catalog.Denied(call(bg, \"role\", \"\", nil)) is false")
	}
	if err := call(bg, "nope", "", nil); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}
	if err := call(bg, "ok", "", json.RawMessage(`42`)); !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
	}

	first := make(chan error, 1)
	go func() { first <- call(bg, "busy", "", nil) }()
	<-started
	ctx, cancel := context.WithCancel(bg)
	waiting := make(chan error, 1)
	go func() { waiting <- call(ctx, "busy", "", nil) }()
	for busy.Waiting() != 1 {
		<-yield()
	}
	// Bounded: a room that lets this call wait would otherwise hang the
	// test behind a body that never ends.
	bounded, cancelBounded := context.WithTimeout(bg, guard)
	defer cancelBounded()
	if err := call(bounded, "busy", "", nil); !errors.Is(err, catalog.ErrOverloaded) {
		t.Fatalf("err = %v, want catalog.ErrOverloaded", err)
	}
	cancel()
	if err := recvErr(t, waiting, "the waiting call"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(release)
	if err := recvErr(t, first, "the first call"); err != nil {
		t.Fatal(err)
	}

	// Gone: the owner dies between the guard and the gate.
	dctx, kill := context.WithCancel(bg)
	dying := startTool(t, c, dctx, "dying", public, reply("x"))
	gone := callAsync(c, "dying", "")
	<-p.reached
	kill()
	<-dying.Done()
	close(p.release)
	if err := <-gone; !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}

	if got, want := c.Stats().Calls, (catalog.CallCounts{
		OK: 3, HandlerError: 1, Panicked: 1, Denied: 1, Gone: 1, Overloaded: 1,
		Unknown: 1, Invalid: 1, Canceled: 1,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("c.Stats().Calls = %v, want %v", got, want)
	}
}

// Deaths are counted by path once each, a drop is logged at Warn with the
// route's name, and refused starts are counted by reason.
func TestStatsCountDeathsAndRefusals(t *testing.T) {
	var logs syncBuffer
	c := newCatalog(t, catalog.Config{MaxTools: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	stopped, err := c.StartTool(bg, catalog.Tool{Name: "stopped"}, public, reply(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.Stop(bg); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(bg)
	cancelled := startTool(t, c, ctx, "cancelled", public, reply(""))
	cancel()
	<-cancelled.Done()

	panicked := startTool(t, c, bg, "panicked", public, func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") })
	_, err = c.CallTool(bg, "panicked", nil, "")
	if !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
	waitClosed(t, panicked.Done(), "the death of the consumer whose body panicked")

	held := startTool(t, c, bg, "held", public, reply(""))
	_, err = c.StartTool(bg, catalog.Tool{Name: "held"}, public, reply(""))
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}
	full := startTool(t, c, bg, "full", public, reply(""))
	_, err = c.StartTool(bg, catalog.Tool{Name: "third"}, public, reply(""))
	if !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("err = %v, want catalog.ErrCapReached", err)
	}
	if err := held.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if err := full.Stop(bg); err != nil {
		t.Fatal(err)
	}

	dropConsumer(t, c, "dropped.tool")
	want := catalog.DeathCounts{Stop: 3, Cancel: 1, Panic: 1, Drop: 1}
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Deaths != want && time.Now().Before(deadline) {
		runtime.GC() // the drop's death, then its reclaim's goroutine
		time.Sleep(time.Millisecond)
	}
	st := c.Stats()
	if !reflect.DeepEqual(st.Deaths, want) {
		t.Errorf("st.Deaths = %v, want %v", st.Deaths, want)
	}
	if st.Duplicates != uint64(1) {
		t.Errorf("st.Duplicates = %v, want %v", st.Duplicates, uint64(1))
	}
	if st.CapRefusals != uint64(1) {
		t.Errorf("st.CapRefusals = %v, want %v", st.CapRefusals, uint64(1))
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") {
		t.Errorf("logs.String() = %q, want it to contain %q", got, "level=WARN")
	}
	if got := logs.String(); !strings.Contains(got, "dropped.tool") {
		t.Errorf("logs.String() = %q, want it to contain %q", got, "dropped.tool")
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("only the drop warns: strings.Count(logs.String(), \"level=WARN\") = %v, want 1", got)
	}
}
