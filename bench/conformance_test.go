package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, r.Register(name, v, tok.Ref()))
	require.True(t, r.MarkReady(name, tok.Ref()))
}

// resolvesTo asserts that name resolves to v, owned by tok.
func resolvesTo(t *testing.T, r Registry, name string, v int, tok *owner.Token) {
	t.Helper()
	e, ok := r.Resolve(name)
	require.True(t, ok, "%s must resolve", name)
	assert.Equal(t, v, e.Value)
	assert.True(t, e.Owner.Same(tok.Ref()), "%s must be owned by the expected token", name)
	assert.Equal(t, name, e.Name)
	assert.True(t, e.Ready)
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
		assert.Equal(t, 1, r.Len())
	}},
	{"live duplicate rejected", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		require.ErrorIs(t, r.Register("x", 2, b.Ref()), shardreg.ErrDuplicate)
		require.ErrorIs(t, r.Register("x", 3, a.Ref()), shardreg.ErrDuplicate, "also for the same owner")
		resolvesTo(t, r, "x", 1, a)
		assert.Equal(t, 1, r.Len())
	}},
	{"late stop keeps replacement", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		a.Release()
		start(t, r, "x", 2, b)
		assert.False(t, r.UnregisterOwned("x", a.Ref()), "a dead owner's late stop removes nothing")
		resolvesTo(t, r, "x", 2, b)
		assert.True(t, r.UnregisterOwned("x", b.Ref()))
		_, ok := r.Resolve("x")
		assert.False(t, ok)
		assert.Equal(t, 0, r.Len())
	}},
	{"takeover at full cap uses no slot", func(t *testing.T, mk func(int) Registry) {
		r := mk(2)
		a, b, c, d := live(t), live(t), live(t), live(t)
		start(t, r, "x", 1, a)
		start(t, r, "y", 2, c)
		a.Release()
		start(t, r, "x", 3, b)
		assert.Equal(t, 2, r.Len())
		require.ErrorIs(t, r.Register("z", 4, d.Ref()), shardreg.ErrCapReached)
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
		assert.Equal(t, 2, r.Len())
		_, ok := r.Resolve("x")
		assert.False(t, ok)
		resolvesTo(t, r, "z", 3, d)
	}},
	{"full cap of live owners refuses", func(t *testing.T, mk func(int) Registry) {
		r := mk(2)
		a, b := live(t), live(t)
		start(t, r, "x", 1, a)
		start(t, r, "y", 2, a)
		require.ErrorIs(t, r.Register("z", 3, b.Ref()), shardreg.ErrCapReached)
		assert.Equal(t, 2, r.Len())
	}},
	{"listing hides dead and not-ready, sorted", func(t *testing.T, mk func(int) Registry) {
		r := mk(8)
		dying := live(t)
		for i, name := range []string{"c", "a", "b"} {
			start(t, r, name, i, live(t))
		}
		require.NoError(t, r.Register("d", 9, live(t).Ref()), "registered, never marked ready")
		start(t, r, "e", 10, dying)
		dying.Release()
		assert.Equal(t, []string{"a", "b", "c"}, names(r.ListReady()))
		assert.Equal(t, 4, r.Len(), "the listing reclaims the dead entry, keeps the not-ready one")

		p1, next, err := r.Page("", 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, names(p1))
		p2, next, err := r.Page(next, 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"c"}, names(p2))
		assert.Empty(t, next)
	}},
	{"not ready until its own owner marks it", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a, b := live(t), live(t)
		require.NoError(t, r.Register("x", 1, a.Ref()))
		_, ok := r.Resolve("x")
		assert.False(t, ok, "a new entry is not ready")
		assert.False(t, r.MarkReady("x", b.Ref()), "only the owner marks ready")
		assert.True(t, r.MarkReady("x", a.Ref()))
		assert.True(t, r.MarkReady("x", a.Ref()), "idempotent")
		resolvesTo(t, r, "x", 1, a)
	}},
	{"resolve reclaims a dead entry", func(t *testing.T, mk func(int) Registry) {
		r := mk(4)
		a := live(t)
		start(t, r, "x", 1, a)
		a.Release()
		_, ok := r.Resolve("x")
		assert.False(t, ok)
		assert.Equal(t, 0, r.Len())
	}},
	{"dead owner and bad names refused, checks in order", func(t *testing.T, mk func(int) Registry) {
		r := mk(1)
		a, dead := live(t), owner.New()
		dead.Release()
		require.ErrorIs(t, r.Register("x", 1, dead.Ref()), shardreg.ErrDeadOwner)
		require.ErrorIs(t, r.Register("x", 1, owner.Ref{}), shardreg.ErrDeadOwner)
		require.ErrorIs(t, r.Register("", 1, a.Ref()), shardreg.ErrInvalidName)
		require.ErrorIs(t, r.Register("\xff", 1, a.Ref()), shardreg.ErrInvalidName)
		require.ErrorIs(t, r.Register("", 1, dead.Ref()), shardreg.ErrInvalidName, "name before owner")
		start(t, r, "x", 1, a)
		require.ErrorIs(t, r.Register("x", 2, dead.Ref()), shardreg.ErrDeadOwner, "owner before duplicate")
		require.ErrorIs(t, r.Register("x", 2, live(t).Ref()), shardreg.ErrDuplicate, "duplicate before cap")
		assert.Equal(t, 1, r.Len())
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
					require.Equal(t, -1, winner, "round %d: two winners", round)
					winner = i
				} else {
					require.ErrorIs(t, err, shardreg.ErrDuplicate, "round %d", round)
				}
			}
			require.NotEqual(t, -1, winner, "round %d: no winner", round)
			require.Equal(t, 1, r.Len())
			require.True(t, r.MarkReady("x", toks[winner].Ref()))
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
				require.NoError(t, Preload(fl, fmt.Sprint("k", i), i, tok.Ref()))
			}
			e, ok := fl.Resolve("k7")
			require.True(t, ok)
			assert.Equal(t, 7, e.Value)
			_, ok = fl.Resolve("k10")
			assert.False(t, ok)
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
				require.NoError(t, b.RegisterPlan("r", need, a.Ref()))
				require.ErrorIs(t, b.RegisterPlan("r", bindsec.Plan{Public: true}, c.Ref()), bindsec.ErrPlanHeld)
				p, ok := b.PlanFor("r")
				require.True(t, ok)
				assert.False(t, p.Public, "the incumbent's plan stays")
				a.Release()
				require.NoError(t, b.RegisterPlan("r", bindsec.Plan{Public: true}, c.Ref()))
				p, ok = b.PlanFor("r")
				require.True(t, ok)
				assert.True(t, p.Public)
			})
			t.Run("late stop keeps replacement", func(t *testing.T) {
				b := impl.New()
				a, c := live(t), live(t)
				require.NoError(t, b.RegisterPlan("r", bindsec.Plan{Public: true}, a.Ref()))
				a.Release()
				require.NoError(t, b.RegisterPlan("r", need, c.Ref()))
				assert.False(t, b.UnregisterPlanOwned("r", a.Ref()))
				_, err := b.Guard(ctx, "r", "", auth)
				require.ErrorIs(t, err, bindsec.ErrUnauthenticated, "the replacement's plan is enforced")
				assert.True(t, b.UnregisterPlanOwned("r", c.Ref()))
			})
			t.Run("dead owner's plan ignored", func(t *testing.T) {
				b := impl.New()
				a := live(t)
				require.NoError(t, b.RegisterPlan("r", need, a.Ref()))
				a.Release()
				_, ok := b.PlanFor("r")
				assert.False(t, ok)
				_, err := b.Guard(ctx, "r", "good", auth)
				require.ErrorIs(t, err, bindsec.ErrNoPlan)
			})
			t.Run("takeover overwrites a live plan", func(t *testing.T) {
				b := impl.New()
				a, c := live(t), live(t)
				require.NoError(t, b.RegisterPlan("r", bindsec.Plan{Public: true}, a.Ref()))
				require.NoError(t, b.RegisterPlanTakeover("r", need, c.Ref()))
				p, ok := b.PlanFor("r")
				require.True(t, ok)
				assert.Equal(t, []string{"tools:call"}, p.Roles)
			})
			t.Run("guard", func(t *testing.T) {
				b := impl.New()
				a := live(t)
				roles := []string{"tools:call"}
				require.NoError(t, b.RegisterPlan("r", bindsec.Plan{Roles: roles}, a.Ref()))
				roles[0] = "changed" // plans are copied on registration
				pr, err := b.Guard(ctx, "r", "good", auth)
				require.NoError(t, err)
				assert.Equal(t, "alice", pr.Subject())
				_, err = b.Guard(ctx, "r", "plain", auth)
				require.ErrorIs(t, err, bindsec.ErrForbidden)
				_, err = b.Guard(ctx, "r", "", auth)
				require.ErrorIs(t, err, bindsec.ErrUnauthenticated)
				_, err = b.Guard(ctx, "r", "unknown", auth)
				require.ErrorIs(t, err, bindsec.ErrUnauthenticated)
			})
		})
	}
}
