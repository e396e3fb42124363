package owner

import "sync/atomic"

// The death clock is one atomic word holding two counts, so that a reader
// gets both in one load: deaths in progress in the low inProgressBits bits,
// deaths completed above them.
//
// A death first adds one to "in progress", then flips the cell to dead, then
// moves itself from "in progress" to "completed". Neither simpler order is
// sound. Counting the death as completed before the flip lets a sweep read
// the new count, still meet the entry alive, and record a count that claims
// the death was seen. Flipping first lets a reader see the owner dead while
// the count has not moved, and a registry trusting the unchanged count would
// refuse a register that a sweep could have made room for.
const (
	inProgressBits = 24
	deathStarted   = uint64(1)
	deathCompleted = uint64(1)<<inProgressBits - 1 // +1 completed, -1 in progress
	inProgressMask = uint64(1)<<inProgressBits - 1
)

// clock is the process-wide death clock; see Deaths.
var clock atomic.Uint64

// testHookDeathFlipped, when set by a test, runs between a cell's flip to
// dead and the move of its death to "completed". It is nil in production.
var testHookDeathFlipped func()

// Deaths reads the process-wide death clock: completed is the number of
// tokens that have finished dying so far, and settled reports that no death
// was in progress at the moment of the read. Every death, by whatever path,
// counts exactly once.
//
// The clock lets a registry skip work. Suppose a registry, when it begins a
// sweep that removes every dead-owner entry, reads (c, true). If a later read
// returns (c, true) again, no token has started dying in between: one that
// had would either still be in progress (settled false) or have completed
// (count moved). So every owner that was alive when the sweep read it is
// alive still, and a new sweep would find nothing. Any other reading means a
// sweep may find something.
//
// The completed count wraps after 2^40 deaths; a registry would have to see
// exactly a multiple of that many deaths between two reads to be misled.
func Deaths() (completed uint64, settled bool) {
	w := clock.Load()
	return w >> inProgressBits, w&inProgressMask == 0
}
