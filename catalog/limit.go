package catalog

import (
	"context"
	"fmt"
	"sync/atomic"
)

// defaultWaitingRoom is how many calls may wait for a slot of a route
// started WithMaxConcurrent, unless WithWaitingRoom says otherwise.
const defaultWaitingRoom = 64

// limiter bounds the bodies of one route that run at once. Routes without
// WithMaxConcurrent have none, and pay nothing for it.
//
// A slot is a token in a buffered channel: taking one is a channel send,
// which every caller of the route contends on. That is the price of a
// limit; it is why the default is none.
type limiter struct {
	slots   chan struct{}
	room    int64        // calls that may wait for a slot
	waiting atomic.Int64 // calls waiting now
}

// acquire takes a slot, waiting for one while the waiting room has space,
// until ctx ends or the owner dies (done). It returns ErrOverloaded at once
// when the room is full. A call that gets a slot must release it.
func (l *limiter) acquire(ctx context.Context, done <-chan struct{}, rt *route) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if l.waiting.Add(1) > l.room {
		l.waiting.Add(-1)
		return fmt.Errorf("catalog: %s %q: %w: %d running, %d waiting", rt.side.kind, rt.name, ErrOverloaded, cap(l.slots), l.room)
	}
	defer l.waiting.Add(-1)
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return rt.gone()
	}
}

func (l *limiter) release() { <-l.slots }

// WithMaxConcurrent makes at most n bodies of the route run at once. A call
// beyond them waits for a slot, in a waiting room of 64
// calls (see WithWaitingRoom), until its ctx ends; past the room it gets
// ErrOverloaded at once. n must be at least 1.
//
// Without it, a route runs as many bodies at once as callers make, like
// the MCP Go SDK's own handlers. With it, every call takes and returns a
// slot on a channel the route's callers share: tens of nanoseconds, more
// under contention (BenchmarkCallToolLimited).
func WithMaxConcurrent(n int) StartOption {
	return func(s *startConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: at most %d concurrent calls, want at least 1", ErrInvalidConfig, n)
		}
		s.maxConcurrent = n
		return nil
	}
}

// WithWaitingRoom sets how many calls may wait for a slot of a route
// started WithMaxConcurrent; 0 refuses every call that finds no free slot.
// m must not be negative, and the route must also be started
// WithMaxConcurrent.
func WithWaitingRoom(m int) StartOption {
	return func(s *startConfig) error {
		if m < 0 {
			return fmt.Errorf("%w: waiting room of %d, want 0 or more", ErrInvalidConfig, m)
		}
		s.waitingRoom = m
		return nil
	}
}
