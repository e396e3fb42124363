package bench

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// A baseline that skipped part of ADR-0068 would look faster than it is.
// Every scenario here therefore runs against every registry in the
// comparison, livereg included; the floors are not registries and are left
// out on purpose.

type scenario struct {
	name string
	run  func(t *testing.T, mk func(capacity int) Registry)
}

func TestConformance(t *testing.T) {
	for _, impl := range Registries() {
		t.Run(impl.Name, func(t *testing.T) {
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) { s.run(t, impl.New) })
			}
		})
	}
}

// live mints a token that the test releases at the end unless it kills it
// itself first.
func live(t *testing.T) *owner.Token {
	tok := owner.New()
	t.Cleanup(tok.Release)
	return tok
}

// start registers name for tok and marks it ready, as a consumer start
// does.
func start(t *testing.T, r Registry, name string, v int, tok *owner.Token) {
	t.Helper()
	if err := r.Register(name, v, tok.Ref()); err != nil {
		t.Fatal(err)
	}
	if !r.MarkReady(name, tok.Ref()) {
		t.Fatalf("r.MarkReady(name, tok.Ref()) is false")
	}
}

// resolvesTo asserts that name resolves to v, owned by tok.
func resolvesTo(t *testing.T, r Registry, name string, v int, tok *owner.Token) {
	t.Helper()
	e, ok := r.Resolve(name)
	if !ok {
		t.Fatalf("%s must resolve: ok is false", name)
	}
	if e.Value != v {
		t.Errorf("e.Value = %v, want %v", e.Value, v)
	}
	if !e.Owner.Same(tok.Ref()) {
		t.Errorf("%s must be owned by the expected token: e.Owner.Same(tok.Ref()) is false", name)
	}
	if e.Name != name {
		t.Errorf("e.Name = %q, want %q", e.Name, name)
	}
	if !e.Ready {
		t.Errorf("e.Ready is false")
	}
}

func names(list []Entry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.Name
	}
	return out
}

var scenarios = []scenario{
	{"takeover after drop", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		a.Release()
		start(t, r, "x", 2, b)
		resolvesTo(t, r, "x", 2, b)
		if got := r.Len(); got != 1 {
			t.Errorf("r.Len() = %v, want 1", got)
		}
	}},
	{"live duplicate rejected", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		if err := r.Register("x", 2, b.Ref()); !errors.Is(err, shardreg.ErrDuplicate) {
			t.Fatalf("err = %v, want shardreg.ErrDuplicate", err)
		}
		if err := r.Register("x", 3, a.Ref()); !errors.Is(err, shardreg.ErrDuplicate) {
			t.Fatalf("also for the same owner: err = %v, want shardreg.ErrDuplicate", err)
		}
		resolvesTo(t, r, "x", 1, a)
		if got := r.Len(); got != 1 {
			t.Errorf("r.Len() = %v, want 1", got)
		}
	}},
	{"late stop keeps replacement", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		a.Release()
		start(t, r, "x", 2, b)
		if r.UnregisterOwned("x", a.Ref()) {
			t.Errorf("a dead owner's late stop removes nothing: r.UnregisterOwned(\"x\", a.Ref()) is true")
		}
		resolvesTo(t, r, "x", 2, b)
		if !r.UnregisterOwned("x", b.Ref()) {
			t.Errorf("r.UnregisterOwned(\"x\", b.Ref()) is false")
		}
		_, ok := r.Resolve("x")
		if ok {
			t.Errorf("r.Resolve(\"x\") found an entry")
		}
		if got := r.Len(); got != 0 {
			t.Errorf("r.Len() = %v, want 0", got)
		}
	}},
	{"takeover at full cap uses no slot", func(t *testing.T, mk func(int) Registry) {
		r := mk(2)
		a, b, c, d := live(t), live(t), live(t), live(t)
		start(t, r, "x", 1, a)
		start(t, r, "y", 2, c)
		a.Release()
		start(t, r, "x", 3, b)
		if got := r.Len(); got != 2 {
			t.Errorf("r.Len() = %v, want 2", got)
		}
		if err := r.Register("z", 4, d.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
			t.Fatalf("err = %v, want shardreg.ErrCapReached", err)
		}
		resolvesTo(t, r, "x", 3, b)
		resolvesTo(t, r, "y", 2, c)
	}},
	{"dead entry under another name frees its slot", func(t *testing.T, mk func(int) Registry) {
		r := mk(2)
		a, c, d := live(t), live(t), live(t)
		start(t, r, "x", 1, a)
		start(t, r, "y", 2, c)
		a.Release()
		start(t, r, "z", 3, d)
		if got := r.Len(); got != 2 {
			t.Errorf("r.Len() = %v, want 2", got)
		}
		_, ok := r.Resolve("x")
		if ok {
			t.Errorf("r.Resolve(\"x\") found an entry")
		}
		resolvesTo(t, r, "z", 3, d)
	}},
	{"full cap of live owners refuses", func(t *testing.T, mk func(int) Registry) {
		r := mk(2)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		start(t, r, "y", 2, a)
		if err := r.Register("z", 3, b.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
			t.Fatalf("err = %v, want shardreg.ErrCapReached", err)
		}
		if got := r.Len(); got != 2 {
			t.Errorf("r.Len() = %v, want 2", got)
		}
	}},
	{"listing hides dead and not-ready, sorted", func(t *testing.T, mk func(int) Registry) {
		r := mk(8)
		dying := live(t)
		for i, name := range []string{"c", "a", "b"} {
			start(t, r, name, i, live(t))
		}
		if err := r.Register("d", 9, live(t).Ref()); err != nil {
			t.Fatalf("registered, never marked ready: %v", err)
		}
		start(t, r, "e", 10, dying)
		dying.Release()
		if got, want := names(r.ListReady()), ([]string{"a", "b", "c"}); !reflect.DeepEqual(got, want) {
			t.Errorf("names(r.ListReady()) = %v, want %v", got, want)
		}
		if got := r.Len(); got != 4 {
			t.Errorf("the listing reclaims the dead entry, keeps the not-ready one: r.Len() = %v, want 4", got)
		}

		p1, next, err := r.Page("", 2)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(p1), ([]string{"a", "b"}); !reflect.DeepEqual(got, want) {
			t.Errorf("names(p1) = %v, want %v", got, want)
		}
		p2, next, err := r.Page(next, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(p2), ([]string{"c"}); !reflect.DeepEqual(got, want) {
			t.Errorf("names(p2) = %v, want %v", got, want)
		}
		if len(next) != 0 {
			t.Errorf("next = %v, want empty", next)
		}
	}},
	{"not ready until its own owner marks it", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		if err := r.Register("x", 1, a.Ref()); err != nil {
			t.Fatal(err)
		}
		_, ok := r.Resolve("x")
		if ok {
			t.Errorf("a new entry is not ready: ok is true")
		}
		if r.MarkReady("x", b.Ref()) {
			t.Errorf("only the owner marks ready: r.MarkReady(\"x\", b.Ref()) is true")
		}
		if !r.MarkReady("x", a.Ref()) {
			t.Errorf("r.MarkReady(\"x\", a.Ref()) is false")
		}
		if !r.MarkReady("x", a.Ref()) {
			t.Errorf("idempotent: r.MarkReady(\"x\", a.Ref()) is false")
		}
		resolvesTo(t, r, "x", 1, a)
	}},
	{"resolve reclaims a dead entry", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a := live(t)
		start(t, r, "x", 1, a)
		a.Release()
		_, ok := r.Resolve("x")
		if ok {
			t.Errorf("r.Resolve(\"x\") found an entry")
		}
		if got := r.Len(); got != 0 {
			t.Errorf("r.Len() = %v, want 0", got)
		}
	}},
	{"dead owner and bad names refused, checks in order", func(t *testing.T, mk func(int) Registry) {
		r := mk(1)
		a, dead := live(t), owner.New()
		dead.Release()
		if err := r.Register("x", 1, dead.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
			t.Fatalf("err = %v, want shardreg.ErrDeadOwner", err)
		}
		if err := r.Register("x", 1, owner.Ref{}); !errors.Is(err, shardreg.ErrDeadOwner) {
			t.Fatalf("err = %v, want shardreg.ErrDeadOwner", err)
		}
		if err := r.Register("", 1, a.Ref()); !errors.Is(err, shardreg.ErrInvalidName) {
			t.Fatalf("err = %v, want shardreg.ErrInvalidName", err)
		}
		if err := r.Register("\xff", 1, a.Ref()); !errors.Is(err, shardreg.ErrInvalidName) {
			t.Fatalf("err = %v, want shardreg.ErrInvalidName", err)
		}
		if err := r.Register("", 1, dead.Ref()); !errors.Is(err, shardreg.ErrInvalidName) {
			t.Fatalf("name before owner: err = %v, want shardreg.ErrInvalidName", err)
		}
		start(t, r, "x", 1, a)
		if err := r.Register("x", 2, dead.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
			t.Fatalf("owner before duplicate: err = %v, want shardreg.ErrDeadOwner", err)
		}
		if err := r.Register("x", 2, live(t).Ref()); !errors.Is(err, shardreg.ErrDuplicate) {
			t.Fatalf("duplicate before cap: err = %v, want shardreg.ErrDuplicate", err)
		}
		if got := r.Len(); got != 1 {
			t.Errorf("r.Len() = %v, want 1", got)
		}
	}},
	{"concurrent restart: exactly one winner", func(t *testing.T, mk func(int) Registry) {
		const rounds, racers = 200, 8
		for round := range rounds {
			r := mk(1)
			a := live(t)
			start(t, r, "x", -1, a)
			a.Release()
			toks := make([]*owner.Token, racers)
			errs := make([]error, racers)
			for i := range toks {
				toks[i] = owner.New()
			}
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for i := range racers {
				wg.Go(func() {
					<-gate
					errs[i] = r.Register("x", i, toks[i].Ref())
				})
			}
			close(gate)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				if err == nil {
					if winner != -1 {
						t.Fatalf("round %d: two winners: winner = %v, want -1", round, winner)
					}
					winner = i
				} else {
					if !errors.Is(err, shardreg.ErrDuplicate) {
						t.Fatalf("round %d: err = %v, want shardreg.ErrDuplicate", round, err)
					}
				}
			}
			if winner == -1 {
				t.Fatalf("round %d: no winner: winner = %v, want anything else", round, winner)
			}
			if got := r.Len(); got != 1 {
				t.Fatalf("r.Len() = %v, want 1", got)
			}
			if !r.MarkReady("x", toks[winner].Ref()) {
				t.Fatalf("r.MarkReady(\"x\", toks[winner].Ref()) is false")
			}
			resolvesTo(t, r, "x", winner, toks[winner])
			for _, tok := range toks {
				tok.Release()
			}
		}
	}},
}

// The floors are only lookups; this checks that they find what they were
// given, so that a floor cannot be fast by missing.
func TestFloorsResolve(t *testing.T) {
	tok := live(t)
	for _, f := range Floors() {
		t.Run(f.Name, func(t *testing.T) {
			fl := f.New()
			for i := range 10 {
				if err := Preload(fl, fmt.Sprint("k", i), i, tok.Ref()); err != nil {
					t.Fatal(err)
				}
			}
			e, ok := fl.Resolve("k7")
			if !ok {
				t.Fatalf("fl.Resolve(\"k7\") found nothing")
			}
			if e.Value != 7 {
				t.Errorf("e.Value = %v, want 7", e.Value)
			}
			_, ok = fl.Resolve("k10")
			if ok {
				t.Errorf("fl.Resolve(\"k10\") found an entry")
			}
		})
	}
}

func TestPlanConformance(t *testing.T) {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"good":  bindsec.NewPrincipal("alice", "tools:call"),
		"plain": bindsec.NewPrincipal("bob"),
	})
	need := bindsec.Plan{Roles: []string{"tools:call"}}
	ctx := context.Background()
	for _, impl := range PlanBooks() {
		t.Run(impl.Name, func(t *testing.T) {
			t.Run("live plan kept, dead plan replaced", func(t *testing.T) {
				b := impl.New()
				a, c := live(t), live(t)
				if err := b.RegisterPlan("r", need, a.Ref()); err != nil {
					t.Fatal(err)
				}
				if err := b.RegisterPlan("r", bindsec.Plan{Public: true}, c.Ref()); !errors.Is(err, bindsec.ErrPlanHeld) {
					t.Fatalf("err = %v, want bindsec.ErrPlanHeld", err)
				}
				p, ok := b.PlanFor("r")
				if !ok {
					t.Fatalf("b.PlanFor(\"r\") found nothing")
				}
				if p.Public {
					t.Errorf("the incumbent's plan stays: p.Public is true")
				}
				a.Release()
				if err := b.RegisterPlan("r", bindsec.Plan{Public: true}, c.Ref()); err != nil {
					t.Fatal(err)
				}
				p, ok = b.PlanFor("r")
				if !ok {
					t.Fatalf("b.PlanFor(\"r\") found nothing")
				}
				if !p.Public {
					t.Errorf("p.Public is false")
				}
			})
			t.Run("late stop keeps replacement", func(t *testing.T) {
				b := impl.New()
				a, c := live(t), live(t)
				if err := b.RegisterPlan("r", bindsec.Plan{Public: true}, a.Ref()); err != nil {
					t.Fatal(err)
				}
				a.Release()
				if err := b.RegisterPlan("r", need, c.Ref()); err != nil {
					t.Fatal(err)
				}
				if b.UnregisterPlanOwned("r", a.Ref()) {
					t.Errorf("b.UnregisterPlanOwned(\"r\", a.Ref()) is true")
				}
				_, err := b.Guard(ctx, "r", "", auth)
				if !errors.Is(err, bindsec.ErrUnauthenticated) {
					t.Fatalf("the replacement's plan is enforced: err = %v, want bindsec.ErrUnauthenticated", err)
				}
				if !b.UnregisterPlanOwned("r", c.Ref()) {
					t.Errorf("b.UnregisterPlanOwned(\"r\", c.Ref()) is false")
				}
			})
			t.Run("dead owner's plan ignored", func(t *testing.T) {
				b := impl.New()
				a := live(t)
				if err := b.RegisterPlan("r", need, a.Ref()); err != nil {
					t.Fatal(err)
				}
				a.Release()
				_, ok := b.PlanFor("r")
				if ok {
					t.Errorf("b.PlanFor(\"r\") found an entry")
				}
				_, err := b.Guard(ctx, "r", "good", auth)
				if !errors.Is(err, bindsec.ErrNoPlan) {
					t.Fatalf("err = %v, want bindsec.ErrNoPlan", err)
				}
			})
			t.Run("takeover overwrites a live plan", func(t *testing.T) {
				b := impl.New()
				a, c := live(t), live(t)
				if err := b.RegisterPlan("r", bindsec.Plan{Public: true}, a.Ref()); err != nil {
					t.Fatal(err)
				}
				if err := b.RegisterPlanTakeover("r", need, c.Ref()); err != nil {
					t.Fatal(err)
				}
				p, ok := b.PlanFor("r")
				if !ok {
					t.Fatalf("b.PlanFor(\"r\") found nothing")
				}
				if want := ([]string{"tools:call"}); !reflect.DeepEqual(p.Roles, want) {
					t.Errorf("p.Roles = %v, want %v", p.Roles, want)
				}
			})
			t.Run("guard", func(t *testing.T) {
				b := impl.New()
				a := live(t)
				roles := []string{"tools:call"}
				if err := b.RegisterPlan("r", bindsec.Plan{Roles: roles}, a.Ref()); err != nil {
					t.Fatal(err)
				}
				roles[0] = "changed" // plans are copied on registration
				pr, err := b.Guard(ctx, "r", "good", auth)
				if err != nil {
					t.Fatal(err)
				}
				if got := pr.Subject(); got != "alice" {
					t.Errorf("pr.Subject() = %q, want \"alice\"", got)
				}
				_, err = b.Guard(ctx, "r", "plain", auth)
				if !errors.Is(err, bindsec.ErrForbidden) {
					t.Fatalf("err = %v, want bindsec.ErrForbidden", err)
				}
				_, err = b.Guard(ctx, "r", "", auth)
				if !errors.Is(err, bindsec.ErrUnauthenticated) {
					t.Fatalf("err = %v, want bindsec.ErrUnauthenticated", err)
				}
				_, err = b.Guard(ctx, "r", "unknown", auth)
				if !errors.Is(err, bindsec.ErrUnauthenticated) {
					t.Fatalf("err = %v, want bindsec.ErrUnauthenticated", err)
				}
			})
		})
	}
}
