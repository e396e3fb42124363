package mcpserve_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// BenchmarkFleetCall is one tools/call from a streamable HTTP client on
// loopback to replica a, for a trivial tool that a holds ("local", the
// baseline) and for one that replica b holds, which a forwards ("forwarded":
// a second HTTP round trip, a's SDK client to b's fleet handler). Besides
// ns/op it reports each case's p50 and p99 latency (HdrHistogram), since
// the goal is on the p50 difference: at most 1 ms.
func BenchmarkFleetCall(b *testing.B) {
	a, far := newReplica(b), newReplica(b)
	for _, tc := range []struct {
		name string
		cat  *catalog.Catalog
	}{{"local", a.cat}, {"forwarded", far.cat}} {
		k, err := tc.cat.StartTool(context.Background(), catalog.Tool{Name: tc.name}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	a.peers.set("tool", "forwarded", far.fleet)
	for _, name := range []string{"local", "forwarded"} {
		b.Run(name, func(b *testing.B) {
			const sessions = 8
			cs := make([]*mcp.ClientSession, sessions)
			for i := range cs {
				cs[i] = connectTo(b, a.url, "")
			}
			var (
				mu   sync.Mutex
				all  = hdrhistogram.New(1, int64(time.Minute), 3)
				next int
			)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				c := cs[next%sessions]
				next++
				mu.Unlock()
				h := hdrhistogram.New(1, int64(time.Minute), 3)
				params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
				for pb.Next() {
					t0 := time.Now()
					if _, err := c.CallTool(context.Background(), params); err != nil {
						b.Error(err)
						return
					}
					_ = h.RecordValue(max(int64(time.Since(t0)), 1))
				}
				mu.Lock()
				all.Merge(h)
				mu.Unlock()
			})
			b.StopTimer()
			b.ReportMetric(float64(all.ValueAtQuantile(50))/1e3, "p50-µs")
			b.ReportMetric(float64(all.ValueAtQuantile(99))/1e3, "p99-µs")
		})
	}
}
