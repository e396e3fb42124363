package inproc

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNow is a settable clock for the notification checker's deadlines.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time          { return f.t }
func (f *fakeNow) advance(d time.Duration) { f.t = f.t.Add(d) }

// Invariant 10's checker on a scripted history with two sessions: a
// correct server notifies both after every end, and a server that forgets
// deaths (a Stop still signals) leaves a death unheard past the deadline.
// The converse of soundness is checked too: an end that is unheard only
// until its deadline, or a session that was not yet listening, is no
// violation.
func TestCheckerListChanged(t *testing.T) {
	for _, buggy := range []bool{false, true} {
		name := map[bool]string{false: "correct server", true: "deaths not signalled"}[buggy]
		t.Run(name, func(t *testing.T) {
			tl := &tally{}
			var clock atomic.Uint64
			c := newNotifyChecker(tl, func() uint64 { return clock.Add(1) }, 3, time.Second)
			fake := &fakeNow{t: time.Unix(1000, 0)}
			c.now = fake.now
			ns := &nameState{name: "t0"}
			c.noted(0)
			c.noted(1) // session 2 never hears anything: it is never judged

			end := func(id uint64, sh shape) {
				rec := &record{id: id, ns: ns, tag: tagFor(id)}
				listening := c.listening()
				rec.shape.Store(int32(sh))
				rec.death.Store(clock.Add(1))
				c.ended(rec, rec.death.Load(), listening)
				if buggy && sh != shapeStop {
					return
				}
				c.noted(0)
				c.noted(1)
			}
			end(1, shapeStop)
			end(2, shapeCancel)
			end(3, shapeDrop)
			fake.advance(999 * time.Millisecond)
			if got, want := c.judge(), map[bool]int{false: 0, true: 2}[buggy]; got != want {
				t.Errorf("ends still pending before their deadline: c.judge() = %v, want %v", got, want)
			}
			if got := tl.Violations(InvListChanged); got != 0 {
				t.Errorf("no end is late before its deadline: tl.Violations(InvListChanged) = %v, want 0", got)
			}
			fake.advance(2 * time.Millisecond)
			if got := c.judge(); got != 0 {
				t.Fatalf("c.judge() = %v, want 0", got)
			}

			if got, want := tl.Checks(InvListChanged), int64(3); got != want {
				t.Errorf("tl.Checks(InvListChanged) = %v, want %v", got, want)
			}
			if buggy {
				if got, want := tl.Violations(InvListChanged), int64(2); got != want {
					t.Errorf("%v: tl.Violations(InvListChanged) = %v, want %v", tl.Examples(InvListChanged), got, want)
				}
			} else {
				if got := tl.Violations(InvListChanged); got != 0 {
					t.Errorf("%v: tl.Violations(InvListChanged) = %v, want 0", tl.Examples(InvListChanged), got)
				}
			}
		})
	}
}

// A notification that arrives late but before the deadline satisfies the
// check, and one that arrived before the end does not.
func TestCheckerListChangedOrder(t *testing.T) {
	tl := &tally{}
	var clock atomic.Uint64
	c := newNotifyChecker(tl, func() uint64 { return clock.Add(1) }, 1, time.Second)
	fake := &fakeNow{t: time.Unix(1000, 0)}
	c.now = fake.now
	rec := &record{id: 1, ns: &nameState{name: "t0"}, tag: tagFor(1)}
	c.noted(0)
	c.ended(rec, clock.Add(1), c.listening())
	fake.advance(900 * time.Millisecond)
	if got, want := c.judge(), 1; got != want {
		t.Fatalf("the notification before the end does not count: c.judge() = %v, want %v", got, want)
	}
	c.noted(0)
	if got := c.judge(); got != 0 {
		t.Fatalf("c.judge() = %v, want 0", got)
	}
	if got, want := tl.Checks(InvListChanged), int64(1); got != want {
		t.Errorf("tl.Checks(InvListChanged) = %v, want %v", got, want)
	}
	if got := tl.Violations(InvListChanged); got != 0 {
		t.Errorf("tl.Violations(InvListChanged) = %v, want 0", got)
	}
}

// The whole -mcp run against a real catalog and server whose notifications
// stop reaching the client after each session's first one, as if the
// server had stopped signalling: invariant 10 fires, both for the ends
// during the run and for the probe at its end.
func TestRunMCPCatchesMissingNotifications(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 500 * time.Millisecond
	cfg.MCP = true
	cfg.Resolvers = 2
	sys, err := NewCatalogSystem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var heard [numCreds]atomic.Bool
	d := &mcpDriver{cat: sys.Cat, mute: func(s int) bool { return heard[s].Swap(true) }}
	rep := Run(context.Background(), cfg, sys, RunOptions{mcp: d, notifyMargin: 200 * time.Millisecond})

	if got := rep.Violations[InvListChanged.String()]; got <= 0 {
		t.Errorf("checks %d: rep.Violations[InvListChanged.String()] = %v, want > 0", rep.Checks[InvListChanged.String()], got)
	}
	for inv, n := range rep.Violations {
		if inv != InvListChanged.String() {
			if got := n; got != 0 {
				t.Errorf("%s: %v: n = %v, want 0", inv, rep.ViolationExamples[inv], got)
			}
		}
	}
	if !strings.Contains(first(rep.ErrorExamples), "notification probe") {
		t.Errorf("the probe's start went unheard too: %q lacks %q", first(rep.ErrorExamples), "notification probe")
	}
}
