package bindsec_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var modes = []bindsec.MissingPlanMode{bindsec.Deny, bindsec.PassThrough}

// eachMode runs fn once per missing-plan mode with a fresh book: the
// ADR's guarantees must hold in both.
func eachMode(t *testing.T, fn func(t *testing.T, b *bindsec.Book)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) { fn(t, bindsec.NewBook(bindsec.WithMissingPlan(m))) })
	}
}

// live mints a token that the test releases when it ends.
func live(t testing.TB) *owner.Token {
	tok := owner.New()
	t.Cleanup(tok.Release)
	return tok
}

// dead returns the Ref of a token that has died.
func dead() owner.Ref {
	tok := owner.New()
	tok.Release()
	return tok.Ref()
}

// newCatalog is the route registry the plans sit beside: the consumer that
// wins a route's entry is the one whose plan must be enforced.
func newCatalog(t testing.TB) *shardreg.Registry[string] {
	t.Helper()
	c, err := shardreg.New[string](shardreg.WithValidator(shardreg.ToolName))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var ctx = context.Background()

// tokens is the authenticator most tests share; see staticTable.
var tokens = bindsec.NewStaticTokens(staticTable())

var adminPlan = bindsec.Plan{Roles: []string{"admin"}}

// noCredentialLeak fails the test if err mentions a credential.
func noCredentialLeak(t *testing.T, err error, credentials ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, c := range credentials {
		if c != "" {
			if got := err.Error(); strings.Contains(got, c) {
				t.Errorf("an error must never carry a credential: err.Error() = %q, want it not to contain %q", got, c)
			}
		}
	}
}

// ---- registration ----------------------------------------------------------

func TestInvalidNames(t *testing.T) {
	bad := map[string]string{
		"empty":     "",
		"too long":  strings.Repeat("x", shardreg.MaxNameLen+1),
		"not UTF-8": "tool\xff",
	}
	for why, name := range bad {
		t.Run(why, func(t *testing.T) {
			eachMode(t, func(t *testing.T, b *bindsec.Book) {
				o := live(t)
				if err := b.RegisterPlan(name, adminPlan, o.Ref()); !errors.Is(err, bindsec.ErrInvalidName) {
					t.Errorf("err = %v, want bindsec.ErrInvalidName", err)
				}
				if err := b.RegisterPlanTakeover(name, adminPlan, o.Ref()); !errors.Is(err, bindsec.ErrInvalidName) {
					t.Errorf("err = %v, want bindsec.ErrInvalidName", err)
				}
				if err := b.RegisterPlan(name, adminPlan, owner.Ref{}); !errors.Is(err, bindsec.ErrInvalidName) {
					t.Errorf("the name is checked first: err = %v, want bindsec.ErrInvalidName", err)
				}
				if b.UnregisterPlanOwned(name, o.Ref()) {
					t.Errorf("b.UnregisterPlanOwned(name, o.Ref()) is true")
				}
				_, ok := b.PlanFor(name)
				if ok {
					t.Errorf("b.PlanFor(name) found an entry")
				}
				if len(b.Plans()) != 0 {
					t.Errorf("b.Plans() = %v, want empty", b.Plans())
				}

				// Guard of such a route is refused in both modes: it can
				// never have had a plan, so PassThrough must not open it.
				_, err := b.Guard(ctx, name, tokAdmin, tokens)
				if !errors.Is(err, bindsec.ErrInvalidName) {
					t.Fatalf("err = %v, want bindsec.ErrInvalidName", err)
				}
				if got := len(err.Error()); got >= 300 {
					t.Errorf("a hostile name must not blow up the error: len(err.Error()) = %v, want < %v", got, 300)
				}
				_, err = b.GuardOwned(ctx, name, o.Ref(), tokAdmin, tokens)
				if !errors.Is(err, bindsec.ErrPlanOwner) {
					t.Fatalf("err = %v, want bindsec.ErrPlanOwner", err)
				}
				if got := len(err.Error()); got >= 300 {
					t.Errorf("a hostile name must not blow up the error: len(err.Error()) = %v, want < %v", got, 300)
				}
			})
		})
	}
}

func TestErrDeadOwner(t *testing.T) {
	for _, o := range []struct {
		name string
		ref  owner.Ref
	}{{"released", dead()}, {"zero Ref", owner.Ref{}}} {
		t.Run(o.name, func(t *testing.T) {
			b := bindsec.NewBook()
			if err := b.RegisterPlan("fresh", adminPlan, o.ref); !errors.Is(err, bindsec.ErrDeadOwner) {
				t.Errorf("err = %v, want bindsec.ErrDeadOwner", err)
			}
			if err := b.RegisterPlanTakeover("fresh", adminPlan, o.ref); !errors.Is(err, bindsec.ErrDeadOwner) {
				t.Errorf("err = %v, want bindsec.ErrDeadOwner", err)
			}
			_, ok := b.PlanFor("fresh")
			if ok {
				t.Errorf("b.PlanFor(\"fresh\") found an entry")
			}

			// A dead owner cannot take over a live plan either.
			incumbent := live(t)
			if err := b.RegisterPlan("held", adminPlan, incumbent.Ref()); err != nil {
				t.Fatal(err)
			}
			if err := b.RegisterPlanTakeover("held", bindsec.Plan{Public: true}, o.ref); !errors.Is(err, bindsec.ErrDeadOwner) {
				t.Errorf("err = %v, want bindsec.ErrDeadOwner", err)
			}
			if err := b.RegisterPlan("held", bindsec.Plan{Public: true}, o.ref); !errors.Is(err, bindsec.ErrDeadOwner) {
				t.Errorf("err = %v, want bindsec.ErrDeadOwner", err)
			}
			_, po, ok := b.Lookup("held")
			if !ok {
				t.Fatalf("b.Lookup(\"held\") found nothing")
			}
			if !po.Same(incumbent.Ref()) {
				t.Errorf("po.Same(incumbent.Ref()) is false")
			}
		})
	}
}

func TestRegisterPlan(t *testing.T) {
	t.Run("live incumbent kept, also against itself", func(t *testing.T) {
		b := bindsec.NewBook()
		a := live(t)
		if err := b.RegisterPlan("tool", adminPlan, a.Ref()); err != nil {
			t.Fatal(err)
		}
		for _, o := range []owner.Ref{live(t).Ref(), a.Ref()} {
			err := b.RegisterPlan("tool", bindsec.Plan{Public: true}, o)
			if !errors.Is(err, bindsec.ErrPlanHeld) {
				t.Fatalf("err = %v, want bindsec.ErrPlanHeld", err)
			}
			if got := err.Error(); !strings.Contains(got, `"tool"`) {
				t.Errorf("err.Error() = %q, want it to contain %q", got, `"tool"`)
			}
		}
		p, po, ok := b.Lookup("tool")
		if !ok {
			t.Fatalf("b.Lookup(\"tool\") found nothing")
		}
		if !reflect.DeepEqual(p, adminPlan) {
			t.Errorf("p = %v, want %v", p, adminPlan)
		}
		if !po.Same(a.Ref()) {
			t.Errorf("po.Same(a.Ref()) is false")
		}
	})
	t.Run("dead incumbent replaced", func(t *testing.T) {
		b := bindsec.NewBook()
		registerDead("tool", bindsec.Plan{Public: true})(t, b)
		n := live(t)
		if err := b.RegisterPlan("tool", adminPlan, n.Ref()); err != nil {
			t.Fatal(err)
		}
		p, po, ok := b.Lookup("tool")
		if !ok {
			t.Fatalf("b.Lookup(\"tool\") found nothing")
		}
		if !reflect.DeepEqual(p, adminPlan) {
			t.Errorf("p = %v, want %v", p, adminPlan)
		}
		if !po.Same(n.Ref()) {
			t.Errorf("po.Same(n.Ref()) is false")
		}
	})
}

func TestRegisterPlanTakeover(t *testing.T) {
	for _, incumbentAlive := range []bool{true, false} {
		t.Run(fmt.Sprintf("incumbent alive=%v", incumbentAlive), func(t *testing.T) {
			eachMode(t, func(t *testing.T, b *bindsec.Book) {
				old := owner.New()
				defer old.Release()
				if err := b.RegisterPlan("tool", bindsec.Plan{Public: true}, old.Ref()); err != nil {
					t.Fatal(err)
				}
				if !incumbentAlive {
					old.Release()
				}
				winner := live(t)
				if err := b.RegisterPlanTakeover("tool", adminPlan, winner.Ref()); err != nil {
					t.Fatal(err)
				}

				p, po, ok := b.Lookup("tool")
				if !ok {
					t.Fatalf("b.Lookup(\"tool\") found nothing")
				}
				if !reflect.DeepEqual(p, adminPlan) {
					t.Errorf("p = %v, want %v", p, adminPlan)
				}
				if !po.Same(winner.Ref()) {
					t.Errorf("po.Same(winner.Ref()) is false")
				}
				if b.UnregisterPlanOwned("tool", old.Ref()) {
					t.Errorf("the overwritten owner's cleanup must not remove the winner's plan: b.UnregisterPlanOwned(\"tool\", old.Ref()) is true")
				}
				_, err := b.Guard(ctx, "tool", "", tokens)
				if !errors.Is(err, bindsec.ErrUnauthenticated) {
					t.Errorf("the overwritten public plan must be gone: err = %v, want bindsec.ErrUnauthenticated", err)
				}

				// Re-asserting is idempotent for the winner.
				if err := b.RegisterPlanTakeover("tool", adminPlan, winner.Ref()); err != nil {
					t.Fatal(err)
				}
				if got := len(b.Plans()); got != 1 {
					t.Errorf("len(b.Plans()) = %d, want %d", got, 1)
				}
			})
		})
	}
}

func TestUnregisterPlanOwned(t *testing.T) {
	tests := []struct {
		name string
		// setup registers "tool" and returns the Ref that tries to remove it.
		setup func(t *testing.T, b *bindsec.Book) owner.Ref
		want  bool
	}{
		{"same live owner", func(t *testing.T, b *bindsec.Book) owner.Ref {
			o := live(t)
			if err := b.RegisterPlan("tool", adminPlan, o.Ref()); err != nil {
				t.Fatal(err)
			}
			return o.Ref()
		}, true},
		{"same owner, dead, before anyone replaced it", func(t *testing.T, b *bindsec.Book) owner.Ref {
			o := owner.New()
			if err := b.RegisterPlan("tool", adminPlan, o.Ref()); err != nil {
				t.Fatal(err)
			}
			o.Release()
			return o.Ref()
		}, true},
		{"another live owner", func(t *testing.T, b *bindsec.Book) owner.Ref {
			if err := b.RegisterPlan("tool", adminPlan, live(t).Ref()); err != nil {
				t.Fatal(err)
			}
			return live(t).Ref()
		}, false},
		{"another dead owner", func(t *testing.T, b *bindsec.Book) owner.Ref {
			if err := b.RegisterPlan("tool", adminPlan, live(t).Ref()); err != nil {
				t.Fatal(err)
			}
			return dead()
		}, false},
		{"zero Ref", func(t *testing.T, b *bindsec.Book) owner.Ref {
			if err := b.RegisterPlan("tool", adminPlan, live(t).Ref()); err != nil {
				t.Fatal(err)
			}
			return owner.Ref{}
		}, false},
		{"no plan", func(t *testing.T, _ *bindsec.Book) owner.Ref { return live(t).Ref() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bindsec.NewBook()
			o := tt.setup(t, b)
			if tt.want {
				// Nothing may read the book before the removal: a read
				// would reclaim a dead owner's plan, leaving nothing to
				// remove.
				if !b.UnregisterPlanOwned("tool", o) {
					t.Errorf("b.UnregisterPlanOwned(\"tool\", o) is false")
				}
				_, ok := b.PlanFor("tool")
				if ok {
					t.Errorf("b.PlanFor(\"tool\") found an entry")
				}
			} else {
				before := b.Plans()
				if b.UnregisterPlanOwned("tool", o) {
					t.Errorf("b.UnregisterPlanOwned(\"tool\", o) is true")
				}
				if got := b.Plans(); !reflect.DeepEqual(got, before) {
					t.Errorf("nothing changed: b.Plans() = %v, want %v", got, before)
				}
			}
			if b.UnregisterPlanOwned("tool", o) {
				t.Errorf("a second removal finds nothing: b.UnregisterPlanOwned(\"tool\", o) is true")
			}
		})
	}
}

func TestPlansSortedLiveOnly(t *testing.T) {
	b := bindsec.NewBook()
	if len(b.Plans()) != 0 {
		t.Errorf("b.Plans() = %v, want empty", b.Plans())
	}
	o := live(t)
	doomed := owner.New()
	for _, r := range []string{"zeta", "alpha", "mcp.tool.b", "mcp.tool.a", "Beta", "gamma"} {
		who := o.Ref()
		if r == "gamma" || r == "Beta" {
			who = doomed.Ref()
		}
		if err := b.RegisterPlan(r, bindsec.Plan{Roles: []string{r}}, who); err != nil {
			t.Fatal(err)
		}
	}
	want := func(routes ...string) []bindsec.RoutePlan {
		out := make([]bindsec.RoutePlan, len(routes))
		for i, r := range routes {
			out[i] = bindsec.RoutePlan{Route: r, Plan: bindsec.Plan{Roles: []string{r}}}
		}
		return out
	}
	if have, expected := b.Plans(), want("Beta", "alpha", "gamma", "mcp.tool.a", "mcp.tool.b", "zeta"); !reflect.DeepEqual(have, expected) {
		t.Errorf("sorted by byte order: b.Plans() = %v, want %v", have, expected)
	}
	doomed.Release()
	if have, expected := b.Plans(), want("alpha", "mcp.tool.a", "mcp.tool.b", "zeta"); !reflect.DeepEqual(have, expected) {
		t.Errorf("dead owners' plans are not listed: b.Plans() = %v, want %v", have, expected)
	}
}

func TestPlanForDoesNotAllocate(t *testing.T) {
	b := bindsec.NewBook()
	if err := b.RegisterPlan("mcp.tool.name-000123", adminPlan, live(t).Ref()); err != nil {
		t.Fatal(err)
	}
	var ok bool
	hit := testing.AllocsPerRun(1000, func() { _, ok = b.PlanFor("mcp.tool.name-000123") })
	if !ok {
		t.Fatalf("b.PlanFor(\"mcp.tool.name-000123\") found nothing")
	}
	if hit != 0 {
		t.Errorf("PlanFor hit: hit = %v, want 0", hit)
	}
	miss := testing.AllocsPerRun(1000, func() { _, ok = b.PlanFor("mcp.tool.name-999999") })
	if ok {
		t.Fatalf("b.PlanFor(\"mcp.tool.name-999999\") found an entry")
	}
	if miss != 0 {
		t.Errorf("PlanFor miss: miss = %v, want 0", miss)
	}
}

func TestMissingPlanMode(t *testing.T) {
	if got := bindsec.Deny.String(); got != "deny" {
		t.Errorf("bindsec.Deny.String() = %q, want \"deny\"", got)
	}
	if got := bindsec.PassThrough.String(); got != "pass-through" {
		t.Errorf("bindsec.PassThrough.String() = %q, want \"pass-through\"", got)
	}
	if got := bindsec.MissingPlanMode(7).String(); got != "MissingPlanMode(7)" {
		t.Errorf("bindsec.MissingPlanMode(7).String() = %q, want \"MissingPlanMode(7)\"", got)
	}
	if got := bindsec.NewBook().Mode(); got != bindsec.Deny {
		t.Errorf("deny is the default: bindsec.NewBook().Mode() = %v, want bindsec.Deny", got)
	}
	if got := bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough)).Mode(); got != bindsec.PassThrough {
		t.Errorf("bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough)).Mode() = %v, want bindsec.PassThrough", got)
	}
	if got := bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough), bindsec.WithMissingPlan(bindsec.Deny)).Mode(); got != bindsec.Deny {
		t.Errorf("the last option wins: bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough), bindsec.WithMissingPlan(bindsec.Deny)).Mode() = %v, want bindsec.Deny", got)
	}

	// Only PassThrough opens a route without a plan: a mode from a newer
	// or corrupted configuration fails closed.
	_, err := bindsec.NewBook(bindsec.WithMissingPlan(7)).Guard(ctx, "tool", "", tokens)
	if !errors.Is(err, bindsec.ErrNoPlan) {
		t.Errorf("err = %v, want bindsec.ErrNoPlan", err)
	}
}

// The sentinels shared with the registry match either way, so one check
// covers a route refused by the catalog and by the book.
func TestSharedSentinels(t *testing.T) {
	if !errors.Is(bindsec.ErrInvalidName, shardreg.ErrInvalidName) {
		t.Errorf("err = %v, want shardreg.ErrInvalidName", bindsec.ErrInvalidName)
	}
	if !errors.Is(bindsec.ErrDeadOwner, shardreg.ErrDeadOwner) {
		t.Errorf("err = %v, want shardreg.ErrDeadOwner", bindsec.ErrDeadOwner)
	}
	for _, e := range []error{bindsec.ErrUnauthenticated, bindsec.ErrForbidden, bindsec.ErrExpired, bindsec.ErrNoPlan, bindsec.ErrPlanHeld, bindsec.ErrPlanOwner} {
		for _, f := range []error{bindsec.ErrUnauthenticated, bindsec.ErrForbidden, bindsec.ErrExpired, bindsec.ErrNoPlan, bindsec.ErrPlanHeld, bindsec.ErrPlanOwner} {
			if e != f {
				if errors.Is(e, f) {
					t.Errorf("err = %v, want one that is not %v", e, f)
				}
			}
		}
	}
}
