package inproc

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
)

// op is a kind of operation whose latency is measured.
type op uint8

const (
	opCall     op = iota // CallTool from a resolver, every outcome
	opList               // ListTools
	opStart              // StartTool, every outcome
	opStop               // Stop of a live consumer
	opLateStop           // Stop of a consumer that had already died
	opMCPCall            // tools/call through the MCP client
	opMCPList            // tools/list through the MCP client
	opGet                // GetPrompt from a resolver, every outcome
	opRead               // ReadURI of a templated URI from a resolver
	opMCPGet             // prompts/get through the MCP client
	opMCPRead            // resources/read of a templated URI through the MCP client
	numOps
)

var opNames = [numOps]string{"call", "list", "start", "stop", "late_stop", "mcp_call", "mcp_list", "get", "read", "mcp_get", "mcp_read"}

func (o op) String() string { return opNames[o] }

// latencies is a set of histograms, one per op. A resolver owns its set,
// so that recording on the hot path takes no lock; the consumer goroutines,
// whose operations are far rarer, share one locked set to save memory.
// Every set is merged when the run ends.
type latencies struct {
	mu     sync.Mutex
	locked bool
	h      [numOps]*hdrhistogram.Histogram
}

// newLatencies allocates histograms for the given ops only.
func newLatencies(ops ...op) *latencies {
	l := &latencies{}
	for _, o := range ops {
		l.h[o] = latency.New()
	}
	return l
}

func (l *latencies) record(o op, d time.Duration) {
	h := l.h[o]
	if h == nil {
		return
	}
	if l.locked {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	latency.Record(h, d)
}

// latencyBook collects every worker's histograms.
type latencyBook struct {
	mu   sync.Mutex
	all  []*latencies
	used [numOps]bool
}

// worker returns a new set for ops; shared sets lock on every record.
func (b *latencyBook) worker(shared bool, ops ...op) *latencies {
	l := newLatencies(ops...)
	l.locked = shared
	b.mu.Lock()
	b.all = append(b.all, l)
	for _, o := range ops {
		b.used[o] = true
	}
	b.mu.Unlock()
	return l
}

// merged returns one histogram per op that any worker measured.
func (b *latencyBook) merged() map[op]*hdrhistogram.Histogram {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[op]*hdrhistogram.Histogram{}
	for o := range numOps {
		if !b.used[o] {
			continue
		}
		m := latency.New()
		for _, l := range b.all {
			l.mu.Lock()
			if l.h[o] != nil {
				m.Merge(l.h[o])
			}
			l.mu.Unlock()
		}
		out[o] = m
	}
	return out
}
