package inproc

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// Sample is one reading of the process's resources.
type Sample struct {
	Goroutines int
	HeapLive   uint64 // bytes of heap marked live by the last GC
}

// GrowthTolerance is how much growth invariant 7 lets pass.
//
// During the run, after a warm-up of the first quarter of the samples,
// the minimum over the last quarter of the remaining samples is compared
// with the maximum over their first quarter: growth is flagged only when
// every late sample is above every early one by more than the tolerance,
// so that the ebb and flow of live consumers and in-flight calls and
// garbage collection timing do not count, while a leak
// that adds a goroutine or a few bytes per start does. At the end, after
// every consumer has ended, goroutines must be back within EndGoroutines of
// the count before the run, and the live heap within the heap tolerance of
// its size before the run.
type GrowthTolerance struct {
	Goroutines        int     // absolute slack
	GoroutineFraction float64 // plus this fraction of the early maximum
	HeapBytes         uint64  // absolute slack
	HeapFraction      float64 // plus this fraction of the early maximum
	EndGoroutines     int     // slack over the baseline after the run
	EndWait           time.Duration
}

// DefaultGrowthTolerance is the tolerance of every run.
var DefaultGrowthTolerance = GrowthTolerance{
	Goroutines:        16,
	GoroutineFraction: 0.25,
	HeapBytes:         8 << 20,
	HeapFraction:      0.25,
	EndGoroutines:     2,
	EndWait:           3 * time.Second,
}

// maxSamples bounds the samples kept; when full, every other one is
// dropped and the caller is told to sample half as often.
const maxSamples = 2048

// growthChecker checks invariant 7 on a series of samples.
type growthChecker struct {
	t        *tally
	tol      GrowthTolerance
	baseline Sample
	read     func() Sample

	mu      sync.Mutex
	samples []Sample
	peak    Sample
	end     Sample
}

func newGrowthChecker(t *tally, tol GrowthTolerance, read func() Sample) *growthChecker {
	return &growthChecker{t: t, tol: tol, read: read}
}

// setBaseline records the state before the workload starts.
func (g *growthChecker) setBaseline(s Sample) {
	g.mu.Lock()
	g.baseline, g.peak = s, s
	g.mu.Unlock()
}

// add records a sample and reports whether the sampler should halve its
// rate because the series was thinned.
func (g *growthChecker) add(s Sample) (thinned bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.peak.Goroutines = max(g.peak.Goroutines, s.Goroutines)
	g.peak.HeapLive = max(g.peak.HeapLive, s.HeapLive)
	g.samples = append(g.samples, s)
	if len(g.samples) < maxSamples {
		return false
	}
	kept := g.samples[:0]
	for i := 0; i < len(g.samples); i += 2 {
		kept = append(kept, g.samples[i])
	}
	g.samples = kept
	return true
}

// sampleLoop samples every interval until ctx ends, half as often each
// time the series is thinned.
func (g *growthChecker) sampleLoop(ctx context.Context, interval time.Duration) {
	wait.Slowing(ctx, interval, func() bool { return g.add(g.read()) })
}

// judgeRun checks the series for growth during the run. It reports false
// when there were too few samples to judge.
func (g *growthChecker) judgeRun() bool {
	g.mu.Lock()
	s := append([]Sample(nil), g.samples...)
	g.mu.Unlock()
	s = s[len(s)/4:] // warm-up
	if len(s) < 8 {
		return false
	}
	q := len(s) / 4
	early, late := s[:q], s[len(s)-q:]
	var eg, lg = early[0].Goroutines, late[0].Goroutines
	var eh, lh = early[0].HeapLive, late[0].HeapLive
	for _, x := range early {
		eg, eh = max(eg, x.Goroutines), max(eh, x.HeapLive)
	}
	for _, x := range late {
		lg, lh = min(lg, x.Goroutines), min(lh, x.HeapLive)
	}
	g.t.Check(InvResourceGrowth, 1)
	if limit := eg + g.tol.Goroutines + int(g.tol.GoroutineFraction*float64(eg)); lg > limit {
		g.t.Violate(InvResourceGrowth, "goroutines kept growing: every late sample has at least %d, every early one at most %d (tolerance up to %d)", lg, eg, limit)
	}
	if limit := eh + g.tol.HeapBytes + uint64(g.tol.HeapFraction*float64(eh)); lh > limit {
		g.t.Violate(InvResourceGrowth, "live heap kept growing: every late sample has at least %d bytes, every early one at most %d (tolerance up to %d)", lh, eh, limit)
	}
	return true
}

// judgeEnd checks, after every consumer ended, that goroutines return to
// the baseline (waiting up to EndWait for exiting ones) and that the live
// heap after a collection is back near it.
func (g *growthChecker) judgeEnd() {
	g.mu.Lock()
	base := g.baseline
	g.mu.Unlock()
	g.t.Check(InvResourceGrowth, 1)
	deadline := time.Now().Add(g.tol.EndWait)
	var s Sample
	for {
		runtime.GC()
		s = g.read()
		if s.Goroutines <= base.Goroutines+g.tol.EndGoroutines || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.mu.Lock()
	g.end = s
	g.mu.Unlock()
	if s.Goroutines > base.Goroutines+g.tol.EndGoroutines {
		g.t.Violate(InvResourceGrowth, "goroutines did not return to baseline after every consumer ended: %d, baseline %d (tolerance %d) after %v",
			s.Goroutines, base.Goroutines, g.tol.EndGoroutines, g.tol.EndWait)
	}
	if limit := base.HeapLive + g.tol.HeapBytes + uint64(g.tol.HeapFraction*float64(base.HeapLive)); s.HeapLive > limit {
		g.t.Violate(InvResourceGrowth, "live heap did not return near baseline after every consumer ended: %d bytes, baseline %d (tolerance up to %d)",
			s.HeapLive, base.HeapLive, limit)
	}
}

func (g *growthChecker) summary() (base, peak, end Sample) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.baseline, g.peak, g.end
}

// readProcess reads the process's goroutines and live heap.
func readProcess() Sample {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var heap uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	return Sample{Goroutines: runtime.NumGoroutine(), HeapLive: heap}
}
