package owner

import (
	"testing"
)

// The cause of a death is recorded before the token reads dead: a reader
// that sees the token dead reads its cause, and Cause promises it never
// changes once the token reads dead. The test reads the cell's cause at the
// last instant before the flip. It catches a death that records its cause
// after the flip, which lets a reader see a dead token whose cause reads
// "alive".
func TestCauseIsRecordedBeforeTheFlip(t *testing.T) {
	c := newCell()
	var atFlip Cause
	testHookBeforeFlip = func() { atFlip = Cause(c.cause.Load()) }
	defer func() { testHookBeforeFlip = nil }()
	c.kill(Cancelled)
	if atFlip != Cancelled {
		t.Errorf("the cause was not recorded when the token was about to read dead: atFlip = %v, want %v", atFlip, Cancelled)
	}
}
