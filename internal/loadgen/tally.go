package loadgen

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Invariant numbers ADR-0068's promises, as the README lists them.
type Invariant int

// The invariants; see the package documentation for each definition.
const (
	InvBodyAfterDeath Invariant = iota + 1
	InvLateStopRemovedSuccessor
	InvUnauthenticatedBody
	InvCapCounter
	InvDeadEntryReturned
	InvDuplicateWithDeadIncumbent
	InvResourceGrowth
	InvBodyAfterStop
	InvOneWinner
	InvListChanged
	InvTemplateMatch
	InvResourceUpdate
	numInvariants = int(InvResourceUpdate)
)

// Invariants lists every invariant in order.
var Invariants = []Invariant{
	InvBodyAfterDeath, InvLateStopRemovedSuccessor, InvUnauthenticatedBody, InvCapCounter,
	InvDeadEntryReturned, InvDuplicateWithDeadIncumbent, InvResourceGrowth,
	InvBodyAfterStop, InvOneWinner, InvListChanged, InvTemplateMatch, InvResourceUpdate,
}

var invariantNames = [numInvariants + 1]string{
	"",
	"body_after_death",
	"late_stop_removed_successor",
	"unauthenticated_body",
	"cap_counter",
	"dead_entry_returned",
	"duplicate_with_dead_incumbent",
	"resource_growth",
	"body_after_stop",
	"one_winner",
	"list_changed",
	"template_match",
	"resource_update",
}

// String is the invariant's key in reports and JSON.
func (i Invariant) String() string { return invariantNames[i] }

// maxExamples bounds the messages kept per invariant and for errors: the
// first few say what went wrong, the count says how often.
const maxExamples = 5

// tally counts checks and violations per invariant, and unexpected errors.
// It is safe for concurrent use; counting is one atomic add.
type tally struct {
	checks     [numInvariants + 1]atomic.Int64
	violations [numInvariants + 1]atomic.Int64
	errors     atomic.Int64

	mu            sync.Mutex
	examples      [numInvariants + 1][]string
	errorExamples []string
}

// check counts n occasions on which inv could have been violated. A
// checker that never checks proves nothing, so reports show these counts.
func (t *tally) check(inv Invariant, n int64) { t.checks[inv].Add(n) }

// violate counts one violation of inv and keeps its message if it is among
// the first few.
func (t *tally) violate(inv Invariant, format string, args ...any) {
	if t.violations[inv].Add(1) > maxExamples {
		return
	}
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.examples[inv] = append(t.examples[inv], msg)
	t.mu.Unlock()
}

// unexpected counts an error that no invariant names but that a correct
// catalog does not produce (a Stop that times out, a start refused for a
// reason other than a duplicate or the cap).
func (t *tally) unexpected(format string, args ...any) {
	if t.errors.Add(1) > maxExamples {
		return
	}
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.errorExamples = append(t.errorExamples, msg)
	t.mu.Unlock()
}

// Violations returns the count for inv.
func (t *tally) Violations(inv Invariant) int64 { return t.violations[inv].Load() }

// Checks returns how often inv was checked.
func (t *tally) Checks(inv Invariant) int64 { return t.checks[inv].Load() }

// totalViolations sums every invariant's count.
func (t *tally) totalViolations() int64 {
	var n int64
	for _, inv := range Invariants {
		n += t.violations[inv].Load()
	}
	return n
}

func (t *tally) examplesOf(inv Invariant) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.examples[inv]...)
}

func (t *tally) errorMessages() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errorExamples...)
}
