package owner

import (
	"testing"
)

// When a death closes Done, the cell must already read dead: whatever a
// close of Done wakes (a registry reclaiming the owner's entries, an
// AfterDeath function) acts on the death and would find the owner alive
// otherwise, leaving its entries in place.
//
// From outside, the order of the two steps cannot be seen deterministically:
// they are adjacent, and a woken reader runs in parallel with the rest of the
// death. So the test makes the close itself the observation point. It gives
// a cell a Done that is already closed, so that kill panics at the very
// instant it closes Done, and reads the cell's state there. It catches a
// kill that closes Done before it stores dead, every run.
func TestDoneClosesOnlyAfterTheCellReadsDead(t *testing.T) {
	c := newCell()
	close(c.done)
	var atClose any
	func() {
		defer func() { atClose = recover() }()
		c.kill(Released)
	}()
	// The interrupted death counted itself as started and never completed:
	// take it off the process-wide clock, or the clock never settles again.
	clock.Add(^deathStarted + 1) // two's complement: minus one started

	if atClose == nil {
		t.Fatal("kill did not close Done")
	}
	if got := c.state.Load(); got != stateDead {
		t.Errorf("Done was closed while the cell was still in state %d, want %d (alive 0, dying 1, dead 2)", got, stateDead)
	}
}
