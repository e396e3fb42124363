// Package wait holds the small timing helpers both loadgen modes, the
// single-process one (inproc) and the fleet one
// (fleet), run their background goroutines and their
// wind-down with: a periodic loop, and bounded waits for a channel or a
// WaitGroup.
//
// The model: nothing here waits unboundedly. A loop ends with its
// context; a wait ends after its bound and says whether what it waited
// for happened, so that a run whose system hangs still ends and reports.
package wait

import (
	"context"
	"sync"
	"time"
)

// Every calls fn every interval, in the calling goroutine, until ctx
// ends; not at once. A call that outlasts the interval delays the next,
// and ticks missed meanwhile are dropped, as a time.Ticker drops them.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	Slowing(ctx, interval, func() bool { fn(); return false })
}

// Slowing is Every for a sampler that may slow down: when fn returns
// true, the interval doubles from then on.
func Slowing(ctx context.Context, interval time.Duration, fn func() (slower bool)) {
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if fn() {
				interval *= 2
				tk.Reset(interval)
			}
		}
	}
}

// Closed reports whether ch is closed, without blocking. ch must be one
// that is only ever closed, never sent on.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Within waits up to d for ch to close and reports whether it did.
func Within(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Group waits up to d for wg and reports whether it finished. When it did
// not, a goroutine stays blocked in wg.Wait until it does.
func Group(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return Within(done, d)
}
