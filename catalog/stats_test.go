package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	t.Cleanup(func() { stopBounded(busy) })

	call := func(ctx context.Context, name, cred string, args json.RawMessage) error {
		_, err := c.CallTool(ctx, name, args, cred)
		return err
	}
	require.NoError(t, call(bg, "ok", "", nil))
	require.NoError(t, call(bg, "ok", "", nil))
	require.ErrorIs(t, call(bg, "err", "", nil), fail)
	require.ErrorIs(t, call(bg, "boom", "", nil), catalog.ErrRoutePanicked)
	require.True(t, catalog.Denied(call(bg, "role", "", nil)))
	require.ErrorIs(t, call(bg, "nope", "", nil), catalog.ErrNotFound)
	require.ErrorIs(t, call(bg, "ok", "", json.RawMessage(`42`)), catalog.ErrInvalidArguments)

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
	require.ErrorIs(t, call(bounded, "busy", "", nil), catalog.ErrOverloaded)
	cancel()
	require.ErrorIs(t, recvErr(t, waiting, "the waiting call"), context.Canceled)
	close(release)
	require.NoError(t, recvErr(t, first, "the first call"))

	// Gone: the owner dies between the guard and the gate.
	dctx, kill := context.WithCancel(bg)
	dying := startTool(t, c, dctx, "dying", public, reply("x"))
	gone := callAsync(c, "dying", "")
	<-p.reached
	kill()
	<-dying.Done()
	close(p.release)
	require.ErrorIs(t, <-gone, catalog.ErrRouteGone)

	assert.Equal(t, catalog.CallCounts{
		OK: 3, HandlerError: 1, Panicked: 1, Denied: 1, Gone: 1, Overloaded: 1,
		Unknown: 1, Invalid: 1, Canceled: 1,
	}, c.Stats().Calls)
}

// Deaths are counted by path once each, a drop is logged at Warn with the
// route's name, and refused starts are counted by reason.
func TestStatsCountDeathsAndRefusals(t *testing.T) {
	var logs syncBuffer
	c := newCatalog(t, catalog.Config{MaxTools: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	stopped, err := c.StartTool(bg, catalog.Tool{Name: "stopped"}, public, reply(""))
	require.NoError(t, err)
	require.NoError(t, stopped.Stop(bg))

	ctx, cancel := context.WithCancel(bg)
	cancelled := startTool(t, c, ctx, "cancelled", public, reply(""))
	cancel()
	<-cancelled.Done()

	panicked := startTool(t, c, bg, "panicked", public, func(context.Context, catalog.Call) (catalog.Result, error) { panic("boom") })
	_, err = c.CallTool(bg, "panicked", nil, "")
	require.ErrorIs(t, err, catalog.ErrRoutePanicked)
	waitClosed(t, panicked.Done(), "the death of the consumer whose body panicked")

	held := startTool(t, c, bg, "held", public, reply(""))
	_, err = c.StartTool(bg, catalog.Tool{Name: "held"}, public, reply(""))
	require.ErrorIs(t, err, catalog.ErrDuplicate)
	full := startTool(t, c, bg, "full", public, reply(""))
	_, err = c.StartTool(bg, catalog.Tool{Name: "third"}, public, reply(""))
	require.ErrorIs(t, err, catalog.ErrCapReached)
	require.NoError(t, held.Stop(bg))
	require.NoError(t, full.Stop(bg))

	dropConsumer(t, c, "dropped.tool")
	want := catalog.DeathCounts{Stop: 3, Cancel: 1, Panic: 1, Drop: 1}
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Deaths != want && time.Now().Before(deadline) {
		runtime.GC() // the drop's death, then its reclaim's goroutine
		time.Sleep(time.Millisecond)
	}
	st := c.Stats()
	assert.Equal(t, want, st.Deaths)
	assert.EqualValues(t, 1, st.Duplicates)
	assert.EqualValues(t, 1, st.CapRefusals)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "dropped.tool")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "only the drop warns")
}
