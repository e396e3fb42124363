package mcpserve

import (
	"sync"
	"time"
)

// idleTimer closes an HTTP session once no POST of it has been in flight
// for its timeout (Options.SessionTimeout), as the SDK's own timer does.
// The Server keeps it instead of the SDK because the fast path serves
// POSTs the SDK never sees: an SDK timer would close a session in busy
// use. Like the SDK's, it counts POSTs only: a session whose client only
// holds its GET stream open is idle. A nil *idleTimer does nothing.
type idleTimer struct {
	mu    sync.Mutex
	refs  int           // POSTs in flight
	d     time.Duration // the timeout
	timer *time.Timer   // nil once stopped for good
}

// newIdleTimer returns a timer that calls close once the session has been
// idle for d. It begins with one POST in flight, the initialize that
// created the session, which the front ends when its response is out.
func newIdleTimer(d time.Duration, close func()) *idleTimer {
	t := &idleTimer{refs: 1, d: d}
	t.timer = time.AfterFunc(d, close)
	t.timer.Stop()
	return t
}

// begin notes a POST of the session starting: the session is not idle
// until it ends.
func (t *idleTimer) begin() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		return
	}
	if t.refs == 0 {
		t.timer.Stop()
	}
	t.refs++
}

// end notes a POST of the session ending; the last one starts the wait.
func (t *idleTimer) end() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil || t.refs == 0 {
		return
	}
	if t.refs--; t.refs == 0 {
		t.timer.Reset(t.d)
	}
}

// stop stops the timer for good, when the session has ended.
func (t *idleTimer) stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}
