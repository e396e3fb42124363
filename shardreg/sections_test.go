package shardreg_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// The section counter is striped; a reader must see a write on any stripe.
// Each case opens a section on every stripe in turn, so that a reader that
// skipped a stripe would miss it there.
func TestEveryStripeIsValidated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		changed   bool
		unchanged bool // what the reader must conclude after the section closed
		moves     uint64
	}{
		{"a section that changed something", true, false, 1},
		{"a section that changed nothing", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t)
			if got := r.Stripes(); got < 4 {
				t.Fatalf("r.Stripes() = %v, want >= 4", got)
			}
			for i := range r.Stripes() {
				v, settled := r.SettledVersion()
				if !settled {
					t.Fatal("r.SettledVersion(): settled = false, want true")
				}
				end := r.OpenSectionOn(i)
				_, settled = r.SettledVersion()
				if settled {
					t.Errorf("stripe %d: a section in progress reads settled: settled = true, want false", i)
				}
				if r.UnchangedSince(v) {
					t.Errorf("stripe %d: a section in progress went unseen: r.UnchangedSince(v) = true, want false", i)
				}
				end(tc.changed)
				if got := r.UnchangedSince(v); got != tc.unchanged {
					t.Errorf("stripe %d: r.UnchangedSince(v) = %v, want %v", i, got, tc.unchanged)
				}
				if got := r.Version(); got != v+tc.moves {
					t.Errorf("stripe %d: r.Version() = %v, want %v", i, got, v+tc.moves)
				}
				if !r.UnchangedSince(v + tc.moves) {
					t.Errorf("stripe %d: r.UnchangedSince(v+tc.moves) = false, want true", i)
				}
			}
		})
	}
}

// A listing that meets a write in progress on any stripe does not return
// until the write is over: it holds new writes off and waits for the open
// one. A listing that waited on some stripes only would return while the
// write might still change the map.
func TestListingWaitsForASectionOnEveryStripe(t *testing.T) {
	r := newReg(t)
	start(t, r, "a", live(t))
	for i := range r.Stripes() {
		end := r.OpenSectionOn(i)
		listed := make(chan []string, 1)
		go func() { listed <- names(r.ListReady()) }()
		select {
		case got := <-listed:
			t.Fatalf("stripe %d: a listing returned %v while a write was in progress", i, got)
		case <-time.After(20 * time.Millisecond):
		}
		if !r.Frozen() {
			t.Errorf("stripe %d: the listing holds writes off: r.Frozen() = false, want true", i)
		}
		end(true)
		if got := <-listed; !slices.Equal(got, []string{"a"}) {
			t.Errorf("stripe %d: <-listed = %v, want %v", i, got, []string{"a"})
		}
	}
}

// Writers on many goroutines land on many stripes; every write they made is
// counted once, whichever stripe it landed on.
func TestVersionCountsWritesOnAllStripes(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1<<12))
	tok := live(t)
	const writers, each = 16, 50
	v0 := r.Version()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("w%d-%d", w, i)
				// Three changes: a register, a mark, an unregister.
				if err := r.Register(name, "", tok.Ref()); err != nil {
					t.Fatalf("Register(%q): %v", name, err)
				}
				if !r.MarkReady(name, tok.Ref()) {
					t.Fatalf("MarkReady(%q) by its owner = false, want true", name)
				}
				if !r.UnregisterOwned(name, tok.Ref()) {
					t.Fatalf("UnregisterOwned(%q) by its owner = false, want true", name)
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	if got := r.Version(); got != v0+3*writers*each {
		t.Errorf("r.Version() = %v, want %v", got, v0+3*writers*each)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
}

// The cap is exact: however many registers race for the last slots, the
// cap counter never passes the cap, not even for the instant between a
// reservation and its undoing. Registers race for two slots while a
// watcher reads the counter without stopping.
func TestCapCounterNeverOvershoots(t *testing.T) {
	const capacity, racers = 2, 6
	r := newReg(t, shardreg.WithCap(capacity))
	// Widen the gap between a register's lock-free look at the count and
	// its reservation, so that many reservations meet a full registry.
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookBeforeInsert {
			runtime.Gosched()
		}
	})
	d := 500 * time.Millisecond
	if testing.Short() {
		d = 100 * time.Millisecond
	}
	deadline := time.Now().Add(d)
	var over atomic.Int64
	var refused atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for time.Now().Before(deadline) && over.Load() == 0 {
			for range 1000 {
				if n := r.Count(); n > capacity {
					over.Store(n)
				}
			}
		}
	})
	for i := range racers {
		wg.Go(func() {
			tok := owner.New()
			defer tok.Release()
			name := fmt.Sprintf("r%d", i)
			for time.Now().Before(deadline) && over.Load() == 0 {
				if err := r.Register(name, "", tok.Ref()); err == nil {
					runtime.Gosched() // hold the slot while others run
					r.UnregisterOwned(name, tok.Ref())
				} else {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := refused.Load(); got <= 0 {
		t.Errorf("no register met a full registry: the race was not run: refused.Load() = %v, want > 0", got)
	}
	if got := over.Load(); got != 0 {
		t.Errorf("the cap counter passed the cap of %d: over.Load() = %v, want 0", capacity, got)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
}
