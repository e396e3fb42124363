package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/livereg/livereg/bindsec"
)

// namedPlan is one plan book or floor, as the plan workloads see it.
type namedPlan struct {
	name string
	new  func() PlanResolver
}

// planImpls lists the books, then the floors.
func planImpls() []namedPlan {
	var out []namedPlan
	for _, p := range PlanBooks() {
		out = append(out, namedPlan{p.Name, func() PlanResolver { return p.New() }})
	}
	for _, p := range PlanFloors() {
		out = append(out, namedPlan{p.Name, p.New})
	}
	return out
}

// needsRole is the plan every route gets: not public, one role.
var needsRole = bindsec.Plan{Roles: []string{"tools:call"}}

type planFixture struct {
	p      PlanResolver
	routes []string
}

func newPlanFixture(b *testing.B, newP func() PlanResolver, n int) planFixture {
	p := newP()
	routes := benchNames(n)
	refs := poolRefs(n)
	for i, route := range routes {
		if err := PreloadPlan(p, route, needsRole, refs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := p.PlanFor(routes[n-1]); !ok {
		b.Fatal("a preloaded plan is missing")
	}
	return planFixture{p, routes}
}

// BenchmarkPlanFor looks up the plan of a live route from every goroutine,
// as dispatch does before every call.
func BenchmarkPlanFor(b *testing.B) {
	for _, n := range []int{128, 10_000} {
		for _, impl := range planImpls() {
			run(b, fmt.Sprintf("n=%d/impl=%s", n, impl.name), func(b *testing.B) (planFixture, func()) {
				return newPlanFixture(b, impl.new, n), nil
			}, func(b *testing.B, f planFixture) {
				var st stagger
				b.RunParallel(func(pb *testing.PB) {
					i, found := st.start(len(f.routes)), 0
					for pb.Next() {
						if _, ok := f.p.PlanFor(f.routes[i]); ok {
							found++
						}
						if i++; i == len(f.routes) {
							i = 0
						}
					}
					sink.Add(int64(found))
				})
			})
		}
	}
}

// BenchmarkGuard admits a request with a valid bearer token through the
// route's plan: plan lookup, then bindsec.StaticTokens (a SHA-256 and
// constant-time compares over three tokens), then the role check. The
// floors do the same after a bare map lookup.
func BenchmarkGuard(b *testing.B) {
	const n = 128
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"token-good":  bindsec.NewPrincipal("alice", "tools:call"),
		"token-other": bindsec.NewPrincipal("bob", "resources:read"),
		"token-third": bindsec.NewPrincipal("carol"),
	})
	ctx := context.Background()
	for _, impl := range planImpls() {
		run(b, fmt.Sprintf("n=%d/impl=%s", n, impl.name), func(b *testing.B) (planFixture, func()) {
			f := newPlanFixture(b, impl.new, n)
			if _, err := f.p.Guard(ctx, f.routes[0], "token-good", auth); err != nil {
				b.Fatal(err)
			}
			return f, nil
		}, func(b *testing.B, f planFixture) {
			var st stagger
			b.RunParallel(func(pb *testing.PB) {
				i := st.start(len(f.routes))
				for pb.Next() {
					if _, err := f.p.Guard(ctx, f.routes[i], "token-good", auth); err != nil {
						b.Error(err)
						return
					}
					if i++; i == len(f.routes) {
						i = 0
					}
				}
			})
		})
	}
}
