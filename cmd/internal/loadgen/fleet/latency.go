package fleet

import (
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
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

// latencies holds one histogram per op, each under its own lock: a fleet's
// operations are network round trips, so a lock costs nothing next to them.
type latencies struct {
	mu [numOps]sync.Mutex
	h  [numOps]*hdrhistogram.Histogram
}

func newLatencies() *latencies {
	l := &latencies{}
	for o := range numOps {
		l.h[o] = latency.New()
	}
	return l
}

func (l *latencies) record(o op, d time.Duration) {
	l.mu[o].Lock()
	latency.Record(l.h[o], d)
	l.mu[o].Unlock()
}

func (l *latencies) snapshot(o op) *hdrhistogram.Histogram {
	l.mu[o].Lock()
	defer l.mu[o].Unlock()
	return hdrhistogram.Import(l.h[o].Export())
}

func sortStrings(s []string) { slices.Sort(s) }
