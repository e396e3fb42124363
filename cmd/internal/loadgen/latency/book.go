package latency

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Op is a world's enumeration of operation kinds, 0 up to the count its
// Book was made for.
type Op interface{ ~uint8 | ~int }

// Set is one histogram for each op kind its worker measures. A set that
// one goroutine owns records without a lock, so that a hot path pays
// nothing for sharing; a shared set takes its lock on every Record.
type Set[O Op] struct {
	mu     sync.Mutex
	locked bool
	h      []*hdrhistogram.Histogram // nil for the ops the set does not measure
}

// Record adds d to o's histogram, clamped as Record clamps; an op the set
// was not made for is ignored. O(1).
func (s *Set[O]) Record(o O, d time.Duration) {
	h := s.h[o]
	if h == nil {
		return
	}
	if s.locked {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	Record(h, d)
}

// Book collects a run's sets and merges them when the run ends. Its
// methods are safe for concurrent use.
type Book[O Op] struct {
	mu   sync.Mutex
	n    O
	all  []*Set[O]
	used []bool
}

// NewBook returns a book for the op kinds 0 to n-1.
func NewBook[O Op](n O) *Book[O] { return &Book[O]{n: n, used: make([]bool, n)} }

// Set returns a new set for ops, about 200 KiB of histogram each (see the
// package documentation). A shared set may record from any goroutine and
// locks on every Record; an unshared one must record from one goroutine
// at a time.
func (b *Book[O]) Set(shared bool, ops ...O) *Set[O] {
	s := &Set[O]{locked: shared, h: make([]*hdrhistogram.Histogram, b.n)}
	for _, o := range ops {
		s.h[o] = New()
	}
	b.mu.Lock()
	b.all = append(b.all, s)
	for _, o := range ops {
		b.used[o] = true
	}
	b.mu.Unlock()
	return s
}

// Merged returns one histogram per op that any set measures, the sum of
// all of them. It locks each set while it reads it, so it is safe while
// shared sets still record; an unshared set must be done recording.
// O(sets × ops) merges.
func (b *Book[O]) Merged() map[O]*hdrhistogram.Histogram {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[O]*hdrhistogram.Histogram{}
	for i := range int(b.n) {
		o := O(i)
		if !b.used[o] {
			continue
		}
		m := New()
		for _, s := range b.all {
			s.mu.Lock()
			if s.h[o] != nil {
				m.Merge(s.h[o])
			}
			s.mu.Unlock()
		}
		out[o] = m
	}
	return out
}
