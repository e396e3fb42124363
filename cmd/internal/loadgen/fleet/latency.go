package fleet

import (
	"slices"

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

// newLatencies returns the run's book and the one set every goroutine
// records into: a fleet's operations are network round trips, so a lock
// on every Record costs nothing next to them.
func newLatencies() (*latency.Book[op], *latency.Set[op]) {
	book := latency.NewBook(numOps)
	all := make([]op, numOps)
	for o := range numOps {
		all[o] = o
	}
	return book, book.Set(true, all...)
}

func sortStrings(s []string) { slices.Sort(s) }
