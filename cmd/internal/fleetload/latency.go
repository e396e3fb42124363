package fleetload

import (
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// op is a kind of operation whose latency is measured.
type op int

const (
	opCallLocal    op = iota // tools/call answered by the replica it was sent to
	opCallForward            // tools/call forwarded to the replica that holds the route
	opList                   // tools/list, every page
	opStart                  // StartTool, every outcome (a claim in etcd included)
	opStop                   // Stop of a live consumer (a release in etcd included)
	opQuietLocal             // call_local with churn stopped, one call at a time
	opQuietForward           // call_forward with churn stopped, one call at a time
	numOps
)

var opNames = [numOps]string{"call_local", "call_forward", "list", "start", "stop", "quiet_call_local", "quiet_call_forward"}

func (o op) String() string { return opNames[o] }

// Histogram bounds as internal/loadgen's: 1 ns to 60 s, 3 digits.
const (
	histMin    = 1
	histMax    = int64(60 * time.Second)
	histDigits = 3
)

// latencies holds one histogram per op, each under its own lock: a fleet's
// operations are network round trips, so a lock costs nothing next to them.
type latencies struct {
	mu [numOps]sync.Mutex
	h  [numOps]*hdrhistogram.Histogram
}

func newLatencies() *latencies {
	l := &latencies{}
	for o := range numOps {
		l.h[o] = hdrhistogram.New(histMin, histMax, histDigits)
	}
	return l
}

func (l *latencies) record(o op, d time.Duration) {
	v := min(max(int64(d), histMin), histMax)
	l.mu[o].Lock()
	_ = l.h[o].RecordValue(v) // in range by construction
	l.mu[o].Unlock()
}

func (l *latencies) snapshot(o op) *hdrhistogram.Histogram {
	l.mu[o].Lock()
	defer l.mu[o].Unlock()
	return hdrhistogram.Import(l.h[o].Export())
}

func sortStrings(s []string) { slices.Sort(s) }
