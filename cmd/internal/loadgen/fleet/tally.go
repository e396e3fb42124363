package fleet

import (
	"sync/atomic"

	"github.com/livereg/livereg/cmd/internal/loadgen/invariant"
)

// Invariant numbers the fleet's promises, as the package doc lists them.
type Invariant int

// The invariants; see the package documentation for each definition.
// InvLocalBodyAfterDeath, InvLocalBodyAfterStop and
// InvUnauthenticatedBody are invariant 6, the local ones, checked on
// every replica.
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
	InvLostSessionClaimLives
	InvForgedListed
	InvForgedFollowed
	InvTaskOutlivedConsumer
	InvTaskAnsweredByOther
	InvUpdateAfterDeath
	InvNotificationOrder
	InvImpostor
	numInvariants = int(InvImpostor)
)

// Invariants lists every invariant in report order.
var Invariants = []Invariant{
	InvTwoLiveClaims, InvLateReleaseRemovedSuccessor, InvForwardBodyAfterDeath, InvForwardAnswer,
	InvListingConvergence, InvCrashedNamesFreed,
	InvLocalBodyAfterDeath, InvLocalBodyAfterStop, InvUnauthenticatedBody,
	InvLostSessionClaimLives, InvForgedListed, InvForgedFollowed,
	InvTaskOutlivedConsumer, InvTaskAnsweredByOther,
	InvUpdateAfterDeath, InvNotificationOrder, InvImpostor,
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
	"lost_session_claim_lives",
	"forged_listed",
	"forged_followed",
	"task_outlived_consumer",
	"task_answered_by_other",
	"update_after_death",
	"notification_order",
	"impostor_trusted",
}

// String is the invariant's key in reports and JSON.
func (i Invariant) String() string { return invariantNames[i] }

// Number is the invariant's number in the package doc: both checks of
// forwarded calls are number 3, the local ones (body after death or
// stop on the replica that holds the route, a body run without valid
// credentials) are all number 6, and both of forged records number 8.
func (i Invariant) Number() int { return invariantNumbers[i] }

var invariantNumbers = [numInvariants + 1]int{0, 1, 2, 3, 3, 4, 5, 6, 6, 6, 7, 8, 8, 9, 10, 11, 12, 13}

// tally counts checks and violations per invariant, and errors that no
// invariant names but that a correct fleet does not produce; beside them,
// the inconclusive cases. Safe for concurrent use; counting is one atomic
// add.
type tally struct {
	invariant.Tally[Invariant]
	inconclusive [numInvariants + 1]atomic.Int64
}

// unsure counts a suspect case that a lost session explains, so that it
// proves nothing either way.
func (t *tally) unsure(inv Invariant) { t.inconclusive[inv].Add(1) }

// A tally counts keys below invariant.MaxKeys: this fails to compile when
// the invariants outgrow it.
var _ [invariant.MaxKeys - numInvariants - 1]struct{}
