package shardreg_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

func benchName(i int) string { return fmt.Sprintf("mcp.tool.name-%06d", i) }

// filled returns a registry holding n ready entries under one live owner.
func filled(b *testing.B, n int) (*shardreg.Registry[int], []string) {
	b.Helper()
	r, err := shardreg.New[int](shardreg.WithCap(n + 1024))
	if err != nil {
		b.Fatal(err)
	}
	tok := owner.New()
	b.Cleanup(tok.Release)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = benchName(i)
		if err := r.RegisterReady(keys[i], i, tok.Ref()); err != nil {
			b.Fatal(err)
		}
	}
	return r, keys
}

func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{128, 10_000} {
		r, keys := filled(b, n)
		misses := make([]string, len(keys))
		for i := range misses {
			misses[i] = "missing." + keys[i]
		}
		for _, c := range []struct {
			name string
			keys []string
		}{{"hit", keys}, {"miss", misses}} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				var seed atomic.Uint32
				b.RunParallel(func(pb *testing.PB) {
					i := int(seed.Add(7919))
					for pb.Next() {
						i++
						r.Resolve(c.keys[i%len(c.keys)])
					}
				})
			})
		}
	}
}

// BenchmarkChurn registers and unregisters in parallel: each goroutine
// works its own names, as consumers do.
func BenchmarkChurn(b *testing.B) {
	r, err := shardreg.New[int](shardreg.WithCap(1 << 20))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var worker atomic.Int32
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		tok := owner.New()
		defer tok.Release()
		names := make([]string, 64)
		for i := range names {
			names[i] = benchName(w*1000 + i)
		}
		for i := 0; pb.Next(); i++ {
			name := names[i%len(names)]
			if err := r.Register(name, i, tok.Ref()); err != nil {
				b.Error(err)
				return
			}
			r.UnregisterOwned(name, tok.Ref())
		}
	})
}

// BenchmarkRegisterFullCap registers into a registry at its cap with every
// owner live: the death clock lets it refuse in O(1) whatever the cap.
func BenchmarkRegisterFullCap(b *testing.B) {
	for _, n := range []int{128, 10_000, 100_000} {
		b.Run(fmt.Sprintf("cap=%d", n), func(b *testing.B) {
			r, err := shardreg.New[int](shardreg.WithCap(n))
			if err != nil {
				b.Fatal(err)
			}
			tok := owner.New()
			defer tok.Release()
			for i := range n {
				if err := r.RegisterReady(benchName(i), i, tok.Ref()); err != nil {
					b.Fatal(err)
				}
			}
			newcomer := owner.New()
			defer newcomer.Release()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r.Register("newcomer", 0, newcomer.Ref()) == nil {
						b.Error("register at full cap succeeded")
						return
					}
				}
			})
		})
	}
}

func BenchmarkListReady(b *testing.B) {
	r, keys := filled(b, 1000)
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = r.ListReady()
			}
		})
	})
	b.Run("after-change", func(b *testing.B) {
		tok := owner.New()
		defer tok.Release()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			// Flip one entry in and out so that every listing is fresh.
			if i%2 == 0 {
				_ = r.RegisterReady("zz-extra", 0, tok.Ref())
			} else {
				r.UnregisterOwned("zz-extra", tok.Ref())
			}
			_ = r.ListReady()
		}
	})
	_ = keys
}
