package owner_test

import (
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
)

// BenchmarkAlive checks 1,000 Refs per op beside 1,000 loads of plain
// atomic.Bool values in the same run: one sub-nanosecond load cannot be
// timed, a thousand can, and the ratio is what matters.
func BenchmarkAlive(b *testing.B) {
	const n = 1000
	toks := make([]*owner.Token, n)
	refs := make([]owner.Ref, n)
	flags := make([]atomic.Bool, n)
	for i := range toks {
		toks[i] = owner.New()
		refs[i] = toks[i].Ref()
		flags[i].Store(true)
	}
	defer func() {
		for _, t := range toks {
			t.Release()
		}
	}()
	b.Run("Ref.Alive/x1000", func(b *testing.B) {
		b.ReportAllocs()
		live := 0
		for b.Loop() {
			for i := range refs {
				if refs[i].Alive() {
					live++
				}
			}
		}
		sinkInt = live
	})
	b.Run("atomic.Bool.Load/x1000", func(b *testing.B) {
		b.ReportAllocs()
		live := 0
		for b.Loop() {
			for i := range flags {
				if flags[i].Load() {
					live++
				}
			}
		}
		sinkInt = live
	})
}

func BenchmarkMintRelease(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		owner.New().Release()
	}
}

var sinkInt int

// BenchmarkMintTrackRelease is BenchmarkMintRelease for an owner that a
// registry tracks: the first Track of a token and the ticks of its death on
// the registry's clock, beside the same without them.
func BenchmarkMintTrackRelease(b *testing.B) {
	var k owner.DeathClock
	for _, tc := range []struct {
		name  string
		track bool
	}{{"tracked=no", false}, {"tracked=yes", true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t := owner.New()
					if tc.track && !t.Ref().Track(&k) {
						b.Error("a live token refused to be tracked")
					}
					t.Release()
				}
			})
		})
	}
}

// BenchmarkTrackAgain is the cost of Track for a token already tracked on
// the clock: what every register of an owner with entries pays.
func BenchmarkTrackAgain(b *testing.B) {
	var k owner.DeathClock
	t := owner.New()
	defer t.Release()
	r := t.Ref()
	r.Track(&k)
	for b.Loop() {
		if !r.Track(&k) {
			b.Fatal("refused")
		}
	}
}
