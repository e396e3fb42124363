package fleetload

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Invariant numbers the fleet's promises, as the package doc lists them.
type Invariant int

// The invariants; see the package documentation for each definition.
// The last three are invariant 6, the local ones, checked on every
// replica.
const (
	InvTwoLiveClaims Invariant = iota + 1
	InvLateReleaseRemovedSuccessor
	InvForwardBodyAfterDeath
	InvForwardAnswer
	InvListingConvergence
	InvCrashedNamesFreed
	InvLocalBodyAfterDeath
	InvLocalBodyAfterStop
	InvUnauthenticatedBody
	numInvariants = int(InvUnauthenticatedBody)
)

// Invariants lists every invariant in report order.
var Invariants = []Invariant{
	InvTwoLiveClaims, InvLateReleaseRemovedSuccessor, InvForwardBodyAfterDeath, InvForwardAnswer,
	InvListingConvergence, InvCrashedNamesFreed,
	InvLocalBodyAfterDeath, InvLocalBodyAfterStop, InvUnauthenticatedBody,
}

var invariantNames = [numInvariants + 1]string{
	"",
	"two_live_claims",
	"late_release_removed_successor",
	"forward_body_after_death",
	"forward_answer",
	"listing_convergence",
	"crashed_names_freed",
	"local_body_after_death",
	"local_body_after_stop",
	"unauthenticated_body",
}

// String is the invariant's key in reports and JSON.
func (i Invariant) String() string { return invariantNames[i] }

// Number is the invariant's number in the package doc: both checks of
// forwarded calls are number 3, and the local ones (body after death or
// stop on the replica that holds the route, a body run without valid
// credentials) are all number 6.
func (i Invariant) Number() int { return invariantNumbers[i] }

var invariantNumbers = [numInvariants + 1]int{0, 1, 2, 3, 3, 4, 5, 6, 6, 6}

// maxExamples bounds the messages kept per invariant and for errors.
const maxExamples = 5

// tally counts checks and violations per invariant, and errors that no
// invariant names but that a correct fleet does not produce. Safe for
// concurrent use; counting is one atomic add.
type tally struct {
	checks       [numInvariants + 1]atomic.Int64
	violations   [numInvariants + 1]atomic.Int64
	inconclusive [numInvariants + 1]atomic.Int64
	errors       atomic.Int64

	mu            sync.Mutex
	examples      [numInvariants + 1][]string
	errorExamples []string
}

// check counts n occasions on which inv could have been violated.
func (t *tally) check(inv Invariant, n int64) { t.checks[inv].Add(n) }

// unsure counts a suspect case that a lost session explains, so that it
// proves nothing either way.
func (t *tally) unsure(inv Invariant) { t.inconclusive[inv].Add(1) }

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

// unexpected counts an error that fails the run without naming an
// invariant.
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
