package shardreg_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.GreaterOrEqual(t, r.Stripes(), 4)
			for i := range r.Stripes() {
				v, settled := r.SettledVersion()
				require.True(t, settled)
				end := r.OpenSectionOn(i)
				_, settled = r.SettledVersion()
				assert.False(t, settled, "stripe %d: a section in progress reads settled", i)
				assert.False(t, r.UnchangedSince(v), "stripe %d: a section in progress went unseen", i)
				end(tc.changed)
				assert.Equal(t, tc.unchanged, r.UnchangedSince(v), "stripe %d", i)
				assert.Equal(t, v+tc.moves, r.Version(), "stripe %d", i)
				assert.True(t, r.UnchangedSince(v+tc.moves), "stripe %d", i)
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
		assert.True(t, r.Frozen(), "stripe %d: the listing holds writes off", i)
		end(true)
		assert.Equal(t, []string{"a"}, <-listed, "stripe %d", i)
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
				require.NoError(t, r.Register(name, "", tok.Ref())) // a change
				require.True(t, r.MarkReady(name, tok.Ref()))       // a change
				require.True(t, r.UnregisterOwned(name, tok.Ref())) // a change
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, v0+3*writers*each, r.Version())
	assert.Equal(t, 0, r.Len())
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
	assert.Positive(t, refused.Load(), "no register met a full registry: the race was not run")
	assert.Zero(t, over.Load(), "the cap counter passed the cap of %d", capacity)
	assert.Equal(t, 0, r.Len())
}
