package wait

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestClosedAndWithin(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name string
		ch   <-chan struct{}
		d    time.Duration
		want bool
	}{
		{"closed", closed, time.Millisecond, true},
		{"open", make(chan struct{}), 20 * time.Millisecond, false},
		{"closed during the wait", func() <-chan struct{} {
			ch := make(chan struct{})
			time.AfterFunc(10*time.Millisecond, func() { close(ch) })
			return ch
		}(), 10 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "closed during the wait" {
				if got := Closed(tt.ch); got != tt.want {
					t.Errorf("Closed = %v, want %v", got, tt.want)
				}
			}
			t0 := time.Now()
			if got := Within(tt.ch, tt.d); got != tt.want {
				t.Errorf("Within = %v, want %v", got, tt.want)
			}
			if !tt.want && time.Since(t0) < tt.d {
				t.Errorf("Within gave up after %v, before its bound %v", time.Since(t0), tt.d)
			}
		})
	}
}

func TestGroup(t *testing.T) {
	tests := []struct {
		name string
		hold time.Duration // how long the one member runs
		d    time.Duration
		want bool
	}{
		{"finishes in time", 0, 10 * time.Second, true},
		{"outlasts the bound", 200 * time.Millisecond, 20 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			wg.Go(func() { time.Sleep(tt.hold) })
			if got := Group(&wg, tt.d); got != tt.want {
				t.Errorf("Group = %v, want %v", got, tt.want)
			}
			wg.Wait()
		})
	}
}

func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if n.Add(1) == 3 {
				cancel()
			}
		})
	}()
	if !Within(done, 10*time.Second) {
		t.Fatal("Every did not return when its context ended")
	}
	if got := n.Load(); got < 3 {
		t.Errorf("fn ran %d times, want at least 3", got)
	}

	// An ended context stops it before the first tick.
	var calls atomic.Int64
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		Every(ctx, time.Millisecond, func() { calls.Add(1) })
	}()
	if !Within(ended, 10*time.Second) {
		t.Fatal("Every did not return for a context that had ended")
	}
	if calls.Load() != 0 {
		t.Errorf("fn ran %d times after the context ended", calls.Load())
	}
}

// TestSlowing: each call that asks to slow down doubles the interval from
// then on, and one that does not keeps it. In a synctest bubble the clock
// moves only when every goroutine waits, so the times are exact.
func TestSlowing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		Slowing(ctx, time.Second, func() bool {
			at = append(at, time.Since(start))
			if len(at) == 5 {
				cancel()
			}
			return len(at) != 3 // the third call keeps the interval
		})
		want := []time.Duration{1 * time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second, 19 * time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("fn ran at %v, want %v", at, want)
		}
	})
}
