package inproc

import (
	"context"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// notifyMargin is how long past the server's coalescing window a
// list_changed may take to reach a client: the notifier's wake-up, the
// SDK's own 10ms debounce and the trip over loopback, on CPUs the workload
// saturates. It is generous on purpose: a notification later than this is
// all but certainly one that will never come, and a false alarm would make
// the check worthless.
const notifyMargin = 3 * time.Second

// notifyChecker checks invariant 10 in -mcp mode: every end of a started
// consumer (a death by any shape, or a Stop), all of them changes to the
// catalog's tool listing, is followed within the coalescing window plus
// notifyMargin by a tools/list_changed on each client session.
//
// A session counts for an end only if it had already received a
// notification when the end began. A notification proves that the stream
// that carries them was up when the server sent it (a legacy session's
// standalone stream, or the subscriptions/listen stream of a client of
// 2026-07-28); a change made before the stream was up may rightly reach
// nobody. The check is
// "some notification arrived after the end was observed", which a correct
// server always sends (the end moved the tools version, and the last
// change of a burst is always followed by one), so every violation is
// real. It is not the converse: a notification that a busy run sends for
// another change also satisfies it. The end-of-run probe (notifyProbe)
// makes an end the only change, so that a server that forgets one kind of
// end is caught there.
type notifyChecker struct {
	t      *tally
	tick   func() uint64
	now    func() time.Time
	within time.Duration // the coalescing window plus the margin

	// last holds, per session, the clock reading taken when its latest
	// list_changed arrived; 0 until its first one.
	last []atomic.Uint64

	mu      sync.Mutex
	pending []notifyEvent // in the order the ends were observed
}

// notifyEvent is one observed end that sessions must hear about.
type notifyEvent struct {
	tag, name string
	at        uint64    // the clock when the end was observed
	deadline  time.Time // at's wall time plus within
	sessions  uint64    // bit s: session s was listening when the end began
}

func newNotifyChecker(t *tally, tick func() uint64, sessions int, within time.Duration) *notifyChecker {
	return &notifyChecker{t: t, tick: tick, now: time.Now, within: within, last: make([]atomic.Uint64, sessions)}
}

// noted records a list_changed that arrived on session s.
func (c *notifyChecker) noted(s int) {
	at := c.tick()
	for {
		old := c.last[s].Load()
		if old >= at || c.last[s].CompareAndSwap(old, at) {
			return
		}
	}
}

// listening returns the sessions that have received a notification so far.
// An end takes it before it begins.
func (c *notifyChecker) listening() uint64 {
	var mask uint64
	for s := range c.last {
		if c.last[s].Load() != 0 {
			mask |= 1 << s
		}
	}
	return mask
}

// ended records rec's end, observed at clock reading at, for the sessions
// in listening (taken before the end began).
func (c *notifyChecker) ended(rec *record, at, listening uint64) {
	if listening == 0 {
		return
	}
	c.mu.Lock()
	c.pending = append(c.pending, notifyEvent{
		tag: rec.tag, name: rec.ns.name, at: at, deadline: c.now().Add(c.within), sessions: listening,
	})
	c.mu.Unlock()
}

// unheard returns the sessions of ev that have had no notification since
// ev was observed.
func (c *notifyChecker) unheard(ev notifyEvent) uint64 {
	var mask uint64
	for s := range c.last {
		if ev.sessions&(1<<s) != 0 && c.last[s].Load() <= ev.at {
			mask |= 1 << s
		}
	}
	return mask
}

// judge settles every pending end that every session has heard of or whose
// deadline has passed, and reports how many are still pending.
func (c *notifyChecker) judge() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.pending = slices.DeleteFunc(c.pending, func(ev notifyEvent) bool {
		missing := c.unheard(ev)
		if missing != 0 && now.Before(ev.deadline) {
			return false
		}
		c.t.Check(InvListChanged, 1)
		if missing != 0 {
			c.t.Violate(InvListChanged, "%d of %d sessions got no tools/list_changed within %v after %s (%s) ended at %d",
				bits.OnesCount64(missing), bits.OnesCount64(ev.sessions), c.within, ev.tag, ev.name, ev.at)
		}
		return true
	})
	return len(c.pending)
}

// loop judges every interval until ctx ends.
func (c *notifyChecker) loop(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() { c.judge() })
}

// drain judges until nothing is pending: at most within, since every
// deadline passes by then. The sessions must still be connected.
func (c *notifyChecker) drain() {
	for c.judge() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
}

// heardSince waits, up to within, for every session that is listening to
// receive a notification after clock reading at, and reports whether they
// all did.
func (c *notifyChecker) heardSince(at uint64) bool {
	ev := notifyEvent{at: at, sessions: c.listening()}
	deadline := c.now().Add(c.within)
	for c.unheard(ev) != 0 {
		if !c.now().Before(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return ev.sessions != 0
}

// notifyProbe runs at the end of an -mcp run, once every consumer has
// ended and nothing else changes the catalog: it starts a consumer, waits
// until every session has heard of the start and the server's coalescing
// window has run out, and then ends it, once by a death (a cancel) and once
// by a Stop. The end is then the only change, so a server that signals one
// kind of end and not the other is caught every time. After the
// notification, the next listing must no longer show the route.
func (w *world) notifyProbe(ctx context.Context, d *mcpDriver, window time.Duration, l *latencies) {
	c := w.notes
	for _, sh := range []shape{shapeCancel, shapeStop} {
		begin := w.tick()
		h, err := w.start(w.names[0], true, l)
		if err != nil {
			w.t.Unexpected("notification probe: start on %s: %v", w.names[0].name, err)
			return
		}
		if !c.heardSince(begin) {
			// Not invariant 10, which is about ends; but a server that
			// does not announce a start is broken all the same.
			w.t.Unexpected("notification probe: no tools/list_changed within %v after %s started", c.within, h.rec.tag)
			w.end(h, shapeStop, l)
			c.drain()
			return
		}
		// Let the window that the start's notification opened run out, so
		// that the end is a change of its own and not one that a window
		// already under way carries along.
		time.Sleep(3 * window)
		w.end(h, sh, l)
		c.drain()
		tools, err := d.listAll(ctx)
		if err != nil {
			w.t.Unexpected("notification probe: tools/list: %v", err)
			return
		}
		c.t.Check(InvListChanged, 1)
		for _, tool := range tools {
			if tool.Title == h.rec.tag {
				c.t.Violate(InvListChanged, "the listing after %s (%s) ended by %s still shows it", h.rec.tag, h.rec.ns.name, sh)
			}
		}
	}
}
