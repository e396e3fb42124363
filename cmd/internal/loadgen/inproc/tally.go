package inproc

import "github.com/livereg/livereg/cmd/internal/loadgen/invariant"

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
	InvStopDrain
	InvAfterDeathOrder
	InvListingInstant
	InvListedDeadOwner
	InvRoundReachedOther
	InvTaskOutlivedConsumer
	InvTaskStoreBounds
	InvDeniedHeard
	numInvariants = int(InvDeniedHeard)
)

// Invariants lists every invariant in order.
var Invariants = []Invariant{
	InvBodyAfterDeath, InvLateStopRemovedSuccessor, InvUnauthenticatedBody, InvCapCounter,
	InvDeadEntryReturned, InvDuplicateWithDeadIncumbent, InvResourceGrowth,
	InvBodyAfterStop, InvOneWinner, InvListChanged, InvTemplateMatch, InvResourceUpdate,
	InvStopDrain, InvAfterDeathOrder, InvListingInstant, InvListedDeadOwner, InvRoundReachedOther,
	InvTaskOutlivedConsumer, InvTaskStoreBounds, InvDeniedHeard,
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
	"stop_drain",
	"after_death_order",
	"listing_instant",
	"listed_dead_owner",
	"round_reached_other",
	"task_outlived_consumer",
	"task_store_bounds",
	"denied_heard",
}

// String is the invariant's key in reports and JSON.
func (i Invariant) String() string { return invariantNames[i] }

// tally counts checks and violations per invariant, and errors that no
// invariant names but that a correct catalog does not produce (a Stop
// that times out, a start refused for a reason other than a duplicate or
// the cap). It is safe for concurrent use; counting is one atomic add.
type tally = invariant.Tally[Invariant]

// totalViolations sums every invariant's count.
func totalViolations(t *tally) int64 {
	var n int64
	for _, inv := range Invariants {
		n += t.Violations(inv)
	}
	return n
}

// A tally counts keys below invariant.MaxKeys: this fails to compile when
// the invariants outgrow it.
var _ [invariant.MaxKeys - numInvariants - 1]struct{}
