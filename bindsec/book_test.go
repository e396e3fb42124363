package bindsec_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
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
			assert.NotContains(t, err.Error(), c, "an error must never carry a credential")
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
				assert.ErrorIs(t, b.RegisterPlan(name, adminPlan, o.Ref()), bindsec.ErrInvalidName)
				assert.ErrorIs(t, b.RegisterPlanTakeover(name, adminPlan, o.Ref()), bindsec.ErrInvalidName)
				assert.ErrorIs(t, b.RegisterPlan(name, adminPlan, owner.Ref{}), bindsec.ErrInvalidName, "the name is checked first")
				assert.False(t, b.UnregisterPlanOwned(name, o.Ref()))
				_, ok := b.PlanFor(name)
				assert.False(t, ok)
				assert.Empty(t, b.Plans())

				// Guard of such a route is refused in both modes: it can
				// never have had a plan, so PassThrough must not open it.
				_, err := b.Guard(ctx, name, tokAdmin, tokens)
				require.ErrorIs(t, err, bindsec.ErrInvalidName)
				assert.Less(t, len(err.Error()), 300, "a hostile name must not blow up the error")
				_, err = b.GuardOwned(ctx, name, o.Ref(), tokAdmin, tokens)
				require.ErrorIs(t, err, bindsec.ErrPlanOwner)
				assert.Less(t, len(err.Error()), 300, "a hostile name must not blow up the error")
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
			assert.ErrorIs(t, b.RegisterPlan("fresh", adminPlan, o.ref), bindsec.ErrDeadOwner)
			assert.ErrorIs(t, b.RegisterPlanTakeover("fresh", adminPlan, o.ref), bindsec.ErrDeadOwner)
			_, ok := b.PlanFor("fresh")
			assert.False(t, ok)

			// A dead owner cannot take over a live plan either.
			incumbent := live(t)
			require.NoError(t, b.RegisterPlan("held", adminPlan, incumbent.Ref()))
			assert.ErrorIs(t, b.RegisterPlanTakeover("held", bindsec.Plan{Public: true}, o.ref), bindsec.ErrDeadOwner)
			assert.ErrorIs(t, b.RegisterPlan("held", bindsec.Plan{Public: true}, o.ref), bindsec.ErrDeadOwner)
			_, po, ok := b.Lookup("held")
			require.True(t, ok)
			assert.True(t, po.Same(incumbent.Ref()))
		})
	}
}

func TestRegisterPlan(t *testing.T) {
	t.Run("live incumbent kept, also against itself", func(t *testing.T) {
		b := bindsec.NewBook()
		a := live(t)
		require.NoError(t, b.RegisterPlan("tool", adminPlan, a.Ref()))
		for _, o := range []owner.Ref{live(t).Ref(), a.Ref()} {
			err := b.RegisterPlan("tool", bindsec.Plan{Public: true}, o)
			require.ErrorIs(t, err, bindsec.ErrPlanHeld)
			assert.Contains(t, err.Error(), `"tool"`)
		}
		p, po, ok := b.Lookup("tool")
		require.True(t, ok)
		assert.Equal(t, adminPlan, p)
		assert.True(t, po.Same(a.Ref()))
	})
	t.Run("dead incumbent replaced", func(t *testing.T) {
		b := bindsec.NewBook()
		registerDead("tool", bindsec.Plan{Public: true})(t, b)
		n := live(t)
		require.NoError(t, b.RegisterPlan("tool", adminPlan, n.Ref()))
		p, po, ok := b.Lookup("tool")
		require.True(t, ok)
		assert.Equal(t, adminPlan, p)
		assert.True(t, po.Same(n.Ref()))
	})
}

func TestRegisterPlanTakeover(t *testing.T) {
	for _, incumbentAlive := range []bool{true, false} {
		t.Run(fmt.Sprintf("incumbent alive=%v", incumbentAlive), func(t *testing.T) {
			eachMode(t, func(t *testing.T, b *bindsec.Book) {
				old := owner.New()
				defer old.Release()
				require.NoError(t, b.RegisterPlan("tool", bindsec.Plan{Public: true}, old.Ref()))
				if !incumbentAlive {
					old.Release()
				}
				winner := live(t)
				require.NoError(t, b.RegisterPlanTakeover("tool", adminPlan, winner.Ref()))

				p, po, ok := b.Lookup("tool")
				require.True(t, ok)
				assert.Equal(t, adminPlan, p)
				assert.True(t, po.Same(winner.Ref()))
				assert.False(t, b.UnregisterPlanOwned("tool", old.Ref()), "the overwritten owner's cleanup must not remove the winner's plan")
				_, err := b.Guard(ctx, "tool", "", tokens)
				assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "the overwritten public plan must be gone")

				// Re-asserting is idempotent for the winner.
				require.NoError(t, b.RegisterPlanTakeover("tool", adminPlan, winner.Ref()))
				assert.Len(t, b.Plans(), 1)
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
			require.NoError(t, b.RegisterPlan("tool", adminPlan, o.Ref()))
			return o.Ref()
		}, true},
		{"same owner, dead, before anyone replaced it", func(t *testing.T, b *bindsec.Book) owner.Ref {
			o := owner.New()
			require.NoError(t, b.RegisterPlan("tool", adminPlan, o.Ref()))
			o.Release()
			return o.Ref()
		}, true},
		{"another live owner", func(t *testing.T, b *bindsec.Book) owner.Ref {
			require.NoError(t, b.RegisterPlan("tool", adminPlan, live(t).Ref()))
			return live(t).Ref()
		}, false},
		{"another dead owner", func(t *testing.T, b *bindsec.Book) owner.Ref {
			require.NoError(t, b.RegisterPlan("tool", adminPlan, live(t).Ref()))
			return dead()
		}, false},
		{"zero Ref", func(t *testing.T, b *bindsec.Book) owner.Ref {
			require.NoError(t, b.RegisterPlan("tool", adminPlan, live(t).Ref()))
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
				assert.True(t, b.UnregisterPlanOwned("tool", o))
				_, ok := b.PlanFor("tool")
				assert.False(t, ok)
			} else {
				before := b.Plans()
				assert.False(t, b.UnregisterPlanOwned("tool", o))
				assert.Equal(t, before, b.Plans(), "nothing changed")
			}
			assert.False(t, b.UnregisterPlanOwned("tool", o), "a second removal finds nothing")
		})
	}
}

func TestPlansSortedLiveOnly(t *testing.T) {
	b := bindsec.NewBook()
	assert.Empty(t, b.Plans())
	o := live(t)
	doomed := owner.New()
	for _, r := range []string{"zeta", "alpha", "mcp.tool.b", "mcp.tool.a", "Beta", "gamma"} {
		who := o.Ref()
		if r == "gamma" || r == "Beta" {
			who = doomed.Ref()
		}
		require.NoError(t, b.RegisterPlan(r, bindsec.Plan{Roles: []string{r}}, who))
	}
	want := func(routes ...string) []bindsec.RoutePlan {
		out := make([]bindsec.RoutePlan, len(routes))
		for i, r := range routes {
			out[i] = bindsec.RoutePlan{Route: r, Plan: bindsec.Plan{Roles: []string{r}}}
		}
		return out
	}
	assert.Equal(t, want("Beta", "alpha", "gamma", "mcp.tool.a", "mcp.tool.b", "zeta"), b.Plans(), "sorted by byte order")
	doomed.Release()
	assert.Equal(t, want("alpha", "mcp.tool.a", "mcp.tool.b", "zeta"), b.Plans(), "dead owners' plans are not listed")
}

func TestPlanForDoesNotAllocate(t *testing.T) {
	b := bindsec.NewBook()
	require.NoError(t, b.RegisterPlan("mcp.tool.name-000123", adminPlan, live(t).Ref()))
	var ok bool
	hit := testing.AllocsPerRun(1000, func() { _, ok = b.PlanFor("mcp.tool.name-000123") })
	require.True(t, ok)
	assert.Zero(t, hit, "PlanFor hit")
	miss := testing.AllocsPerRun(1000, func() { _, ok = b.PlanFor("mcp.tool.name-999999") })
	require.False(t, ok)
	assert.Zero(t, miss, "PlanFor miss")
}

func TestMissingPlanMode(t *testing.T) {
	assert.Equal(t, "deny", bindsec.Deny.String())
	assert.Equal(t, "pass-through", bindsec.PassThrough.String())
	assert.Equal(t, "MissingPlanMode(7)", bindsec.MissingPlanMode(7).String())
	assert.Equal(t, bindsec.Deny, bindsec.NewBook().Mode(), "deny is the default")
	assert.Equal(t, bindsec.PassThrough, bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough)).Mode())
	assert.Equal(t, bindsec.Deny, bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough), bindsec.WithMissingPlan(bindsec.Deny)).Mode(), "the last option wins")

	// Only PassThrough opens a route without a plan: a mode from a newer
	// or corrupted configuration fails closed.
	_, err := bindsec.NewBook(bindsec.WithMissingPlan(7)).Guard(ctx, "tool", "", tokens)
	assert.ErrorIs(t, err, bindsec.ErrNoPlan)
}

// The sentinels shared with the registry match either way, so one check
// covers a route refused by the catalog and by the book.
func TestSharedSentinels(t *testing.T) {
	assert.ErrorIs(t, bindsec.ErrInvalidName, shardreg.ErrInvalidName)
	assert.ErrorIs(t, bindsec.ErrDeadOwner, shardreg.ErrDeadOwner)
	for _, e := range []error{bindsec.ErrUnauthenticated, bindsec.ErrForbidden, bindsec.ErrExpired, bindsec.ErrNoPlan, bindsec.ErrPlanHeld, bindsec.ErrPlanOwner} {
		for _, f := range []error{bindsec.ErrUnauthenticated, bindsec.ErrForbidden, bindsec.ErrExpired, bindsec.ErrNoPlan, bindsec.ErrPlanHeld, bindsec.ErrPlanOwner} {
			if e != f {
				assert.NotErrorIs(t, e, f)
			}
		}
	}
}
