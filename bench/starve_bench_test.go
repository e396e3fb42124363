package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/livereg/livereg/owner"
)

// The workloads below measure what owner deaths elsewhere in the process,
// and listers, cost a registry's listings and writes: the starvation cases,
// where a listing validated against the process-wide death clock never
// returned once unrelated owners died faster than it scanned, and writers
// queued behind every lister. They run livereg only: the
// baselines hold a lock while they list, and cannot starve that way.

// BenchmarkListReadyUnrelatedDeaths lists n ready entries right after a
// change (one op: register or unregister one ready entry, then list), while
// owners holding nothing in the registry die at the given rate, counted
// across the whole process. deaths=0 is the base the other rates compare
// with; the deaths/s metric is the rate reached.
func BenchmarkListReadyUnrelatedDeaths(b *testing.B) {
	for _, n := range sizes(100_000, largeN) {
		for _, rate := range []int{0, 1000, 10_000} {
			impl := Registries()[0]
			type fixture struct {
				r   Registry
				tok *owner.Token
			}
			run(b, fmt.Sprintf("n=%d/deaths=%d/impl=%s", n, rate, impl.Name), func(b *testing.B) (fixture, func()) {
				r := impl.New(n + 1)
				fill(b, r, n)
				if got := len(r.ListReady()); got != n {
					b.Fatalf("listed %d entries, want %d", got, n)
				}
				tok := owner.New()
				return fixture{r, tok}, tok.Release
			}, func(b *testing.B, f fixture) {
				stop := killUnrelated(b, rate)
				defer stop()
				for b.Loop() {
					// Flip one entry out or in, whichever the last op
					// (or the last run of the case) left.
					want := n
					if !f.r.UnregisterOwned("zz-extra", f.tok.Ref()) {
						if err := f.r.RegisterReady("zz-extra", 0, f.tok.Ref()); err != nil {
							b.Fatal(err)
						}
						want++
					}
					if got := len(f.r.ListReady()); got != want {
						b.Fatalf("listed %d entries, want %d", got, want)
					}
				}
			})
		}
		if n >= largeN {
			shrinkFixtures()
		}
	}
}

// killUnrelated kills owners that hold nothing anywhere, perSecond of them
// a second in bursts every millisecond, until the returned function is
// called; that function reports the rate reached as deaths/s.
func killUnrelated(b *testing.B, perSecond int) (stop func()) {
	if perSecond == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var killed atomic.Int64
	began := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		owed := 0.0
		last := began
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				// Pay what the elapsed time owes, so that a late tick does
				// not lower the rate.
				owed += now.Sub(last).Seconds() * float64(perSecond)
				last = now
				for ; owed >= 1; owed-- {
					owner.New().Release()
					killed.Add(1)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		b.ReportMetric(float64(killed.Load())/time.Since(began).Seconds(), "deaths/s")
	}
}

// BenchmarkWritersVsListers measures a writer while listers list: one op is
// a RegisterReady and an UnregisterOwned of one entry among 2,000, made
// while the given number of goroutines call ListReady in a loop. Each
// write invalidates the cached listing, so listers keep rebuilding it. The
// metrics are the register latency (p99 and max, from an HdrHistogram) and
// the listings served per op. The RWMutex map runs beside livereg as a
// control: with more runnable goroutines than cores, part of the maximum
// is the scheduler's, whatever the registry does.
func BenchmarkWritersVsListers(b *testing.B) {
	const n = 2000
	for _, listers := range []int{0, 2, 8, 32} {
		for _, impl := range Registries() {
			if impl.Name != "livereg" && impl.Name != "rwmutex" {
				continue
			}
			writersVsListers(b, impl, n, listers)
		}
	}
}

func writersVsListers(b *testing.B, impl Impl, n, listers int) {
	type fixture struct {
		r   Registry
		tok *owner.Token
	}
	run(b, fmt.Sprintf("n=%d/listers=%d/impl=%s", n, listers, impl.Name), func(b *testing.B) (fixture, func()) {
		r := impl.New(n + 1)
		fill(b, r, n)
		tok := owner.New()
		return fixture{r, tok}, tok.Release
	}, func(b *testing.B, f fixture) {
		var stop atomic.Bool
		var listed atomic.Int64
		var wg sync.WaitGroup
		for range listers {
			wg.Go(func() {
				k := int64(0)
				for !stop.Load() {
					if len(f.r.ListReady()) < n {
						b.Error("a listing lost entries")
					}
					k++
				}
				listed.Add(k)
			})
		}
		h := hdrhistogram.New(1, int64(time.Minute), 3)
		for b.Loop() {
			t0 := time.Now()
			if err := f.r.RegisterReady("zz-extra", 0, f.tok.Ref()); err != nil {
				b.Fatal(err)
			}
			_ = h.RecordValue(max(int64(time.Since(t0)), 1))
			if !f.r.UnregisterOwned("zz-extra", f.tok.Ref()) {
				b.Fatal("unregister found nothing")
			}
		}
		stop.Store(true)
		wg.Wait()
		b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-register-ns")
		b.ReportMetric(float64(h.Max()), "max-register-ns")
		b.ReportMetric(float64(listed.Load())/float64(b.N), "listings/op")
	})
}
