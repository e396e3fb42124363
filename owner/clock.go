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

// testHookBeforeFlip, when set by a test, runs inside every death after it
// has waited out the holds and holders, just before the flip to dead: the
// token is sealed and dying, and still reads alive. It is nil in production.
var testHookBeforeFlip func()

// testHookEntering, when set by a test, runs inside Enter between the
// announcement of the hold and the read of the token's state. It is nil in
// production.
var testHookEntering func()

// testHookTracking, when set by a test, runs inside Track between the
// attachment of the clock as the cell's own and the read of the token's
// state. It is nil in production.
var testHookTracking func()

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

// A DeathClock is a death clock of its own for the tokens attached to it
// with [Ref.Track]: it counts their deaths, and only theirs, as [Deaths]
// counts every death in the process, with the same two counts and the same
// order (in progress before the token reads dead, completed after). A
// registry keeps one and attaches to it the owner of every entry before the
// entry becomes visible: its deaths then prove, as Deaths does, that none
// of its owners can have died since a reading, while deaths of owners that
// hold nothing in it leave the clock still.
//
// The counts are striped across cache lines, a token's death ticking the
// stripe its ID picks, so that owners of one registry dying on different
// cores do not all write one word. Read sums the stripes.
//
// The zero DeathClock is ready to use and has counted nothing. A DeathClock
// must not be copied after first use. It takes clockStripes cache lines.
// Read is one atomic load per stripe, of lines that only deaths write; a
// death costs each clock its token is attached to two atomic adds.
type DeathClock struct {
	stripes [clockStripes]clockStripe
}

// clockStripes is the number of stripes of a DeathClock.
const clockStripes = 8

type clockStripe struct {
	w atomic.Uint64 // as the process-wide clock: completed, then in progress
	_ [56]byte
}

// add adds d to the stripe of the token with the given ID.
func (c *DeathClock) add(id, d uint64) { c.stripes[id%clockStripes].w.Add(d) }

// Read reports how many deaths of attached tokens have completed, and
// whether none was in progress when the read looked at it.
//
// The rule of [Deaths] applies, restricted to the attached tokens, with one
// refinement: a reading loads the stripes one after another, so it spans a
// short interval rather than an instant. If two readings are settled and
// return the same count, every token attached before the first that was not
// dead when the first ended had not begun dying when the second began. A
// death ticks one stripe, in progress and then completed. Begun before the
// first reading looked at that stripe, it had completed by then (settled),
// so the token was dead when the first reading ended. Begun after, and
// before the second reading looked at the stripe, it would show there as in
// progress or as a count that moved, since completed counts only grow and
// the sums agree. A token attached after the first reading can only begin
// dying after its attachment, which the second reading sees the same way.
func (c *DeathClock) Read() (completed uint64, settled bool) {
	settled = true
	for i := range c.stripes {
		w := c.stripes[i].w.Load()
		completed += w >> inProgressBits
		settled = settled && w&inProgressMask == 0
	}
	return completed, settled
}
