package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

const dispatchTool = "mcp.tool.name-000000"

// BenchmarkDispatch is the cost of catalog.CallTool (resolve, the plan
// guard, the gate and the body, on the calling goroutine) against its own
// parts run inline:
//
//   - impl=livereg: catalog.CallTool;
//   - impl=parts: shardreg Lookup + bindsec PlanFor + the owner's liveness
//     load + the direct handler call, what dispatch cannot do without;
//   - impl=handler: the bare handler call.
//
// plan=public skips authentication; plan=role presents a bearer token to
// bindsec.StaticTokens, and its parts add the Authenticate call.
func BenchmarkDispatch(b *testing.B) {
	handler := trivialHandler
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"token-good": bindsec.NewPrincipal("alice", "tools:call"),
	})
	ctx := context.Background()
	for _, plan := range []struct {
		name string
		plan bindsec.Plan
		cred string
	}{{"public", bindsec.Plan{Public: true}, ""}, {"role", needsRole, "token-good"}} {
		run(b, fmt.Sprintf("plan=%s/impl=livereg", plan.name), func(b *testing.B) (*catalog.Catalog, func()) {
			cat, err := catalog.New(catalog.Config{Authenticator: auth})
			if err != nil {
				b.Fatal(err)
			}
			cons, err := cat.StartTool(ctx, catalog.Tool{Name: dispatchTool}, plan.plan, handler)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cat.CallTool(ctx, dispatchTool, nil, plan.cred); err != nil {
				b.Fatal(err)
			}
			// The consumer must stay reachable: a dropped one dies at the
			// next collection.
			return cat, func() { _ = cons.Stop(ctx) }
		}, func(b *testing.B, cat *catalog.Catalog) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cat.CallTool(ctx, dispatchTool, nil, plan.cred); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		run(b, fmt.Sprintf("plan=%s/impl=parts", plan.name), func(b *testing.B) (*dispatchParts, func()) {
			return newDispatchParts(b, plan.plan, auth)
		}, func(b *testing.B, p *dispatchParts) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.call(ctx, plan.cred); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		run(b, fmt.Sprintf("plan=%s/impl=handler", plan.name), func(*testing.B) (struct{}, func()) {
			return struct{}{}, nil
		}, func(b *testing.B, _ struct{}) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := handler(ctx, catalog.Call{Name: dispatchTool}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// dispatchParts is what a dispatch must do at the least, run inline: find
// the entry, find its plan, check the owner, (authenticate,) call.
type dispatchParts struct {
	reg  *shardreg.Registry[catalog.ToolHandler]
	book *bindsec.Book
	auth bindsec.Authenticator
	tok  *owner.Token
}

func newDispatchParts(b *testing.B, p bindsec.Plan, auth bindsec.Authenticator) (*dispatchParts, func()) {
	reg, err := shardreg.New[catalog.ToolHandler]()
	if err != nil {
		b.Fatal(err)
	}
	tok := owner.New()
	if err := reg.RegisterReady(dispatchTool, trivialHandler, tok.Ref()); err != nil {
		b.Fatal(err)
	}
	book := bindsec.NewBook()
	if err := book.RegisterPlan(dispatchTool, p, tok.Ref()); err != nil {
		b.Fatal(err)
	}
	return &dispatchParts{reg: reg, book: book, auth: auth, tok: tok}, tok.Release
}

var errPartsMiss = errors.New("bench: parts: entry, plan or owner missing")

func (d *dispatchParts) call(ctx context.Context, cred string) error {
	h, ref, ok := d.reg.Lookup(dispatchTool)
	p, planned := d.book.PlanFor(dispatchTool)
	if !ok || !planned || !ref.Alive() {
		return errPartsMiss
	}
	var pr bindsec.Principal
	if !p.Public {
		var err error
		if pr, err = d.auth.Authenticate(ctx, cred); err != nil {
			return err
		}
	}
	_, err := h(ctx, catalog.Call{Name: dispatchTool, Principal: pr, Owner: ref})
	return err
}

// BenchmarkSlowBody is a tool whose body takes 50 ms (an upstream call),
// called by 200 goroutines at once, 5 calls each, per op:
//
//   - impl=livereg: through catalog.CallTool, route started with the
//     defaults;
//   - impl=direct: the same body called directly on 200 goroutines.
//
// calls/s is the throughput; refused/op counts calls that failed
// (ErrOverloaded or any other error), which must be 0.
func BenchmarkSlowBody(b *testing.B) {
	const callers, perCaller, delay = 200, 5, 50 * time.Millisecond
	body := func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
		time.Sleep(delay)
		return catalog.TextResult("done"), nil
	}
	ctx := context.Background()
	burst := func(b *testing.B, call func() error) {
		var refused atomic.Int64
		start := time.Now()
		calls := 0
		for b.Loop() {
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range perCaller {
						if call() != nil {
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			calls += callers * perCaller
		}
		b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
		b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
	}
	name := fmt.Sprintf("callers=%d/body=%s", callers, delay)
	run(b, name+"/impl=livereg", func(b *testing.B) (*catalog.Catalog, func()) {
		cat, err := catalog.New(catalog.Config{})
		if err != nil {
			b.Fatal(err)
		}
		cons, err := cat.StartTool(ctx, catalog.Tool{Name: dispatchTool}, bindsec.Plan{Public: true}, body)
		if err != nil {
			b.Fatal(err)
		}
		return cat, func() { _ = cons.Stop(ctx) }
	}, func(b *testing.B, cat *catalog.Catalog) {
		burst(b, func() error {
			_, err := cat.CallTool(ctx, dispatchTool, nil, "")
			return err
		})
	})
	run(b, name+"/impl=direct", func(*testing.B) (struct{}, func()) {
		return struct{}{}, nil
	}, func(b *testing.B, _ struct{}) {
		burst(b, func() error {
			_, err := body(ctx, catalog.Call{Name: dispatchTool})
			return err
		})
	})
}

// trivialHandler is a variable, not a literal at the call site, so that the
// direct call is a real indirect call, as dispatch's is, and not inlined.
var trivialHandler catalog.ToolHandler = func(context.Context, catalog.Call) (catalog.Result, error) {
	return catalog.Result{}, nil
}

// BenchmarkConsumers starts n idle tool consumers and reports what each
// holds while it serves: memory (B/consumer: live heap after a collection
// plus goroutine stacks, the route's name and description included) and
// goroutines (goroutines/consumer), and the time a start takes (ns/start).
func BenchmarkConsumers(b *testing.B) {
	const n = 10_000
	names := benchNames(n)
	ctx := context.Background()
	b.Run(fmt.Sprintf("n=%d/impl=livereg", n), func(b *testing.B) {
		b.ReportAllocs()
		var perConsumer, goroutines float64
		for b.Loop() {
			b.StopTimer()
			cat, err := catalog.New(catalog.Config{MaxTools: n})
			if err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g0 := runtime.NumGoroutine()
			cons := make([]*catalog.Consumer, 0, n)
			b.StartTimer()
			for _, name := range names {
				k, err := cat.StartTool(ctx, catalog.Tool{Name: name}, bindsec.Plan{Public: true}, trivialHandler)
				if err != nil {
					b.Fatal(err)
				}
				cons = append(cons, k)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			perConsumer = float64(inUse(&after)-inUse(&before)) / n
			goroutines = float64(runtime.NumGoroutine()-g0) / n
			for _, k := range cons {
				_ = k.Stop(ctx)
			}
			// Each death reclaims its route on a goroutine of its own;
			// let them end before the next sample's baseline.
			for runtime.NumGoroutine() > g0 {
				time.Sleep(time.Millisecond)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/start")
		b.ReportMetric(perConsumer, "B/consumer")
		b.ReportMetric(goroutines, "goroutines/consumer")
	})
}

// inUse is the memory a fixture holds: live heap and goroutine stacks.
func inUse(m *runtime.MemStats) int64 { return int64(m.HeapAlloc + m.StackInuse) }
