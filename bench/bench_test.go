package bench

import (
	"fmt"
	"runtime"
	"testing"
)

// Every workload is named Benchmark<Workload>/<parameters>/impl=<name>, with
// the implementation last, so that benchstat -col /impl and cmd/benchreport can
// set implementations side by side. Fixtures are built outside the timing
// (see run); each benchmark reports allocations. Read ratios between
// implementations within one run: absolute times on a shared machine are
// not evidence.

func BenchmarkResolveHit(b *testing.B)  { benchResolve(b, true) }
func BenchmarkResolveMiss(b *testing.B) { benchResolve(b, false) }

// benchResolve resolves from every goroutine at once, 100% reads. Misses
// are names of the same shape that were never registered.
func benchResolve(b *testing.B, hit bool) {
	defer shrinkFixtures()
	type fixture struct {
		r     Resolver
		probe []string
	}
	for _, n := range sizes(128, 10_000, largeN) {
		for _, impl := range resolvers() {
			run(b, fmt.Sprintf("n=%d/impl=%s", n, impl.name), func(b *testing.B) (fixture, func()) {
				r := impl.new(n)
				probe := fill(b, r, n)
				if !hit {
					probe = benchNames(2 * n)[n:]
				}
				mustResolve(b, r, probe, hit)
				return fixture{r, probe}, nil
			}, func(b *testing.B, f fixture) {
				resolveLoop(b, f.r, f.probe)
			})
		}
	}
}

// BenchmarkMemory reports the heap each implementation holds per entry at
// 1,000,000 entries (B/entry), from runtime.MemStats after a collection,
// before and after filling. Keys and owner tokens exist before the first
// reading, so the figure is the structure's own: its table, its entries and
// the string headers it keeps, not the key bytes or the tokens, which every
// implementation shares. ns/op is the time to fill and collect.
func BenchmarkMemory(b *testing.B) {
	if len(sizes(largeN)) == 0 {
		b.Skip("large cases disabled (-short or -large=false)")
	}
	defer shrinkFixtures()
	for _, impl := range resolvers() {
		b.Run(fmt.Sprintf("n=%d/impl=%s", largeN, impl.name), func(b *testing.B) {
			benchNames(largeN)
			poolRefs(largeN)
			var perEntry float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				r := impl.new(largeN)
				fill(b, r, largeN)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perEntry = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / largeN
				runtime.KeepAlive(r)
			}
			b.ReportMetric(perEntry, "B/entry")
		})
	}
}
