package fleet

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
	"github.com/livereg/livereg/etcdfleet"
)

// record is the bookkeeping of one consumer start. Like inproc's
// it never refers to the Consumer handle, so that the route body, which
// holds the record, cannot keep a dropped consumer alive.
type record struct {
	id     uint64
	name   string
	tag    string   // the tool's Title: how listings and claims name the owner
	public bool     // the route's plan is public
	rep    *replica // the replica instance it started on

	done  <-chan struct{} // the owner's Done; nil until the start succeeded
	owner uint64          // the owner's ID, as its claim records it; set with done
	lease atomic.Int64    // the lease its claim hangs on; 0 when unknown
	won   atomic.Bool     // its start succeeded
	// death is the clock reading taken when the owner's Done was observed
	// closed, 0 until then.
	death    atomic.Uint64
	stopping atomic.Bool // its Stop has begun
	stopped  atomic.Bool // its Stop returned nil

	// claimLease is the lease of the put that created its key, as the
	// watch saw it; 0 until then. lossJudged: invariant 7 has judged it.
	claimLease atomic.Int64
	lossJudged atomic.Bool
}

// alive reports whether the owner still lives: a start that succeeded and
// a Done not closed. Deaths are permanent, so alive now means alive at
// every moment since the start.
func (r *record) alive() bool { return r.won.Load() && r.done != nil && !wait.Closed(r.done) }

// diedBefore reports whether the owner was observed dead at a clock
// reading below t.
func (r *record) diedBefore(t uint64) bool {
	d := r.death.Load()
	return d != 0 && d < t
}

// claimed is a name's claim in etcd as one Get saw it.
type claimed struct {
	key   string
	tag   string // the owner's tag from the record's Title
	lease int64
}

// claimChecker checks invariant 1. Every judgement follows one argument: a
// live owner whose start succeeded and whose Stop has not begun has not
// released its claim (the catalog releases only from Stop, or once the
// owner is dead), and a lease that still lives has not taken its keys
// with it; so while both live, the key must be the owner's own, and
// nobody else's start on the name can have succeeded. A suspect case
// whose lease turns out gone is the window a lost session leaves (the
// etcdfleet package doc's "Crashes and partitions"), counted as
// inconclusive rather than a violation.
//
// One more promise makes the window finite: a replica that loses its
// session kills every consumer that claimed under it (etcdfleet's
// "Crashes and partitions"). So a consumer whose lease is gone may live on
// for a moment, but not for longer than grace after the sampler first
// found the lease gone: then it serves a name it no longer holds, which
// another replica may claim.
type claimChecker struct {
	t          *tally
	leaseAlive func(lease int64) bool
	grace      time.Duration
	now        func() time.Time
	// deadSince is when sample first found each lease gone; only the
	// sampler's goroutine uses it.
	deadSince map[int64]time.Time
}

// newClaimChecker makes a claimChecker whose consumers may outlive their
// lease by grace.
func newClaimChecker(t *tally, leaseAlive func(int64) bool, grace time.Duration) claimChecker {
	return claimChecker{t: t, leaseAlive: leaseAlive, grace: grace, now: time.Now, deadSince: map[int64]time.Time{}}
}

// judgeable reports whether rec must still hold its claim by the argument
// above, as far as the loadgen can tell without asking etcd: a crashed
// replica's consumers are abandoned, not judged.
func judgeable(rec *record) bool {
	return rec.alive() && !rec.stopping.Load() && rec.lease.Load() != 0 && !rec.rep.crashed.Load()
}

// startWon is called once rec's start on its name succeeded, with every
// other consumer whose start on the name had succeeded: none of them may
// still live with its claim in place.
func (c claimChecker) startWon(rec *record, others []*record) {
	for _, o := range others {
		if o == rec || !judgeable(o) {
			continue
		}
		c.t.Check(InvTwoLiveClaims, 1)
		if !c.leaseAlive(o.lease.Load()) {
			c.t.unsure(InvTwoLiveClaims)
			continue
		}
		c.t.Violate(InvTwoLiveClaims, "the start of %s on %s (%s) succeeded while %s (%s), whose start had succeeded, still lived with its lease %x",
			rec.tag, rec.name, rec.rep.name, o.tag, o.rep.name, o.lease.Load())
	}
}

// sample judges one Get of the prefix at revision rev, parsed into claims
// (name → claim). cands are consumers that were judgeable, with their
// starts returned, before the Get began; the ones still judgeable after it
// lived throughout, so at rev the key of each must be its own.
func (c claimChecker) sample(rev int64, cands []*record, claims map[string]claimed) {
	for _, rec := range cands {
		if !judgeable(rec) {
			continue
		}
		c.t.Check(InvTwoLiveClaims, 1)
		got, ok := claims[rec.name]
		if ok && got.tag == rec.tag {
			continue
		}
		if lease := rec.lease.Load(); !c.leaseAlive(lease) {
			c.outlived(rec, lease)
			continue
		}
		holder := "no key"
		if ok {
			holder = fmt.Sprintf("the claim of %q (lease %x)", got.tag, got.lease)
		}
		c.t.Violate(InvTwoLiveClaims, "at revision %d, etcd shows %s on %s, while %s (%s), whose start had succeeded, lived with its lease %x",
			rev, holder, rec.name, rec.tag, rec.rep.name, rec.lease.Load())
	}
}

// outlived judges rec, which lives although its lease is gone: inconclusive
// within grace of the first time a sample found the lease gone, a
// violation after.
func (c claimChecker) outlived(rec *record, lease int64) {
	now := c.now()
	since, seen := c.deadSince[lease]
	if !seen {
		c.deadSince[lease] = now
		since = now
	}
	if now.Sub(since) <= c.grace {
		c.t.unsure(InvTwoLiveClaims)
		return
	}
	c.t.Violate(InvTwoLiveClaims, "%s (%s on %s) still lives %v after its lease %x was found gone: its replica did not kill it, and it serves a name it no longer holds",
		rec.tag, rec.name, rec.rep.name, now.Sub(since).Round(time.Millisecond), lease)
}

// parseClaims reads the tool claims of one Get (key, value and lease of
// each key under dir): a key that does not decode, or that is not the key
// of the name its record claims, is a violation of invariant 1 on its
// own. Keys of names the forger made up are not claims, and are skipped. Etcd holds one value per key, so with every claim under its name's
// own key no name can be claimed twice at one revision.
func (c claimChecker) parseClaims(rev int64, dir string, kvs []kv) map[string]claimed {
	out := make(map[string]claimed, len(kvs))
	for _, e := range kvs {
		if strings.HasPrefix(e.key, dir+forgedPrefix) {
			continue // the forger's: invariant 8 judges them
		}
		c.t.Check(InvTwoLiveClaims, 1)
		rec, err := etcdfleet.DecodeRecord(e.value)
		if err != nil || rec.Tool == nil {
			c.t.Violate(InvTwoLiveClaims, "at revision %d, key %s holds no tool claim: %v", rev, e.key, err)
			continue
		}
		if want := dir + url.PathEscape(rec.Tool.Name); e.key != want {
			c.t.Violate(InvTwoLiveClaims, "at revision %d, key %s claims %q, whose key is %s", rev, e.key, rec.Tool.Name, want)
			continue
		}
		out[rec.Tool.Name] = claimed{key: e.key, tag: rec.Tool.Title, lease: e.lease}
	}
	return out
}

// kv is one key of a Get or one event's previous value.
type kv struct {
	key   string
	value []byte
	lease int64
}

// releaseChecker checks invariant 2 on every delete under the prefix: the
// key's owner must be dead, or stopping, or its lease gone. A key deleted
// while its owner lives and its Stop has not begun was not deleted by that
// owner's release (the catalog releases only from Stop or after the
// death), and, its lease living, not by an expiry or a revoke: only a
// release that was not fenced on the key's create revision, a late
// release of an earlier claim, removes it.
type releaseChecker struct {
	t          *tally
	lookup     func(tag string) *record
	leaseAlive func(lease int64) bool
}

// deleted judges the delete of prev, the key's last value.
func (c releaseChecker) deleted(rev int64, prev kv) {
	rec, err := etcdfleet.DecodeRecord(prev.value)
	if err != nil || rec.Tool == nil {
		return // not a tool claim: invariant 1's parse reports such keys
	}
	owner := c.lookup(rec.Tool.Title)
	if owner == nil {
		return
	}
	c.t.Check(InvLateReleaseRemovedSuccessor, 1)
	if !owner.alive() || owner.stopping.Load() {
		return
	}
	if !c.leaseAlive(prev.lease) {
		c.t.unsure(InvLateReleaseRemovedSuccessor)
		return
	}
	c.t.Violate(InvLateReleaseRemovedSuccessor, "at revision %d, the key %s of %s (%s), which lives, has not begun to stop and whose lease %x lives, was deleted",
		rev, prev.key, owner.tag, owner.rep.name, prev.lease)
}

// callArgs are a call's arguments: when the call began on the loadgen's
// clock, the credential it presents, the replica instance it was sent to,
// and, for the panic death, the record whose body must panic.
type callArgs struct {
	Seq   uint64 `json:"seq,omitempty"`
	Cred  string `json:"cred,omitempty"`
	Via   int    `json:"via,omitempty"`
	Panic uint64 `json:"panic,omitempty"`
	Task  uint64 `json:"task,omitempty"` // run as a task (tasks.go): its nonce
	// Progress, when set, has the body report progress (progress.go): the
	// call's nonce.
	Progress uint64 `json:"progress,omitempty"`
}

// bodyChecker checks invariants 3 and 6 from inside every route body.
type bodyChecker struct{ t *tally }

func (c bodyChecker) bodyRan(rec *record, a callArgs, pr bindsec.Principal) {
	c.t.Check(InvLocalBodyAfterStop, 1)
	if rec.stopped.Load() {
		c.t.Violate(InvLocalBodyAfterStop, "body of %s (%s on %s) started after its consumer's Stop had returned", rec.tag, rec.name, rec.rep.name)
	}
	if !rec.public {
		c.t.Check(InvUnauthenticatedBody, 1)
		if a.Cred != credValid || pr.Subject() != subjectValid || !pr.HasRole(roleCall) {
			c.t.Violate(InvUnauthenticatedBody, "body of %s (%s on %s, plan needs %q) ran for a call with credential %q, principal %q",
				rec.tag, rec.name, rec.rep.name, roleCall, a.Cred, pr.Subject())
		}
	}
	if a.Seq == 0 {
		return
	}
	inv, how := InvLocalBodyAfterDeath, "a local call"
	if a.Via != rec.rep.id {
		inv, how = InvForwardBodyAfterDeath, fmt.Sprintf("a call forwarded from replica instance %d", a.Via)
	}
	c.t.Check(inv, 1)
	if rec.diedBefore(a.Seq) {
		c.t.Violate(inv, "body of %s (%s on %s) ran for %s that began at %d, after its owner was observed dead at %d",
			rec.tag, rec.name, rec.rep.name, how, a.Seq, rec.death.Load())
	}
}

// forwardChecker checks the answers of calls made through a replica that
// located the route on another one (invariant 3): when the consumer
// there lived throughout the call, its Stop not begun, with both replicas
// up, the call must reach its body (the answer is its tag), or be denied
// by its plan (a call without credentials to a route that needs a role).
// Unknown, route_gone, peer_unavailable, another body's answer or a denial
// that the plan does not call for are violations, unless the consumer's
// lease turns out gone (the replica that forwarded may rightly no longer
// have located it), or the answer is another consumer's whose lease is
// gone: the replica called still served its own consumer of the name,
// whose claim a lost session took, in the window before it kills it
// (etcdfleet's "Crashes and partitions"; the claim checker bounds that
// window). Those are inconclusive.
type forwardChecker struct {
	t          *tally
	leaseAlive func(lease int64) bool
	lookup     func(tag string) *record
	// local returns the consumers of name on replica via that lived at
	// clock reading since or later.
	local func(name string, via *replica, since uint64) []*record
}

// answered judges the answer (o, text) of a call through via that began
// at clock reading seq, with credential cred, to the route that via
// located at holder's replica, whose consumer lived when the call began. hidden says via lost its
// session during the call, or is between sessions, or (for a
// peer_unavailable) held, when the call began, a lease that is gone: it
// then hides the fleet's routes (etcdfleet's "While etcd stalls"), and
// its enrollment went with the lease, so an unknown or a
// peer_unavailable is inconclusive. shown says via's view located the route, before the
// call, by holder's own record: one that located it by a predecessor's
// record on the same replica lags behind the successor's claim, and may
// apply the predecessor's release before it, holding no record of the
// name in between, so an unknown is inconclusive then too.
//
// state, if set, describes via's view and session after the call, for the
// report of a violation.
func (c forwardChecker) answered(holder *record, via *replica, seq uint64, cred string, o outcome, text string, hidden, shown bool, state func() string) {
	if !holder.alive() || holder.stopping.Load() || holder.rep.down.Load() || via.down.Load() {
		return // it died, began to stop, or a replica went down: anything goes
	}
	c.t.Check(InvForwardAnswer, 1)
	switch {
	case o == outcomeOK && text == holder.tag:
		return
	case o == outcomeDenied && !holder.public && cred != credValid:
		return
	case o == outcomeUnknown && (hidden || !shown):
		c.t.unsure(InvForwardAnswer)
		return
	case o == outcomePeerUnavailable && hidden:
		// via's enrollment went with its lease: the holder rightly
		// refused a hop signed by a replica it no longer knew.
		c.t.unsure(InvForwardAnswer)
		return
	}
	if !c.leaseAlive(holder.lease.Load()) {
		c.t.unsure(InvForwardAnswer)
		return
	}
	if o == outcomeOK {
		if other := c.lookup(text); other != nil && !c.leaseAlive(other.lease.Load()) {
			c.t.unsure(InvForwardAnswer)
			return
		}
	}
	// A denial or an unknown carries no tag: any consumer of the name on
	// the replica called that lived during the call, its claim gone, may
	// have given it, though the loss of its session has killed it since.
	for _, l := range c.local(holder.name, via, seq) {
		if l != holder && !c.leaseAlive(l.lease.Load()) {
			c.t.unsure(InvForwardAnswer)
			return
		}
	}
	got := o.String()
	if o == outcomeOK {
		got = fmt.Sprintf("the answer of %q", text)
	}
	after := ""
	if state != nil {
		after = "; after it, " + state()
	}
	c.t.Violate(InvForwardAnswer, "a call to %s through %s with credential %q, which %s (%s, public %v) served and lived throughout, got %s%s",
		holder.name, via.name, cred, holder.rep.name, holder.tag, holder.public, got, after)
}

// convergeChecker checks invariant 4 once churn has stopped.
type convergeChecker struct {
	t     *tally
	bound time.Duration // every replica's listing the same within this
	clock clock
}

// clock is what the timing checkers read and sleep on: the real one when
// zero, a test's own otherwise, so that their tests judge durations
// without waiting for them.
type clock struct {
	now   func() time.Time
	sleep func(time.Duration)
}

func (c clock) Now() time.Time {
	if c.now == nil {
		return time.Now()
	}
	return c.now()
}

func (c clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c clock) Sleep(d time.Duration) {
	if c.sleep == nil {
		time.Sleep(d)
		return
	}
	c.sleep(d)
}

// converge polls every replica's listing until all are the same, and
// returns how long that took from the call, and the listing; it gives up
// after patience.
func (c convergeChecker) converge(ctx context.Context, listings func() [][]string, patience time.Duration) (time.Duration, []string) {
	t0 := c.clock.Now()
	c.t.Check(InvListingConvergence, 1)
	for {
		ls := listings()
		if same(ls) {
			took := c.clock.Since(t0)
			if took > c.bound {
				c.t.Violate(InvListingConvergence, "the replicas' listings became the same %v after churn stopped, over the bound of %v", took.Round(time.Microsecond), c.bound)
			}
			if len(ls) == 0 {
				return took, nil
			}
			return took, ls[0]
		}
		if c.clock.Since(t0) > patience || ctx.Err() != nil {
			c.t.Violate(InvListingConvergence, "the replicas' listings were still not the same %v after churn stopped: %s", patience, diffListings(ls))
			return -1, nil
		}
		c.clock.Sleep(time.Millisecond)
	}
}

// settle waits, up to patience, for the replicas' common listing to be the
// live consumers' routes (a crashed replica's claims go when its lease
// expires): what every replica lists once churn stops must be the truth.
func (c convergeChecker) settle(ctx context.Context, listings func() [][]string, want func() []string, patience time.Duration) time.Duration {
	t0 := c.clock.Now()
	c.t.Check(InvListingConvergence, 1)
	var ls [][]string
	var w []string
	for {
		ls, w = listings(), want()
		if same(ls) && (len(ls) == 0 || slices.Equal(ls[0], w)) {
			return c.clock.Since(t0)
		}
		if c.clock.Since(t0) > patience || ctx.Err() != nil {
			break
		}
		c.clock.Sleep(2 * time.Millisecond)
	}
	got := "none"
	if len(ls) > 0 {
		got = strings.Join(ls[0], " ")
	}
	c.t.Violate(InvListingConvergence, "%v after churn stopped the replicas list [%s] (same: %v), want the live consumers' [%s]",
		patience, got, same(ls), strings.Join(w, " "))
	return -1
}

func same(ls [][]string) bool {
	for _, l := range ls[min(1, len(ls)):] {
		if !slices.Equal(l, ls[0]) {
			return false
		}
	}
	return true
}

func diffListings(ls [][]string) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("replica %d: [%s]", i, strings.Join(l, " "))
	}
	return strings.Join(parts, "; ")
}

// crashChecker checks invariant 5: a crashed replica's name is free,
// claimed by a start on another replica, within bound of the crash.
type crashChecker struct {
	t     *tally
	bound time.Duration
	clock clock
}

// probe retries start every interval, from the crash at t0, until it
// claims the name (start returns nil) or patience runs out, and judges how
// long that took. It returns the time taken (-1 if never) and start's
// last error.
func (c crashChecker) probe(ctx context.Context, name string, t0 time.Time, interval, patience time.Duration, start func(context.Context) error) (time.Duration, error) {
	c.t.Check(InvCrashedNamesFreed, 1)
	var last error
	for {
		err := start(ctx)
		if err == nil {
			took := c.clock.Since(t0)
			if took > c.bound {
				c.t.Violate(InvCrashedNamesFreed, "%s, claimed by a replica that crashed, was claimed elsewhere only %v after the crash, over the bound of %v",
					name, took.Round(time.Millisecond), c.bound)
			}
			return took, nil
		}
		last = err
		if c.clock.Since(t0) > patience || ctx.Err() != nil {
			c.t.Violate(InvCrashedNamesFreed, "%s, claimed by a replica that crashed, could still not be claimed elsewhere %v after the crash: %v",
				name, patience, last)
			return -1, last
		}
		c.clock.Sleep(interval)
	}
}
