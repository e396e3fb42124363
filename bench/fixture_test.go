package bench

import (
	"flag"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
)

// The 1,000,000-entry cases take a few hundred megabytes and most of a
// minute to build; -short or -large=false leaves them out.
var large = flag.Bool("large", true, "run the 1,000,000-entry benchmarks (-short skips them too)")

const largeN = 1_000_000

// sizes drops the large sizes when they are not wanted.
func sizes(ns ...int) []int {
	out := ns[:0:0]
	for _, n := range ns {
		if n >= largeN && (testing.Short() || !*large) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// toolName is the i-th name of the suite: MCP-shaped, about 20 bytes.
func toolName(i int) string { return fmt.Sprintf("mcp.tool.name-%06d", i) }

// nameCache holds toolName(0), toolName(1), ... so that names are made once
// per run, outside every timed section.
var nameCache []string

// benchNames returns the first n names.
func benchNames(n int) []string {
	for i := len(nameCache); i < n; i++ {
		nameCache = append(nameCache, toolName(i))
	}
	return nameCache[:n:n]
}

// ownerPool holds one live token per entry: ADR-0068 starts one consumer per
// route, so each entry has its own owner and a liveness check touches that
// owner's own cache line, as in a real catalog. Fixtures of every
// implementation share the pool; workloads that kill owners mint their own.
var ownerPool []*owner.Token

// poolRefs returns the Refs of the first n pool tokens.
func poolRefs(n int) []owner.Ref {
	for len(ownerPool) < n {
		ownerPool = append(ownerPool, owner.New())
	}
	refs := make([]owner.Ref, n)
	for i := range refs {
		refs[i] = ownerPool[i].Ref()
	}
	return refs
}

// shrinkFixtures lets go of what the large cases built, so that their heap
// does not slow the garbage collector down in later benchmarks. Releasing
// the tokens advances the death clock; every later fixture starts after it.
func shrinkFixtures() {
	const keep = 200_000
	if len(ownerPool) > keep {
		for _, t := range ownerPool[keep:] {
			t.Release()
		}
		ownerPool = ownerPool[:keep:keep]
	}
	if len(nameCache) > 2*keep {
		nameCache = nameCache[: 2*keep : 2*keep]
	}
	runtime.GC()
}

// fill preloads n ready entries, named benchNames(n) and owned by the pool.
func fill(tb testing.TB, dst Resolver, n int) []string {
	tb.Helper()
	keys := benchNames(n)
	refs := poolRefs(n)
	for i, k := range keys {
		if err := Preload(dst, k, i, refs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return keys
}

// named is one implementation or floor, as the read-only workloads see it.
type named struct {
	name string
	new  func(capacity int) Resolver
}

// resolvers lists the registries, then the floors.
func resolvers() []named {
	var out []named
	for _, impl := range Registries() {
		out = append(out, named{impl.Name, func(n int) Resolver { return impl.New(n) }})
	}
	for _, f := range Floors() {
		out = append(out, named{f.Name, func(int) Resolver { return f.New() }})
	}
	return out
}

// run runs body as the sub-benchmark name. The testing package calls a
// sub-benchmark's function again for every b.N it tries, every -count and
// every -cpu; run builds the fixture on the first call only, so that it is
// built once, never timed, and not at all when -bench filters the case out.
// The cleanup setup returns runs after the last call.
func run[F any](b *testing.B, name string, setup func(b *testing.B) (F, func()), body func(b *testing.B, f F)) {
	var (
		f       F
		cleanup func()
		built   bool
	)
	b.Run(name, func(b *testing.B) {
		if !built {
			f, cleanup = setup(b)
			built = true
		}
		b.ReportAllocs()
		b.ResetTimer()
		body(b, f)
	})
	if cleanup != nil {
		cleanup()
	}
	// The fixture is garbage now; collect it here rather than inside the
	// next case's timing.
	runtime.GC()
}

// sink keeps results observable, so that no lookup is optimised away.
var sink atomic.Int64

// stagger spreads the starting points of parallel goroutines over keys.
type stagger struct{ next atomic.Uint64 }

func (s *stagger) start(n int) int { return int(s.next.Add(7919) % uint64(n)) }

// resolveLoop resolves keys round-robin from every goroutine.
func resolveLoop(b *testing.B, r Resolver, keys []string) {
	var st stagger
	b.RunParallel(func(pb *testing.PB) {
		i, hits := st.start(len(keys)), 0
		for pb.Next() {
			if _, _, ok := r.Lookup(keys[i]); ok {
				hits++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		sink.Add(int64(hits))
	})
}

// mustResolve checks a fixture before it is timed: a benchmark of hits that
// misses, or of misses that hit, would measure the wrong path.
func mustResolve(tb testing.TB, r Resolver, keys []string, want bool) {
	tb.Helper()
	for _, k := range []string{keys[0], keys[len(keys)/2], keys[len(keys)-1]} {
		if _, _, ok := r.Lookup(k); ok != want {
			tb.Fatalf("Lookup(%q) = %v, want %v", k, ok, want)
		}
	}
}
