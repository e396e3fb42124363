package fleet

import (
	"net/url"

	"github.com/livereg/livereg/etcdfleet"
)

// lostClaimChecker checks invariant 7: no consumer whose claim was made
// under a session its replica has lost lives once the loss is handled.
//
// The lease a claim hangs on is read from etcd itself: the watch sees the
// put that created the consumer's key, and that put carries the lease. The
// lease that the replica reports before and after the start (what
// invariant 1 judges by) is no substitute: a start that straddles a loss
// sees two leases and is not judged there, and that is exactly the start
// a claim made across a session loss is.
//
// A replica opens its next session only once the loss of the last one is
// handled: every consumer registered under it killed, their Done closed
// (etcdfleet's supervisor runs lose, then reopen). So when the replica's
// current lease, read first, is another one than the claim's, that
// consumer must already read dead: no grace, no window, and no etcd
// round trip in the judgement.
type lostClaimChecker struct {
	t      *tally
	dir    string // the tool claims' directory, "/" included
	lookup func(tag string) *record
	// current returns the lease of r's session now; 0 between sessions
	// and once closed.
	current func(r *replica) int64
}

// created notes the lease of a key's creating put, when the key is its
// name's own and its record names a consumer of the run: the lease that
// consumer's claim hangs on. Forged keys and copies under other keys are
// not claims of their names, and are ignored.
func (c lostClaimChecker) created(key string, value []byte, lease int64) {
	rec, err := etcdfleet.DecodeRecord(value)
	if err != nil || rec.Tool == nil || key != c.dir+url.PathEscape(rec.Tool.Name) {
		return
	}
	if r := c.lookup(rec.Tool.Title); r != nil && r.name == rec.Tool.Name {
		r.claimLease.CompareAndSwap(0, lease)
	}
}

// judge judges rec once its claim's session has been lost and handled: it
// must be dead. Each consumer is judged once, as it is first found so.
func (c lostClaimChecker) judge(rec *record) {
	if rec.lossJudged.Load() || !rec.won.Load() || rec.rep.crashed.Load() {
		return
	}
	lease := rec.claimLease.Load()
	if lease == 0 {
		return // its put not seen yet
	}
	cur := c.current(rec.rep)
	if cur == 0 || cur == lease {
		return // between sessions, closed, or still the claim's session
	}
	// cur was read before Done: the loss was handled before this read.
	if !rec.lossJudged.CompareAndSwap(false, true) {
		return
	}
	c.t.Check(InvLostSessionClaimLives, 1)
	if rec.alive() {
		c.t.Violate(InvLostSessionClaimLives, "%s (%s on %s) claimed under lease %x and still lives after its replica lost that session and opened lease %x: nothing will ever kill it",
			rec.tag, rec.name, rec.rep.name, lease, cur)
	}
}
