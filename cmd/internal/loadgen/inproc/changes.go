package inproc

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// changeWithin bounds how long the in-process follower may take to reach
// a change's version: it wakes in microseconds, so this is all scheduling
// margin on CPUs the workload saturates.
const changeWithin = 2 * time.Second

// changeChecker checks invariant 10 in process, in every run: every start,
// Stop and death is announced, the catalog's Changes channel closing after
// the version moved. A follower does what the catalog's doc says a
// follower must, take the channel, then read Version, then wait, and
// records the highest version it read. Each change is settled by a
// version read once the change is complete (after the start or Stop
// returned; after a death was observed and a listing of its kind, which
// reclaims a dead entry it passes over, came back), and the follower must
// read at least that version within changeWithin.
//
// Sound: a version move is followed by a Changes close (a reclaim that a
// lookup or listing makes moves the version silently, but the owner's
// death always announces itself afterwards), and that close wakes a
// follower whose last read was older, since it took the channel before
// that read. A catalog that forgets to announce one kind of change leaves
// the follower behind until another change comes along; under load one
// soon does, so the end of the run stops everything else and makes a
// start, a death and a Stop in turn the only change (changeProbe).
type changeChecker struct {
	t      *tally
	sys    System
	now    func() time.Time
	within time.Duration

	seen atomic.Uint64 // the highest version the follower read

	mu      sync.Mutex
	pending []changeEvent
}

// changeEvent is a change the follower must catch up with.
type changeEvent struct {
	rec      *record
	what     string // start, stop or death
	version  uint64
	deadline time.Time
}

func newChangeChecker(t *tally, sys System, within time.Duration) *changeChecker {
	return &changeChecker{t: t, sys: sys, now: time.Now, within: within}
}

// follow follows the catalog's changes until ctx ends.
func (c *changeChecker) follow(ctx context.Context) {
	for {
		ch := c.sys.Changes()
		v := c.sys.Version()
		for old := c.seen.Load(); v > old && !c.seen.CompareAndSwap(old, v); old = c.seen.Load() {
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// expect records that rec's change (what) is complete at version v.
func (c *changeChecker) expect(rec *record, what string, v uint64) {
	if c.seen.Load() >= v {
		c.t.Check(InvListChanged, 1)
		return
	}
	c.mu.Lock()
	c.pending = append(c.pending, changeEvent{rec: rec, what: what, version: v, deadline: c.now().Add(c.within)})
	c.mu.Unlock()
}

// judge settles every pending change the follower has caught up with or
// whose deadline has passed, and reports how many are still pending.
func (c *changeChecker) judge() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, seen := c.now(), c.seen.Load()
	c.pending = slices.DeleteFunc(c.pending, func(ev changeEvent) bool {
		if seen < ev.version && now.Before(ev.deadline) {
			return false
		}
		c.t.Check(InvListChanged, 1)
		if seen < ev.version {
			c.t.Violate(InvListChanged, "the %s of %s (%s) moved the catalog's version to %d, and %v later a follower of Changes still read %d: the change was never announced",
				ev.what, ev.rec.tag, ev.rec.ns.name, ev.version, c.within, seen)
		}
		return true
	})
	return len(c.pending)
}

// loop judges every interval until ctx ends.
func (c *changeChecker) loop(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() { c.judge() })
}

// drain judges until nothing is pending: at most within.
func (c *changeChecker) drain() {
	for c.judge() > 0 {
		time.Sleep(2 * time.Millisecond)
	}
}

// started records a start that succeeded.
func (w *world) changeStarted(rec *record) {
	w.changes.expect(rec, "start", w.sys.Version())
}

// changeEnded records an end observed: the entry is reclaimed by the time
// a listing of its kind returns, if no one reclaimed it before.
func (w *world) changeEnded(rec *record) {
	w.reclaimKind(rec.ns.kind)
	w.changes.expect(rec, "end", w.sys.Version())
}

// reclaimKind lists kind k for the reclaim a listing makes, and nothing else.
func (w *world) reclaimKind(k kind) {
	switch k {
	case kindPrompt:
		w.sys.ListPrompts()
	case kindTemplate:
		w.sys.ListResourceTemplates()
	case kindResource:
		w.sys.ListResources()
	default:
		w.sys.ListTools()
	}
}

// changeProbe runs at the end of every run, once every consumer has ended
// and nothing else changes the catalog: a start, then its death by a
// cancel, then a second start and its Stop, each the only change, so that
// a catalog that forgets to announce one kind of change is caught every
// run, not only when nothing else happened to come along.
func (w *world) changeProbe(l *latencies) {
	for _, sh := range []shape{shapeCancel, shapeStop} {
		h, err := w.start(w.names[0], true, l)
		if err != nil {
			w.t.Unexpected("change probe: start on %s: %v", w.names[0].name, err)
			return
		}
		w.changes.drain()
		w.end(h, sh, l)
		w.changes.drain()
	}
}
