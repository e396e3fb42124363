package spread

import (
	"runtime"
	"sync"
	"testing"
)

func TestCount(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for _, tc := range []struct{ procs, perCore, limit, want int }{
		{1, 4, 16, 4},
		{2, 4, 16, 8},
		{3, 4, 16, 16},
		{8, 4, 16, 16},
		{8, 4, 32, 32},
		{2, 2, 16, 4},
		{1, 1, 16, 1},
	} {
		runtime.GOMAXPROCS(tc.procs)
		if got := Count(tc.perCore, tc.limit); got != tc.want {
			t.Errorf("Count(%d, %d) at GOMAXPROCS %d = %d, want %d", tc.perCore, tc.limit, tc.procs, got, tc.want)
		}
	}
}

// A goroutine keeps its stripe while its stack stays put, and goroutines
// alive at once spread over the stripes: 64 of them on 16 stripes use more
// than half of the stripes.
func TestHashSpreadsGoroutines(t *testing.T) {
	if a, b := Hash(), Hash(); a != b {
		t.Fatalf("one goroutine, two hashes: %x and %x", a, b)
	}
	const goroutines, stripes = 64, 16
	hashes := make(chan uint32)
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes <- Hash() & (stripes - 1)
			<-hold // every stack stays alive until all have hashed
		}()
	}
	used := map[uint32]bool{}
	for range goroutines {
		used[<-hashes] = true
	}
	close(hold)
	wg.Wait()
	if len(used) <= stripes/2 {
		t.Fatalf("%d goroutines used %d of %d stripes", goroutines, len(used), stripes)
	}
}
