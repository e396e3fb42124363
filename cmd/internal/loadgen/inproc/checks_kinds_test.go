package inproc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// The checker scenarios of checks_test.go, on prompts and resource
// templates, and the scenarios of what only templates have. Every fault
// of the fake applies to every kind, so the same faults prove that the
// checkers see them on the new kinds too.

// kindsConfig leaves room for two templates at once: the kinds' cap is a
// quarter of the tool cap.
func kindsConfig() Config {
	cfg := testConfig()
	cfg.Names, cfg.Cap = 8, 8
	return cfg
}

// routeCase picks the name or key a scenario runs on.
type routeCase struct {
	name string
	pick func(w *world) *nameState
}

var routeCases = []routeCase{
	{"prompt", func(w *world) *nameState { return w.prompts[0] }},
	{"template", func(w *world) *nameState { return w.groups[0].specific }},
	{"wide template", func(w *world) *nameState { return w.groups[0].wide }},
	{"resource", func(w *world) *nameState { return w.resources[0] }},
}

// runOp runs a resolver's operation on ns, with its checks: a prompt get, or
// a read of the URI that reaches ns's template.
func runOp(w *world, ns *nameState, cred credClass) outcome {
	ctx := context.Background()
	switch ns.kind {
	case kindPrompt, kindResource:
		return w.getPrompt(ctx, ns, cred, allOps())
	case kindTemplate:
		for _, g := range w.groups {
			if g.wide == ns || g.specific == ns {
				return w.readTemplate(ctx, g, !ns.wide, cred, allOps())
			}
		}
	}
	return w.call(ctx, ns, cred, allOps())
}

// Invariant 1 on prompts and templates.
func TestCheckerKindsBodyAfterDeath(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugRunDeadBodies) {
			for _, sh := range []shape{shapeStop, shapeCancel, shapePanic, shapeDrop} {
				if k.buggy && sh == shapeStop {
					continue
				}
				t.Run(rc.name+"/"+k.name+"/"+sh.String(), func(t *testing.T) {
					w := newTestWorld(t, k, kindsConfig())
					ns := rc.pick(w)
					h := mustStart(t, w, ns, true)
					if got, want := runOp(w, ns, credValid), outcomeOK; got != want {
						t.Errorf("runOp(w, ns, credValid) = %v, want %v", got, want)
					}
					endBy(t, w, h, sh)
					o := runOp(w, ns, credValid)
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
}

// Invariant 3 on prompts and templates.
func TestCheckerKindsUnauthenticatedBody(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugNoAuth) {
			t.Run(rc.name+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				ns := rc.pick(w)
				h := mustStart(t, w, ns, false)
				if got, want := runOp(w, ns, credValid), outcomeOK; got != want {
					t.Errorf("runOp(w, ns, credValid) = %v, want %v", got, want)
				}
				for c := credNone; c < numCreds; c++ {
					if o := runOp(w, ns, c); !k.buggy {
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
}

// Invariant 5 on prompt and template listings.
func TestCheckerKindsDeadListed(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugListDead) {
			t.Run(rc.name+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				ns := rc.pick(w)
				h := mustStart(t, w, ns, true)
				w.listOf(ns.kind, allOps())
				endBy(t, w, h, shapeCancel)
				w.listOf(ns.kind, allOps())
				verdict(t, w, k, InvDeadEntryReturned)
			})
		}
	}
}

// Invariant 5 on prompt gets and templated reads: a route whose owner was
// observed dead is never resolved, not even to answer ErrRouteGone.
func TestCheckerKindsDeadResolved(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugGoneForDead) {
			t.Run(rc.name+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				ns := rc.pick(w)
				h := mustStart(t, w, ns, true)
				endBy(t, w, h, shapePanic)
				if o := runOp(w, ns, credValid); !k.buggy {
					if got, want := o, outcomeUnknown; got != want {
						t.Errorf("o = %v, want %v", got, want)
					}
				}
				verdict(t, w, k, InvDeadEntryReturned)
			})
		}
	}
}

// Invariant 2 on prompts and templates.
func TestCheckerKindsLateStop(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugUnconditionalStop, bugStopRemovesPlan) {
			t.Run(rc.name+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				ns := rc.pick(w)
				dead := mustStart(t, w, ns, false)
				endBy(t, w, dead, shapePanic)
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

// Invariant 9 at starts, on prompts and templates.
func TestCheckerKindsTwoWinners(t *testing.T) {
	for _, rc := range routeCases {
		for _, k := range kinds(bugLiveTakeover) {
			t.Run(rc.name+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				ns := rc.pick(w)
				first := mustStart(t, w, ns, true)
				second, err := w.start(ns, true, allOps())
				if !k.buggy {
					if err := err; !errors.Is(err, catalog.ErrDuplicate) {
						t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
					}
				}
				verdict(t, w, k, InvOneWinner)
				endBy(t, w, first, shapeStop)
				if second != nil {
					endBy(t, w, second, shapeStop)
				}
			})
		}
	}
}

// Invariant 4 per kind, the quiet half: each kind's slot counter is
// compared with its own live consumers; a counter that drifts within the
// cap passes every sample.
func TestCheckerKindsCapQuiet(t *testing.T) {
	for _, kd := range []kind{kindPrompt, kindTemplate, kindResource} {
		for _, k := range kinds(bugSlotLeak) {
			t.Run(kd.String()+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				set, c := w.namesOf(kd), w.capk[kd]
				a := mustStart(t, w, set[0], true)
				b := mustStart(t, w, set[2], true)
				endBy(t, w, a, shapeStop)
				c.sample(w.sys.Stats())
				if k.buggy {
					if got := w.t.Violations(InvCapCounter); got != 0 {
						t.Fatalf("the samples alone must not see this fault: w.t.Violations(InvCapCounter) = %v, want 0", got)
					}
				}
				c.quiet(context.Background(), w.sys, 1, quietWait, "one live")
				endBy(t, w, b, shapeCancel)
				verdict(t, w, k, InvCapCounter)
			})
		}
	}
}

// Invariant 4 per kind, the samples: a kind's slot counter never exceeds
// its own cap.
func TestCheckerKindsCapOvershoot(t *testing.T) {
	for _, kd := range []kind{kindPrompt, kindTemplate, kindResource} {
		for _, k := range kinds(bugCapOvershoot) {
			t.Run(kd.String()+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				set, c := w.namesOf(kd), w.capk[kd]
				var hs []*held
				for _, ns := range set[:c.cap] {
					hs = append(hs, mustStart(t, w, ns, true))
				}
				_, err := w.start(set[0], true, allOps())
				if err := err; !errors.Is(err, catalog.ErrDuplicate) {
					t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
				}
				c.sample(w.sys.Stats())
				verdict(t, w, k, InvCapCounter)
				for _, h := range hs {
					endBy(t, w, h, shapeStop)
				}
			})
		}
	}
}

// Invariant 4 per kind, the refusal half: dead entries of a kind release
// their slots, so a start at that kind's full cap succeeds once every
// holder was observed dead, and a refusal with live holders is judged.
func TestCheckerKindsCapRefused(t *testing.T) {
	for _, kd := range []kind{kindPrompt, kindTemplate, kindResource} {
		for _, k := range kinds(bugSlotsNotFreed) {
			t.Run(kd.String()+"/"+k.name, func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				set, c := w.namesOf(kd), w.capk[kd]
				for _, ns := range set[:c.cap] {
					endBy(t, w, mustStart(t, w, ns, true), shapeCancel)
				}
				h, err := w.start(set[c.cap], true, allOps())
				if !k.buggy {
					if err != nil {
						t.Fatal(err)
					}
					endBy(t, w, h, shapeStop)
					var hs []*held
					for _, ns := range set[:c.cap] {
						hs = append(hs, mustStart(t, w, ns, true))
					}
					_, err = w.start(set[c.cap], true, allOps())
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
}

// Invariant 6 on template variants: a key whose holder was observed dead
// takes a start of its other variant.
func TestCheckerTemplateDuplicateWithDeadIncumbent(t *testing.T) {
	for _, k := range kinds(bugDupDead) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, kindsConfig())
			ns := w.groups[0].specific
			first := mustStart(t, w, ns, true)
			endBy(t, w, first, shapeDrop)
			h, err := w.start(ns, true, allOps())
			if !k.buggy {
				if err != nil {
					t.Fatal(err)
				}
				if first.rec.tmpl == h.rec.tmpl {
					t.Fatalf("the scenario must start both variants: first.rec.tmpl and h.rec.tmpl are both %v", first.rec.tmpl)
				}
				endBy(t, w, h, shapeStop)
			}
			verdict(t, w, k, InvDuplicateWithDeadIncumbent)
		})
	}
}

// Invariant 9 on template variants: two templates that differ only in
// their variable's name never both hold the key.
func TestCheckerTemplateVariantsCollide(t *testing.T) {
	for _, k := range kinds(bugVarNamesDistinct) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, kindsConfig())
			ns := w.groups[0].wide
			first := mustStart(t, w, ns, true)
			second, err := w.start(ns, true, allOps())
			if !k.buggy {
				if err := err; !errors.Is(err, catalog.ErrDuplicate) {
					t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if first.rec.tmpl == second.rec.tmpl {
					t.Fatalf("first.rec.tmpl and second.rec.tmpl are both %v", first.rec.tmpl)
				}
				endBy(t, w, second, shapeStop)
			}
			verdict(t, w, k, InvOneWinner)
			endBy(t, w, first, shapeStop)
		})
	}
}

// Invariant 11: an item URI, which both templates of a group match, is
// read by the specific one while it lives, and by the wide one after.
func TestCheckerTemplateMostSpecific(t *testing.T) {
	for _, k := range kinds(bugLessSpecific) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, kindsConfig())
			g := w.groups[0]
			wide := mustStart(t, w, g.wide, true)
			spec := mustStart(t, w, g.specific, true)
			for range 3 {
				if got, want := w.readTemplate(context.Background(), g, true, credValid, allOps()), outcomeOK; got != want {
					t.Errorf("w.readTemplate(context.Background(), g, true, credValid, allOps()) = %v, want %v", got, want)
				}
			}
			endBy(t, w, spec, shapeCancel)
			if got, want := w.readTemplate(context.Background(), g, true, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.readTemplate(context.Background(), g, true, credValid, allOps()) = %v, want %v", got, want)
			}
			verdict(t, w, k, InvTemplateMatch)
			endBy(t, w, wide, shapeStop)
		})
	}
}

// Invariant 11: a reader gets its own template's variable, holding the
// URI's text.
func TestCheckerTemplateVars(t *testing.T) {
	for _, k := range kinds(bugWrongVars) {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, kindsConfig())
			g := w.groups[0]
			h := mustStart(t, w, g.wide, true)
			if got, want := w.readTemplate(context.Background(), g, false, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.readTemplate(context.Background(), g, false, credValid, allOps()) = %v, want %v", got, want)
			}
			if got, want := w.readTemplate(context.Background(), g, true, credValid, allOps()), outcomeOK; got != want {
				t.Errorf("w.readTemplate(context.Background(), g, true, credValid, allOps()) = %v, want %v", got, want)
			}
			verdict(t, w, k, InvTemplateMatch)
			endBy(t, w, h, shapeStop)
		})
	}
}

// Invariant 5 on templated reads: once the specific template's owner was
// observed dead, an item URI is read by the live wide template, never
// matched to the dead one.
func TestCheckerTemplateDeadMatched(t *testing.T) {
	for _, k := range kinds(bugMatchDead) {
		for _, sh := range []shape{shapeCancel, shapePanic, shapeDrop} {
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				g := w.groups[0]
				wide := mustStart(t, w, g.wide, true)
				spec := mustStart(t, w, g.specific, true)
				endBy(t, w, spec, sh)
				o := w.readTemplate(context.Background(), g, true, credValid, allOps())
				if !k.buggy {
					if got, want := o, outcomeOK; got != want {
						t.Errorf("o = %v, want %v", got, want)
					}
				}
				verdict(t, w, k, InvDeadEntryReturned)
				endBy(t, w, wide, shapeStop)
			})
		}
	}
}

// quietWait bounds a scenario's wait for a kind's counts to settle.
const quietWait = 200 * time.Millisecond
