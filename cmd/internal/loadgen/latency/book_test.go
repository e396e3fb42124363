package latency

import (
	"sync"
	"testing"
	"time"
)

type testOp uint8

const (
	opA testOp = iota
	opB
	opC
	numTestOps
)

// Merged sums every set's samples per op, leaves out the ops no set
// measures, and ignores samples of ops a set was not made for.
func TestBookMerged(t *testing.T) {
	b := NewBook(numTestOps)
	s1 := b.Set(false, opA)
	s2 := b.Set(false, opA, opB)
	s1.Record(opA, time.Millisecond)
	s1.Record(opB, time.Millisecond) // not s1's: ignored
	s2.Record(opA, 3*time.Millisecond)
	s2.Record(opB, 2*time.Millisecond)

	m := b.Merged()
	if _, ok := m[opC]; ok {
		t.Errorf("Merged has opC, which no set measures")
	}
	if got := m[opA].TotalCount(); got != 2 {
		t.Errorf("opA count %d, want 2", got)
	}
	if got := m[opB].TotalCount(); got != 1 {
		t.Errorf("opB count %d, want 1 (s1's sample of opB is not its own)", got)
	}
	if got := time.Duration(m[opA].Max()); got < 3*time.Millisecond-time.Microsecond*10 || got > 3*time.Millisecond+time.Microsecond*10 {
		t.Errorf("opA max %v, want about 3ms", got)
	}
}

// A shared set takes samples from many goroutines while the book merges;
// run with -race.
func TestBookSharedSet(t *testing.T) {
	b := NewBook(numTestOps)
	s := b.Set(true, opA, opC)
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				s.Record(opC, time.Microsecond)
			}
		})
	}
	b.Merged() // while they record
	wg.Wait()
	if got := b.Merged()[opC].TotalCount(); got != goroutines*each {
		t.Errorf("opC count %d, want %d", got, goroutines*each)
	}
	if got := b.Merged()[opA].TotalCount(); got != 0 {
		t.Errorf("opA count %d, want 0", got)
	}
}
