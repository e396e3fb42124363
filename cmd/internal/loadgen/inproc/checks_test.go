package inproc

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
)

// Every checker test runs one deterministic scenario three times: against
// the real catalog and a correct fake, which must show zero violations
// (and at least one check, or the scenario proved nothing), and against a
// fake with the fault the checker exists for, which must be caught.

// system makes a fresh system of one kind for a scenario.
type systemKind struct {
	name  string
	bugs  bug
	buggy bool
	real  bool
}

func kinds(faults ...bug) []systemKind {
	ks := []systemKind{{name: "catalog", real: true}, {name: "fake"}}
	for _, b := range faults {
		ks = append(ks, systemKind{name: "fake with " + bugName(b), bugs: b, buggy: true})
	}
	return ks
}

func bugName(b bug) string {
	return map[bug]string{
		bugRunDeadBodies: "dead bodies run", bugUnconditionalStop: "unconditional stop",
		bugStopRemovesPlan: "stop removes any plan", bugNoAuth: "no auth", bugCapOvershoot: "cap overshoot",
		bugSlotsNotFreed: "slots not freed", bugListDead: "dead listed", bugGoneForDead: "resolve returns dead",
		bugDupDead: "dead incumbent blocks", bugLeak: "leak", bugSlotLeak: "slot leak",
		bugBodyAfterStop: "body after stop", bugStaleBody: "stale body", bugLiveTakeover: "live takeover",
		bugMatchDead: "dead template matched", bugLessSpecific: "less specific template", bugWrongVars: "wrong variables",
		bugVarNamesDistinct: "variable names distinct", bugUpdateDead: "dead consumer publishes",
		bugUpdateDropped: "update dropped", bugNoDrain: "no drain", bugDrainHangs: "drain hangs",
		bugTornListing: "torn listing", bugListDying: "dying listed", bugDeathSilent: "death silent",
	}[b]
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Names, cfg.Cap, cfg.Consumers, cfg.Resolvers = 4, 4, 2, 2
	return cfg
}

// newTestWorld builds a world on a system of kind k.
func newTestWorld(t *testing.T, k systemKind, cfg Config) *world {
	t.Helper()
	var sys System
	if k.real {
		cs, err := NewCatalogSystem(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sys = cs
	} else {
		f := newFake(cfg.Cap, k.bugs)
		t.Cleanup(f.Close)
		sys = f
	}
	return newWorld(cfg, sys)
}

func allOps() *latencies {
	return latency.NewBook(numOps).Set(false, opCall, opList, opStart, opStop, opLateStop, opMCPCall, opMCPList, opGet, opRead, opMCPGet, opMCPRead)
}

// endBy ends h by shape sh, collecting garbage meanwhile for a drop, and
// fails the test if the consumer did not die that way.
func endBy(t *testing.T, w *world, h *held, sh shape) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if sh == shapeDrop {
		go w.gcHelper(ctx, time.Millisecond)
	}
	if got, want := w.end(h, sh, allOps()), sh; got != want {
		t.Fatalf("consumer %s did not die by %s: w.end(h, sh, allOps()) = %v, want %v", h.rec.tag, sh, got, want)
	}
}

func mustStart(t *testing.T, w *world, ns *nameState, public bool) *held {
	t.Helper()
	h, err := w.start(ns, public, allOps())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// verdict asserts what the scenario's system must show for inv.
func verdict(t *testing.T, w *world, k systemKind, inv Invariant) {
	t.Helper()
	if k.buggy {
		if got := w.t.Violations(inv); got <= 0 {
			t.Errorf("%s went unnoticed by the %s checker: w.t.Violations(inv) = %v, want > 0", k.name, inv, got)
		}
		for _, ex := range w.t.Examples(inv) {
			t.Logf("caught: %s", ex)
		}
		return
	}
	if got := w.t.Checks(inv); got <= 0 {
		t.Errorf("the scenario never checked %s: w.t.Checks(inv) = %v, want > 0", inv, got)
	}
	if got := w.t.Violations(inv); got != 0 {
		t.Errorf("false alarm: %v: w.t.Violations(inv) = %v, want 0", w.t.Examples(inv), got)
	}
	if got := w.t.Errors(); got != 0 {
		t.Errorf("errors: %v: w.t.Errors() = %v, want 0", w.t.ErrorExamples(), got)
	}
}

// Invariant 1: a call that begins after its owner was observed dead never
// runs the owner's body, whatever shape the owner died by.
func TestCheckerBodyAfterDeath(t *testing.T) {
	for _, k := range kinds(bugRunDeadBodies) {
		for _, sh := range []shape{shapeStop, shapeCancel, shapePanic, shapeDrop} {
			if k.buggy && sh == shapeStop {
				continue // Stop removes the entry itself: there is no dead entry to run
			}
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, testConfig())
				ns := w.names[0]
				h := mustStart(t, w, ns, true)
				if got, want := w.call(context.Background(), ns, credValid, allOps()), outcomeOK; got != want {
					t.Errorf("w.call(context.Background(), ns, credValid, allOps()) = %v, want %v", got, want)
				}
				endBy(t, w, h, sh)
				o := w.call(context.Background(), ns, credValid, allOps())
				if !k.buggy {
					if got, want := o, outcomeUnknown; got != want {
						t.Errorf("o = %v, want %v", got, want)
					}
				}
				verdict(t, w, k, InvBodyAfterDeath)
			})
		}
	}
}

// Invariant 8: once Stop has returned, no body of the consumer starts, not
// even for a call that finds the route still there.
func TestCheckerBodyAfterStop(t *testing.T) {
	for _, k := range kinds(bugBodyAfterStop) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			ns := w.names[0]
			h := mustStart(t, w, ns, true)
			if got, want := w.call(context.Background(), ns, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.call(context.Background(), ns, credValid, allOps()) = %v, want %v", got, want)
			}
			if err := h.k.Stop(context.Background()); err != nil {
				t.Fatalf("h.k.Stop(context.Background()): %v", err)
			}
			h.rec.stopped.Store(true)
			o := w.call(context.Background(), ns, credValid, allOps())
			if !k.buggy {
				if got, want := o, outcomeUnknown; got != want {
					t.Errorf("o = %v, want %v", got, want)
				}
			}
			<-h.done
			verdict(t, w, k, InvBodyAfterStop)
		})
	}
}

// Invariant 9: while one consumer holds a name and lives, calls to the
// name run its body, not a dead predecessor's.
func TestCheckerOneWinner(t *testing.T) {
	for _, k := range kinds(bugStaleBody) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			ns := w.names[0]
			first := mustStart(t, w, ns, true)
			endBy(t, w, first, shapeCancel)
			second := mustStart(t, w, ns, true)
			if got, want := w.call(context.Background(), ns, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.call(context.Background(), ns, credValid, allOps()) = %v, want %v", got, want)
			}
			verdict(t, w, k, InvOneWinner)
			if err := second.k.Stop(context.Background()); err != nil {
				t.Fatalf("second.k.Stop(context.Background()): %v", err)
			}
		})
	}
}

// Invariant 9, at starts: a second start on a name whose holder lives and
// is not stopping is refused; two winners at once are caught whichever of
// them returned first.
func TestCheckerTwoWinners(t *testing.T) {
	for _, k := range kinds(bugLiveTakeover) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			ns := w.names[0]
			first := mustStart(t, w, ns, true)
			second, err := w.start(ns, true, allOps())
			if !k.buggy {
				if err := err; !errors.Is(err, catalog.ErrDuplicate) {
					t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
				}
			}
			verdict(t, w, k, InvOneWinner)
			if err := first.k.Stop(context.Background()); err != nil {
				t.Fatalf("first.k.Stop(context.Background()): %v", err)
			}
			if second != nil {
				if err := second.k.Stop(context.Background()); err != nil {
					t.Fatalf("second.k.Stop(context.Background()): %v", err)
				}
			}
		})
	}
}

// Invariant 2: a late stop of a crashed consumer leaves its successor's
// entry and plan alone.
func TestCheckerLateStop(t *testing.T) {
	for _, k := range kinds(bugUnconditionalStop, bugStopRemovesPlan) {
		for _, sh := range []shape{shapeCancel, shapePanic} {
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, testConfig())
				ns := w.names[1]
				dead := mustStart(t, w, ns, false)
				endBy(t, w, dead, sh)
				succ := mustStart(t, w, ns, false)
				w.lateStop(dead, succ, allOps())
				if got := w.lateChecks.Load(); got != 1 {
					t.Errorf("the probe was inconclusive: w.lateChecks.Load() = %v, want 1", got)
				}
				verdict(t, w, k, InvLateStopRemovedSuccessor)
				endBy(t, w, succ, shapeStop)
			})
		}
	}
}

// Invariant 3: a body behind a plan that needs a role never runs for a
// call without valid credentials.
func TestCheckerUnauthenticatedBody(t *testing.T) {
	for _, k := range kinds(bugNoAuth) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			ns := w.names[2]
			h := mustStart(t, w, ns, false)
			if got, want := w.call(context.Background(), ns, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.call(context.Background(), ns, credValid, allOps()) = %v, want %v", got, want)
			}
			for c := credNone; c < numCreds; c++ {
				o := w.call(context.Background(), ns, c, allOps())
				if !k.buggy {
					if got, want := o, outcomeDenied; got != want {
						t.Errorf("credential %s: o = %v, want %v", c, got, want)
					}
				}
			}
			verdict(t, w, k, InvUnauthenticatedBody)
			endBy(t, w, h, shapeStop)
		})
	}
}

// Invariant 4, first half: the slot counter never exceeds the cap, and
// when quiet it equals the live consumers.
func TestCheckerCapCounter(t *testing.T) {
	for _, k := range kinds(bugCapOvershoot) {
		t.Run(k.name, func(t *testing.T) {
			cfg := testConfig()
			w := newTestWorld(t, k, cfg)
			var hs []*held
			for _, ns := range w.names[:cfg.Cap] {
				hs = append(hs, mustStart(t, w, ns, true))
			}
			w.capc.sample(w.sys.Stats())
			// A duplicate start at full cap must not move the counter.
			_, err := w.start(w.names[0], true, allOps())
			if err := err; !errors.Is(err, catalog.ErrDuplicate) {
				t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
			}
			w.capc.sample(w.sys.Stats())
			w.capc.quiet(context.Background(), w.sys, len(hs), 50*time.Millisecond, "full")
			for _, h := range hs {
				endBy(t, w, h, shapeCancel)
			}
			w.capc.quiet(context.Background(), w.sys, 0, 200*time.Millisecond, "empty")
			verdict(t, w, k, InvCapCounter)
		})
	}
}

// Invariant 4, the quiet half on its own: a counter that drifts above
// what is held but never past the cap passes every sample, and only the
// end-of-run comparison with the live consumers catches it.
func TestCheckerCapCounterQuiet(t *testing.T) {
	for _, k := range kinds(bugSlotLeak) {
		t.Run(k.name, func(t *testing.T) {
			cfg := testConfig()
			w := newTestWorld(t, k, cfg)
			a := mustStart(t, w, w.names[0], true)
			b := mustStart(t, w, w.names[1], true)
			endBy(t, w, a, shapeStop)
			w.capc.sample(w.sys.Stats())
			if k.buggy {
				if got := w.t.Violations(InvCapCounter); got != 0 {
					t.Fatalf("the samples alone must not see this fault: w.t.Violations(InvCapCounter) = %v, want 0", got)
				}
			}
			w.capc.quiet(context.Background(), w.sys, 1, 50*time.Millisecond, "one live")
			endBy(t, w, b, shapeCancel)
			verdict(t, w, k, InvCapCounter)
		})
	}
}

// Invariant 4, second half: dead entries release their slots, so a start
// at full cap succeeds once every holder was observed dead.
func TestCheckerCapRefusedWithRoom(t *testing.T) {
	for _, k := range kinds(bugSlotsNotFreed) {
		t.Run(k.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Names = cfg.Cap + 1
			w := newTestWorld(t, k, cfg)
			for _, ns := range w.names[:cfg.Cap] {
				endBy(t, w, mustStart(t, w, ns, true), shapeCancel)
			}
			h, err := w.start(w.names[cfg.Cap], true, allOps())
			if !k.buggy {
				if err != nil {
					t.Fatal(err)
				}
				endBy(t, w, h, shapeStop)
				// A refusal must still be judged: fill the cap with live
				// consumers and start one more.
				var hs []*held
				for _, ns := range w.names[:cfg.Cap] {
					hs = append(hs, mustStart(t, w, ns, true))
				}
				_, err = w.start(w.names[cfg.Cap], true, allOps())
				if err := err; !errors.Is(err, catalog.ErrCapReached) {
					t.Fatalf("err = %v, want catalog.ErrCapReached", err)
				}
				for _, h := range hs {
					endBy(t, w, h, shapeStop)
				}
			}
			verdict(t, w, k, InvCapCounter)
		})
	}
}

// Invariant 5: a dead owner's tool is never listed, nor resolved, after
// its death was observed.
func TestCheckerDeadEntryListed(t *testing.T) {
	for _, k := range kinds(bugListDead) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			h := mustStart(t, w, w.names[0], true)
			w.list(allOps())
			endBy(t, w, h, shapeCancel)
			w.list(allOps())
			verdict(t, w, k, InvDeadEntryReturned)
		})
	}
}

func TestCheckerDeadEntryResolved(t *testing.T) {
	for _, k := range kinds(bugGoneForDead) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			ns := w.names[3]
			h := mustStart(t, w, ns, true)
			endBy(t, w, h, shapePanic)
			o := w.call(context.Background(), ns, credValid, allOps())
			if !k.buggy {
				if got, want := o, outcomeUnknown; got != want {
					t.Errorf("o = %v, want %v", got, want)
				}
			}
			verdict(t, w, k, InvDeadEntryReturned)
		})
	}
}

// Invariant 6: a start after the incumbent was observed dead is never
// refused as a duplicate.
func TestCheckerDuplicateWithDeadIncumbent(t *testing.T) {
	for _, k := range kinds(bugDupDead) {
		for _, sh := range []shape{shapeCancel, shapePanic, shapeDrop} {
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, testConfig())
				ns := w.names[0]
				endBy(t, w, mustStart(t, w, ns, true), sh)
				h, err := w.start(ns, true, allOps())
				if !k.buggy {
					if err != nil {
						t.Fatal(err)
					}
					if got := w.takeovers.Load(); got != 1 {
						t.Errorf("w.takeovers.Load() = %v, want 1", got)
					}
					endBy(t, w, h, shapeStop)
				}
				verdict(t, w, k, InvDuplicateWithDeadIncumbent)
			})
		}
	}
}

// Invariant 7, end of run: goroutines and heap come back to the baseline
// once every consumer ended.
func TestCheckerLeakAtEnd(t *testing.T) {
	for _, k := range kinds(bugLeak) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, testConfig())
			w.growth.tol.EndWait = 500 * time.Millisecond
			runtime.GC()
			w.growth.setBaseline(readProcess())
			for i := range 300 {
				h := mustStart(t, w, w.names[i%len(w.names)], true)
				endBy(t, w, h, []shape{shapeStop, shapeCancel}[i%2])
			}
			w.growth.judgeEnd()
			verdict(t, w, k, InvResourceGrowth)
		})
	}
}

// Invariant 7, during the run: a series that keeps growing is flagged, a
// noisy flat one is not.
func TestCheckerGrowthSeries(t *testing.T) {
	series := func(g func(i int) Sample) []Sample {
		out := make([]Sample, 200)
		for i := range out {
			out[i] = g(i)
		}
		return out
	}
	const mib = 1 << 20
	tests := []struct {
		name    string
		samples []Sample
		want    int64
	}{
		{"flat with noise", series(func(i int) Sample {
			return Sample{Goroutines: 40 + (i*7)%30, HeapLive: 8*mib + uint64((i*13)%5)*mib}
		}), 0},
		{"goroutine leak", series(func(i int) Sample { return Sample{Goroutines: 40 + 2*i, HeapLive: 8 * mib} }), 1},
		{"heap leak", series(func(i int) Sample { return Sample{Goroutines: 40, HeapLive: 8*mib + uint64(i)*mib/2} }), 1},
		{"too short to judge", series(func(i int) Sample { return Sample{Goroutines: 40 + 100*i} })[:8], 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &tally{}
			g := newGrowthChecker(tl, DefaultGrowthTolerance, readProcess)
			for _, s := range tt.samples {
				g.add(s)
			}
			g.judgeRun()
			if got, want := tl.Violations(InvResourceGrowth), tt.want; got != want {
				t.Errorf("%v: tl.Violations(InvResourceGrowth) = %v, want %v", tl.Examples(InvResourceGrowth), got, want)
			}
		})
	}
}
