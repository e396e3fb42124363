package catalog

import (
	"math/rand/v2"
	"testing"

	"github.com/livereg/livereg/owner"
)

// enterWeak is the gate without its hold: one add, the checks, and the
// body may start. A death then need not wait for anything, and a body may
// start after its owner's death completed, if the death lands between the
// check and the body. It exists to price the hold in BenchmarkAdmission.
func (g *gate) enterWeak(ref owner.Ref) (*stripe, bool) {
	s := &g.stripes[rand.Uint32()&g.mask]
	s.n.Add(1)
	if g.closing.Load() || !ref.Alive() {
		g.leave(s, 1)
		return nil, false
	}
	return s, true
}

// BenchmarkAdmission prices the gate alone, per call (enter + exit), from
// every goroutine at once on one hot route:
//
//   - hold=yes: the gate as dispatch uses it, with the admission hold that
//     makes an owner's death wait for admissions in progress;
//   - hold=no: the same without the hold (one atomic add fewer);
//   - stripes=1: the gate on a single shared counter, which every core
//     writes: the design the striping replaces.
func BenchmarkAdmission(b *testing.B) {
	tok := owner.New()
	defer tok.Release()
	ref := tok.Ref()
	for _, tc := range []struct {
		name    string
		stripes int
		weak    bool
	}{
		{"hold=yes/stripes=auto", 0, false},
		{"hold=no/stripes=auto", 0, true},
		{"hold=yes/stripes=1", 1, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			defer SetStripes(tc.stripes)()
			var g gate
			g.init(nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var s *stripe
					var ok bool
					if tc.weak {
						s, ok = g.enterWeak(ref)
					} else {
						s, ok = g.enter(ref)
					}
					if !ok {
						b.Error("refused")
						return
					}
					g.exit(s)
				}
			})
		})
	}
}
