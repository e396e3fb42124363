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
		params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
		b.Run(name, func(b *testing.B) {
			benchLatency(b, a.url, func(c *mcp.ClientSession) error {
				_, err := c.CallTool(context.Background(), params)
				return err
			})
		})
	}
}

// BenchmarkFleetSurface is BenchmarkFleetCall for a prompts/get and a
// templated resources/read: local, from a template and prompt a holds,
// and forwarded to b, which holds another pair. Issue 31 asks the
// forwarded p50 to exceed the local by at most 150 µs, as for calls.
func BenchmarkFleetSurface(b *testing.B) {
	// a's catalog lists b's template, as a fleet's view would.
	a := newReplicaOf(b, catalog.Config{Authenticator: fleetAuth, Remote: newSurface("bench://forwarded/{id}")})
	far := newReplica(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cat  *catalog.Catalog
	}{{"local", a.cat}, {"forwarded", far.cat}} {
		p, err := tc.cat.StartPrompt(ctx, catalog.Prompt{Name: tc.name}, bindsec.Plan{Public: true},
			func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
				return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "user", Content: catalog.Content{Type: "text", Text: "hi"}}}}, nil
			})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Stop(ctx) })
		t, err := tc.cat.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "bench://" + tc.name + "/{id}", Name: tc.name}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Read) (catalog.Contents, error) {
				return catalog.Contents{Text: "doc"}, nil
			})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = t.Stop(ctx) })
	}
	a.peers.set(string(catalog.KindPrompt), "forwarded", far.fleet)
	key, err := catalog.TemplateKey("bench://forwarded/{id}")
	if err != nil {
		b.Fatal(err)
	}
	a.peers.set(string(catalog.KindTemplate), key, far.fleet)
	for _, name := range []string{"local", "forwarded"} {
		b.Run("prompt-"+name, func(b *testing.B) {
			benchLatency(b, a.url, func(c *mcp.ClientSession) error {
				_, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: name})
				return err
			})
		})
		b.Run("template-"+name, func(b *testing.B) {
			benchLatency(b, a.url, func(c *mcp.ClientSession) error {
				_, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "bench://" + name + "/7"})
				return err
			})
		})
	}
}

// benchLatency runs op in parallel over 8 sessions to url, and reports
// its p50 and p99 (HdrHistogram) beside ns/op.
func benchLatency(b *testing.B, url string, op func(*mcp.ClientSession) error) {
	const sessions = 8
	cs := make([]*mcp.ClientSession, sessions)
	for i := range cs {
		cs[i] = connectTo(b, url, "")
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
		for pb.Next() {
			t0 := time.Now()
			if err := op(c); err != nil {
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
}

// BenchmarkFleetSubscription is the time from a consumer's Updated on
// replica a to a 2025-11-25 session of replica b, subscribed to a's
// resource, hearing of it through b's stream to a, one update at a
// time; it reports p50 and p99 (HdrHistogram). Issue 31 asks p99 <= 50 ms.
func BenchmarkFleetSubscription(b *testing.B) {
	a, far := newReplica(b), newReplica(b)
	u := startWatched(b, a.cat, context.Background(), "test://u")
	far.peers.set("resource", "test://u", a.fleet)
	cs, updated := updatesClient(b, far)
	if err := cs.Subscribe(ctxGuard(b), &mcp.SubscribeParams{URI: "test://u"}); err != nil {
		b.Fatal(err)
	}
	h := hdrhistogram.New(1, int64(time.Minute), 3)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := u.Updated(); err != nil {
			b.Fatal(err)
		}
		heard(b, updated)
		_ = h.RecordValue(max(int64(time.Since(t0)), 1))
	}
	b.StopTimer()
	b.ReportMetric(float64(h.ValueAtQuantile(50))/1e3, "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99))/1e3, "p99-µs")
}
