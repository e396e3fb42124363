package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/etcdfleet"
)

// rec makes a record on rep: won, alive unless dead, with a lease.
func rec(rep *replica, tag, name string, lease int64, dead bool) *record {
	r := &record{id: 1, name: name, tag: tag, rep: rep}
	done := make(chan struct{})
	if dead {
		close(done)
	}
	r.done = done
	r.won.Store(true)
	r.lease.Store(lease)
	return r
}

// leases answers leaseAlive from a set of live leases.
func leases(live ...int64) func(int64) bool {
	return func(l int64) bool {
		for _, x := range live {
			if x == l {
				return true
			}
		}
		return false
	}
}

func TestClaimCheckerStartWon(t *testing.T) {
	a, b := &replica{id: 1, name: "a"}, &replica{id: 2, name: "b"}
	crashed := &replica{id: 3, name: "c"}
	crashed.crashed.Store(true)
	for _, tc := range []struct {
		name         string
		other        *record
		live         []int64
		violations   int64
		inconclusive int64
	}{
		{"another winner lives with its lease: two live claims", rec(a, "fl-1", "n", 7, false), []int64{7}, 1, 0},
		{"the other winner is dead", rec(a, "fl-1", "n", 7, true), []int64{7}, 0, 0},
		{"the other winner's lease is gone: a lost session", rec(a, "fl-1", "n", 7, false), nil, 0, 1},
		{"the other winner is on a crashed replica", rec(crashed, "fl-1", "n", 7, false), []int64{7}, 0, 0},
		{"the other winner's lease is unknown", rec(a, "fl-1", "n", 0, false), []int64{0}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			c := newClaimChecker(tl, leases(tc.live...), time.Second)
			c.startWon(rec(b, "fl-2", "n", 8, false), []*record{tc.other})
			if got := tl.Violations(InvTwoLiveClaims); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvTwoLiveClaims))
			}
			if got := tl.inconclusive[InvTwoLiveClaims].Load(); got != tc.inconclusive {
				t.Errorf("inconclusive = %d, want %d", got, tc.inconclusive)
			}
		})
	}
	t.Run("a stopping winner", func(t *testing.T) {
		tl := &tally{}
		o := rec(a, "fl-1", "n", 7, false)
		o.stopping.Store(true)
		newClaimChecker(tl, leases(7), time.Second).startWon(rec(b, "fl-2", "n", 8, false), []*record{o})
		if tl.Violations(InvTwoLiveClaims) != 0 {
			t.Errorf("a winner whose Stop began was judged: %v", tl.Examples(InvTwoLiveClaims))
		}
	})
}

func claimValue(t *testing.T, name, tag string) []byte {
	t.Helper()
	b, err := json.Marshal(etcdfleet.Record{Replica: "r", Kind: "tool", Tool: &etcdfleet.ToolDesc{Name: name, Title: tag}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClaimCheckerSample(t *testing.T) {
	const dir = "/p/tools/"
	a := &replica{id: 1, name: "a"}
	for _, tc := range []struct {
		name       string
		kvs        []kv
		live       []int64
		violations int64
	}{
		{"etcd shows the live owner's claim", []kv{{dir + "n", claimValue(t, "n", "fl-1"), 7}}, []int64{7}, 0},
		{"etcd shows another owner's claim", []kv{{dir + "n", claimValue(t, "n", "fl-9"), 9}}, []int64{7, 9}, 1},
		{"etcd shows no claim", nil, []int64{7}, 1},
		{"no claim, but the owner's lease is gone", nil, nil, 0},
		{"a name claimed under another key too", []kv{{dir + "n", claimValue(t, "n", "fl-1"), 7}, {dir + "n2", claimValue(t, "n", "fl-2"), 8}}, []int64{7, 8}, 1},
		{"a name claimed under another key only", []kv{{dir + "n2", claimValue(t, "n", "fl-1"), 7}}, []int64{7}, 2},
		{"a key that does not decode", []kv{{dir + "n", claimValue(t, "n", "fl-1"), 7}, {dir + "x", []byte("{"), 8}}, []int64{7}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			c := newClaimChecker(tl, leases(tc.live...), time.Second)
			c.sample(5, []*record{rec(a, "fl-1", "n", 7, false)}, c.parseClaims(5, dir, tc.kvs))
			if got := tl.Violations(InvTwoLiveClaims); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvTwoLiveClaims))
			}
		})
	}
}

func TestClaimCheckerOutlivedLease(t *testing.T) {
	a := &replica{id: 1, name: "a"}
	tl := &tally{}
	c := newClaimChecker(tl, leases(), time.Second)
	now := time.Unix(100, 0)
	c.now = func() time.Time { return now }
	r := rec(a, "fl-1", "n", 7, false)
	for _, step := range []struct {
		after      time.Duration
		violations int64
	}{{0, 0}, {500 * time.Millisecond, 0}, {time.Second, 0}, {1100 * time.Millisecond, 1}} {
		now = time.Unix(100, 0).Add(step.after)
		c.sample(5, []*record{r}, nil)
		if got := tl.Violations(InvTwoLiveClaims); got != step.violations {
			t.Fatalf("%v after its lease was found gone: violations = %d, want %d", step.after, got, step.violations)
		}
	}
	if got := tl.inconclusive[InvTwoLiveClaims].Load(); got != 3 {
		t.Errorf("inconclusive = %d, want 3 (within the grace)", got)
	}
}

func TestReleaseChecker(t *testing.T) {
	a := &replica{id: 1, name: "a"}
	for _, tc := range []struct {
		name         string
		owner        *record
		stopping     bool
		live         []int64
		violations   int64
		inconclusive int64
	}{
		{"a live owner's key deleted, its lease alive: a late release", rec(a, "fl-1", "n", 7, false), false, []int64{7}, 1, 0},
		{"the owner is dead: its own release", rec(a, "fl-1", "n", 7, true), false, []int64{7}, 0, 0},
		{"the owner is stopping: its Stop's release", rec(a, "fl-1", "n", 7, false), true, []int64{7}, 0, 0},
		{"the lease is gone: expiry or revoke", rec(a, "fl-1", "n", 7, false), false, nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			tc.owner.stopping.Store(tc.stopping)
			c := releaseChecker{t: tl, leaseAlive: leases(tc.live...), lookup: func(tag string) *record {
				if tag == tc.owner.tag {
					return tc.owner
				}
				return nil
			}}
			c.deleted(9, kv{key: "/p/tools/n", value: claimValue(t, "n", "fl-1"), lease: 7})
			c.deleted(9, kv{key: "/p/tools/m", value: claimValue(t, "m", "fl-unknown"), lease: 7})
			if got := tl.Violations(InvLateReleaseRemovedSuccessor); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvLateReleaseRemovedSuccessor))
			}
			if got := tl.inconclusive[InvLateReleaseRemovedSuccessor].Load(); got != tc.inconclusive {
				t.Errorf("inconclusive = %d, want %d", got, tc.inconclusive)
			}
			if got := tl.Checks(InvLateReleaseRemovedSuccessor); got != 1 {
				t.Errorf("checks = %d, want 1 (a key of no loadgen consumer is not judged)", got)
			}
		})
	}
}

func TestBodyChecker(t *testing.T) {
	holder := &replica{id: 1, name: "a"}
	valid := bindsec.NewPrincipal(subjectValid, roleCall)
	for _, tc := range []struct {
		name    string
		death   uint64 // the owner's death mark; 0: alive
		stopped bool
		public  bool
		args    callArgs
		pr      bindsec.Principal
		want    Invariant // 0: none
	}{
		{"a local call while the owner lives", 0, false, false, callArgs{Seq: 10, Cred: credValid, Via: 1}, valid, 0},
		{"a forwarded call while the owner lives", 0, false, false, callArgs{Seq: 10, Cred: credValid, Via: 2}, valid, 0},
		{"a forwarded call that began after the death", 5, false, false, callArgs{Seq: 10, Cred: credValid, Via: 2}, valid, InvForwardBodyAfterDeath},
		{"a local call that began after the death", 5, false, false, callArgs{Seq: 10, Cred: credValid, Via: 1}, valid, InvLocalBodyAfterDeath},
		{"a call that began before the death", 15, false, false, callArgs{Seq: 10, Cred: credValid, Via: 2}, valid, 0},
		{"a body after Stop returned", 0, true, true, callArgs{Seq: 10, Cred: credNone, Via: 2}, bindsec.Principal{}, InvLocalBodyAfterStop},
		{"a non-public body without credentials", 0, false, false, callArgs{Seq: 10, Cred: credNone, Via: 2}, bindsec.Principal{}, InvUnauthenticatedBody},
		{"a public body without credentials", 0, false, true, callArgs{Seq: 10, Cred: credNone, Via: 2}, bindsec.Principal{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			r := rec(holder, "fl-1", "n", 7, false)
			r.public = tc.public
			r.death.Store(tc.death)
			r.stopped.Store(tc.stopped)
			bodyChecker{tl}.bodyRan(r, tc.args, tc.pr)
			for _, inv := range Invariants {
				want := int64(0)
				if inv == tc.want {
					want = 1
				}
				if got := tl.Violations(inv); got != want {
					t.Errorf("%s: violations = %d, want %d (%v)", inv, got, want, tl.Examples(inv))
				}
			}
		})
	}
}

func TestConvergeChecker(t *testing.T) {
	ctx := context.Background()
	x, y := []string{"a=fl-1"}, []string{"a=fl-1", "b=fl-2"}
	for _, tc := range []struct {
		name       string
		agreeAfter time.Duration // -1: never
		violations int64
	}{
		{"the same at once", 0, 0},
		{"the same exactly at the bound", 100 * time.Millisecond, 0},
		{"the same only after the bound", 150 * time.Millisecond, 1},
		{"never the same", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			clk := newFakeClock()
			t0 := clk.Now()
			listings := func() [][]string {
				if tc.agreeAfter >= 0 && clk.Since(t0) >= tc.agreeAfter {
					return [][]string{y, y, y}
				}
				return [][]string{x, y, y}
			}
			convergeChecker{t: tl, bound: 100 * time.Millisecond, clock: clk}.converge(ctx, listings, 300*time.Millisecond)
			if got := tl.Violations(InvListingConvergence); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvListingConvergence))
			}
		})
	}
	t.Run("settled on a listing that is not the live routes", func(t *testing.T) {
		tl := &tally{}
		c := convergeChecker{t: tl, bound: 100 * time.Millisecond, clock: newFakeClock()}
		c.settle(ctx, func() [][]string { return [][]string{y, y} }, func() []string { return x }, 50*time.Millisecond)
		if tl.Violations(InvListingConvergence) != 1 {
			t.Errorf("a stale common listing passed")
		}
		c.settle(ctx, func() [][]string { return [][]string{x, x} }, func() []string { return x }, 50*time.Millisecond)
		if tl.Violations(InvListingConvergence) != 1 {
			t.Errorf("the live routes were reported: %v", tl.Examples(InvListingConvergence))
		}
	})
}

func TestCrashChecker(t *testing.T) {
	errHeld := errors.New("held")
	for _, tc := range []struct {
		name       string
		freeAfter  time.Duration // -1: never
		violations int64
	}{
		{"free at once", 0, 0},
		{"free exactly at the bound", 150 * time.Millisecond, 0},
		{"free only after the bound", 250 * time.Millisecond, 1},
		{"never free", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			clk := newFakeClock()
			t0 := clk.Now()
			start := func(context.Context) error {
				if tc.freeAfter >= 0 && clk.Since(t0) >= tc.freeAfter {
					return nil
				}
				return errHeld
			}
			crashChecker{t: tl, bound: 150 * time.Millisecond, clock: clk}.probe(context.Background(), "probe-1", t0, 5*time.Millisecond, 400*time.Millisecond, start)
			if got := tl.Violations(InvCrashedNamesFreed); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvCrashedNamesFreed))
			}
		})
	}
}

func TestForwardChecker(t *testing.T) {
	via, at := &replica{id: 1, name: "via"}, &replica{id: 2, name: "at"}
	for _, tc := range []struct {
		name         string
		public       bool
		cred         string
		o            outcome
		text         string
		holderDies   bool
		live         []int64 // live leases: the holder's is 7
		stale        bool    // via holds its own consumer of the name, lease 9
		hidden       bool    // via lost its session during the call
		lagging      bool    // via's view located, before the call, a predecessor's record on the holder's replica
		violations   int64
		inconclusive int64
	}{
		{"the holder's body answered", true, credValid, outcomeOK, "fl-1", false, []int64{7}, false, false, false, 0, 0},
		{"denied by the holder's plan", false, credNone, outcomeDenied, "", false, []int64{7}, false, false, false, 0, 0},
		{"another body answered", true, credValid, outcomeOK, "fl-2", false, []int64{7, 8}, false, false, false, 1, 0},
		{"unknown tool", true, credValid, outcomeUnknown, "", false, []int64{7}, false, false, false, 1, 0},
		{"route gone while its owner lived", true, credValid, outcomeGone, "", false, []int64{7}, false, false, false, 1, 0},
		{"peer unavailable while it was up", true, credValid, outcomePeerUnavailable, "", false, []int64{7}, false, false, false, 1, 0},
		{"denied by a public plan", true, credNone, outcomeDenied, "", false, []int64{7}, false, false, false, 1, 0},
		{"denied with the valid credential", false, credValid, outcomeDenied, "", false, []int64{7}, false, false, false, 1, 0},
		{"the holder died during the call", true, credValid, outcomeUnknown, "", true, []int64{7}, false, false, false, 0, 0},
		{"the holder's lease is gone", true, credValid, outcomeUnknown, "", false, nil, false, false, false, 0, 1},
		{"answered by a consumer whose lease is gone", true, credValid, outcomeOK, "fl-2", false, []int64{7}, false, false, false, 0, 1},
		{"denied where via still serves its own consumer, its lease gone", true, credNone, outcomeDenied, "", false, []int64{7}, true, false, false, 0, 1},
		{"denied where via serves its own consumer, its lease alive", true, credNone, outcomeDenied, "", false, []int64{7, 9}, true, false, false, 1, 0},
		{"unknown through a replica that lost its session meanwhile", true, credValid, outcomeUnknown, "", false, []int64{7}, false, true, false, 0, 1},
		{"route gone through a replica that lost its session meanwhile", true, credValid, outcomeGone, "", false, []int64{7}, false, true, false, 1, 0},
		{"unknown through a view that located a predecessor on the holder's replica", true, credValid, outcomeUnknown, "", false, []int64{7}, false, false, true, 0, 1},
		{"route gone through a view that located a predecessor", true, credValid, outcomeGone, "", false, []int64{7}, false, false, true, 1, 0},
		{"peer unavailable through a view that located a predecessor", true, credValid, outcomePeerUnavailable, "", false, []int64{7}, false, false, true, 1, 0},
		{"another body answered through a view that located a predecessor", true, credValid, outcomeOK, "fl-2", false, []int64{7, 8}, false, false, true, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			holder := rec(at, "fl-1", "n", 7, false)
			holder.public = tc.public
			other := rec(via, "fl-2", "n", 8, false)
			stale := rec(via, "fl-3", "n", 9, false)
			c := forwardChecker{t: tl, leaseAlive: leases(tc.live...),
				lookup: func(tag string) *record {
					if tag == other.tag {
						return other
					}
					return nil
				},
				local: func(_ string, _ *replica, since uint64) []*record {
					if since != 5 {
						t.Errorf("local asked from %d, not the call's start, 5", since)
					}
					if tc.stale {
						return []*record{stale}
					}
					return nil
				}}
			if tc.holderDies {
				holder.done = closedChan()
			}
			c.answered(holder, via, 5, tc.cred, tc.o, tc.text, tc.hidden, !tc.lagging, func() string { return "via's state" })
			if got := tl.Violations(InvForwardAnswer); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvForwardAnswer))
			}
			for _, e := range tl.Examples(InvForwardAnswer) {
				if !strings.HasSuffix(e, "; after it, via's state") {
					t.Errorf("a violation without via's state after the call: %q", e)
				}
			}
			if got := tl.inconclusive[InvForwardAnswer].Load(); got != tc.inconclusive {
				t.Errorf("inconclusive = %d, want %d", got, tc.inconclusive)
			}
		})
	}
}

func closedChan() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// newFakeClock is a clock that stands still until the checker sleeps, and
// then moves on by exactly the sleep: the timing checkers' tests judge
// durations of their choosing without waiting for them.
func newFakeClock() clock {
	var now time.Time // one goroutine: the checker's
	return clock{now: func() time.Time { return now }, sleep: func(d time.Duration) { now = now.Add(d) }}
}

// The consumers that may have answered a call are those of its replica
// that lived at its start or later: one that a lost session killed after
// the call began still counts, and one seen dead before it does not.
func TestLiveDuring(t *testing.T) {
	via, other := &replica{id: 1, name: "via"}, &replica{id: 2, name: "other"}
	live := rec(via, "fl-1", "n", 7, false)
	killedDuring := rec(via, "fl-2", "n", 8, true)
	killedDuring.death.Store(6) // the call began at 5
	killedUnseen := rec(via, "fl-3", "n", 9, true)
	deadBefore := rec(via, "fl-4", "n", 10, true)
	deadBefore.death.Store(4)
	elsewhere := rec(other, "fl-5", "n", 11, false)
	w := &world{byName: map[string]*nameState{"n": {name: "n",
		winners: []*record{live, killedDuring, killedUnseen, deadBefore, elsewhere}}}}
	var tags []string
	for _, r := range w.liveDuring("n", via, 5) {
		tags = append(tags, r.tag)
	}
	if want := []string{"fl-1", "fl-2", "fl-3"}; !slices.Equal(tags, want) {
		t.Errorf("liveDuring = %v, want %v", tags, want)
	}
	if got := w.liveDuring("unknown", via, 5); got != nil {
		t.Errorf("liveDuring of an unknown name = %v", got)
	}
}
