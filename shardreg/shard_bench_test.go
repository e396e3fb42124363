package shardreg_test

import (
	"sync/atomic"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
)

// BenchmarkCapCounter asks whether sharding the cap counter would pay: the
// registry reserves a slot with a compare-and-swap on one global word, the
// only way to keep the count from ever passing the cap, even for an
// instant. A striped counter (xsync.Counter) spreads the writes over
// cache lines but can only be summed, not compared-and-swapped, so it could
// enforce the cap only loosely. The numbers say what the exactness costs.
func BenchmarkCapCounter(b *testing.B) {
	b.Run("global-cas", func(b *testing.B) {
		var n atomic.Int64
		const capacity = 1 << 40
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for {
					c := n.Load()
					if c >= capacity || n.CompareAndSwap(c, c+1) {
						break
					}
				}
				n.Add(-1)
			}
		})
	})
	b.Run("striped-add", func(b *testing.B) {
		n := xsync.NewCounter()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Inc()
				n.Dec()
			}
		})
	})
}
