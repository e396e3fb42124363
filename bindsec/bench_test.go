package bindsec_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

func benchName(i int) string { return fmt.Sprintf("mcp.tool.name-%06d", i) }

// BenchmarkPlanFor sets the book's lookup beside a plain map lookup of the
// same keys and plans, in the same run, so the price of owner liveness and
// lock-freedom reads straight off the two lines. The map is only read, so
// sharing it between goroutines needs no lock.
func BenchmarkPlanFor(b *testing.B) {
	for _, n := range []int{128, 10_000} {
		book := bindsec.NewBook()
		plain := make(map[string]bindsec.Plan, n)
		tok := owner.New()
		b.Cleanup(tok.Release)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = benchName(i)
			p := bindsec.Plan{Roles: []string{"admin"}}
			if err := book.RegisterPlan(keys[i], p, tok.Ref()); err != nil {
				b.Fatal(err)
			}
			plain[keys[i]] = p
		}
		for _, impl := range []struct {
			name   string
			lookup func(string) (bindsec.Plan, bool)
		}{
			{"book", book.PlanFor},
			{"map", func(k string) (bindsec.Plan, bool) { p, ok := plain[k]; return p, ok }},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", impl.name, n), func(b *testing.B) {
				b.ReportAllocs()
				var seed atomic.Uint32
				b.RunParallel(func(pb *testing.PB) {
					i := int(seed.Add(7919))
					for pb.Next() {
						i++
						if _, ok := impl.lookup(keys[i%len(keys)]); !ok {
							b.Error("miss")
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkGuard is the per-request check with the StaticTokens
// authenticator, which hashes the credential and compares it against every
// digest in the table.
func BenchmarkGuard(b *testing.B) {
	const n = 128
	book := bindsec.NewBook()
	tok := owner.New()
	b.Cleanup(tok.Release)
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-admin":  bindsec.NewPrincipal("ada", "admin", "ops"),
		"tok-reader": bindsec.NewPrincipal("rex", "reader"),
		"tok-ci":     bindsec.NewPrincipal("ci", "deploy"),
	})
	public, guarded := make([]string, n), make([]string, n)
	for i := range n {
		public[i], guarded[i] = benchName(i), benchName(n+i)
		if err := book.RegisterPlan(public[i], bindsec.Plan{Public: true}, tok.Ref()); err != nil {
			b.Fatal(err)
		}
		if err := book.RegisterPlan(guarded[i], bindsec.Plan{Roles: []string{"admin", "ops"}}, tok.Ref()); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		routes []string
		cred   string
	}{
		{"public", public, ""},
		{"guarded/valid-token", guarded, "tok-admin"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var seed atomic.Uint32
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919))
				for pb.Next() {
					i++
					if _, err := book.Guard(ctx, c.routes[i%n], c.cred, auth); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
