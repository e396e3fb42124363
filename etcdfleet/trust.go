package etcdfleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// trust is what a replica needs to believe a record: the fleet
// authority, the enrollments and revocations it signed (enroll.go), the
// rules a record's endpoint must pass, and the count and log of the
// records it dropped. It also indexes the replica's own claims by key, so
// that the follower notices when one of them is overwritten or deleted
// behind its back (see the package doc's "What a replica trusts").
type trust struct {
	auth     authority
	reg      registry                            // the follower's own
	snap     atomic.Pointer[map[string]enrolled] // reg, published (enroll.go)
	peerPath string
	peers    peers
	self     string // this replica's advertised endpoint, normalized; "" if none

	rejected atomic.Uint64
	log      rejectLog
	relist   chan struct{} // a new session: the follower must list the prefix again

	held map[string]*claim // this replica's claims by key; guarded by Replica.mu

	alive map[string]*liveness // the follower's own, by replica name (liveness.go)
}

func newTrust(cfg Config) (*trust, error) {
	auth, err := newAuthority(cfg.Token, cfg.PreviousTokens)
	if err != nil {
		return nil, err
	}
	p, err := parsePeers(cfg.Peers)
	if err != nil {
		return nil, err
	}
	var self string
	if cfg.Advertise != "" {
		self = normalEndpoint(cfg.Advertise)
	}
	t := &trust{auth: auth, peerPath: cfg.PeerPath, peers: p, self: self,
		reg:    registry{byName: map[string]enrolled{}, revoked: map[string]struct{}{}},
		relist: make(chan struct{}, 1), held: map[string]*claim{}, alive: map[string]*liveness{},
		log: rejectLog{seen: map[string]struct{}{}}}
	t.publish()
	return t, nil
}

// Rejected returns how many records the follower has dropped since Join:
// each put of a record that was not signed by the enrolled, unrevoked key
// of the replica it names, that is no valid route for its key, and each
// enrollment or revocation the fleet authority did not sign (see the
// package doc), counts once. One atomic load; safe for concurrent use.
func (r *Replica) Rejected() uint64 { return r.trust.rejected.Load() }

// admit returns the record kv holds if the replica it names signed it for
// its key and lease, with the key and endpoint of its enrollment as the
// follower's table has it now, and it is a valid route; otherwise it
// counts and logs the rejection and reports false. Only the follower
// calls it.
func (r *Replica) admit(kv *mvccpb.KeyValue) (Record, bool) {
	key := string(kv.Key)
	rec, err := open(key, kv.Lease, kv.Value, r.trust.lookup)
	if err == nil {
		err = validRecord(r.cfg.Prefix, key, rec, r.trust.peerPath, r.trust.peers)
	}
	if err != nil {
		r.reject(key, err)
		return Record{}, false
	}
	// A stale replica's records are genuine, but not shown until it
	// renews its membership (liveness.go).
	if rec.Kind == KindReplica {
		return rec, r.noteAlive(rec, time.Now())
	}
	return rec, !r.isStale(rec.Replica)
}

// rejectLog logs a dropped record once per key, and at most one line per
// rejectLogEvery, saying how many went unlogged meanwhile: a writer that
// floods the prefix with forgeries floods neither the log nor memory.
type rejectLog struct {
	mu         sync.Mutex
	seen       map[string]struct{} // keys logged; cleared when full
	next       time.Time           // no line before
	suppressed int
}

const (
	rejectLogEvery = time.Second
	maxRejectKeys  = 4096
)

func (l *rejectLog) note(log *zap.Logger, key string, err error) {
	l.mu.Lock()
	if _, ok := l.seen[key]; ok {
		l.mu.Unlock()
		return
	}
	now := time.Now()
	if now.Before(l.next) {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	if len(l.seen) >= maxRejectKeys {
		clear(l.seen)
	}
	l.seen[key] = struct{}{}
	l.next = now.Add(rejectLogEvery)
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	log.Warn("etcdfleet: dropped a record: neither listed nor forwarded to",
		zap.String("key", quoted(key)), zap.String("reason", err.Error()), zap.Int("unlogged_since_last", n))
}

// track indexes c, a claim this replica now holds; r.mu is held.
func (r *Replica) track(c *claim) { r.trust.held[c.key] = c }

// untrack removes c from the index; r.mu is held.
func (r *Replica) untrack(c *claim) {
	if r.trust.held[c.key] == c {
		delete(r.trust.held, c.key)
	}
}

// settle covers the moment between a claim's put and its tracking, r.mu
// held: a change to the key that the follower applied in that moment was
// not the claim's concern yet. If the view is already past the put and
// does not hold the claim's own record, the claim is repaired in the
// background (Close waits for it); a repair of an intact key puts the same
// value again, which is harmless.
func (r *Replica) settle(c *claim, owner uint64) {
	if r.view.Revision() < c.rev || r.view.isHidden() {
		// The follower has yet to see the put, and will check it; or
		// the view is hidden, and the listing that shows it checks every
		// tracked claim.
		return
	}
	if rec, ok := r.view.Holder(c.key); ok && rec.Replica == r.cfg.Replica && rec.Owner == owner {
		return
	}
	r.undos.Add(1)
	go func() {
		defer r.undos.Done()
		r.repair(c)
	}()
}

// tampered returns the claim this replica holds on key if kv, the key's
// content at revision rev (nil: deleted), is not what the claim wrote:
// another value, another create revision or another lease. Changes at or
// before the claim's own put are not the claim's concern.
func (r *Replica) tampered(key string, kv *mvccpb.KeyValue, rev int64) *claim {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.trust.held[key]
	if c == nil || rev <= c.rev {
		return nil
	}
	if kv != nil && kv.CreateRevision == c.rev && kv.Lease == int64(c.sess.Lease()) && string(kv.Value) == c.val {
		return nil
	}
	return c
}

// repair answers a change to c's key that c did not make. If the key
// still has the create revision c's claim gave it (it was overwritten),
// the claim's own value is put back, attached to its lease again, in a Txn
// fenced by that revision: nobody else can have claimed the name
// meanwhile, since the key never ceased to exist. Otherwise (the key was
// deleted, perhaps claimed anew) the claim is lost: its consumer is
// killed, as a lost session's are, so that no two replicas serve the name
// and none lists a name nobody serves. A Txn that fails gives the claim up
// too. A lease that is gone means the session ended (an expiry, which
// deletes the key too), which the supervisor handles as every loss. It
// runs on the follower: one Txn, and a lease lookup after a deletion,
// bounded by Config.OpTimeout.
func (r *Replica) repair(c *claim) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
		Then(clientv3.OpPut(c.key, c.val, clientv3.WithLease(c.sess.Lease()))).
		Commit()
	switch {
	case err == nil && resp.Succeeded:
		r.cfg.Logger.Warn("etcdfleet: a held claim was overwritten; its record was put back", zap.String("key", quoted(c.key)))
		return
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || r.ctx.Err() != nil:
		return
	case err == nil:
		// The key is gone or another's. If the lease went with it, this
		// is an expiry the session has not heard of yet, not tampering:
		// the session's loss kills every consumer at once (lose).
		if ttl, lerr := r.cli.TimeToLive(ctx, c.sess.Lease()); lerr == nil && ttl.TTL < 0 {
			return
		}
	}
	r.mu.Lock()
	_, held := r.claims[c]
	delete(r.claims, c)
	r.untrack(c)
	r.mu.Unlock()
	if held {
		r.cfg.Logger.Warn("etcdfleet: a held claim was deleted or taken behind this replica's back; its consumer is killed",
			zap.String("key", quoted(c.key)), zap.Error(err))
		c.kill()
	}
}

// requestRelist asks the follower to list the prefix again, as it does
// after a new session: the view stays hidden until a listing made under
// the new session has replaced it.
func (r *Replica) requestRelist() {
	select {
	case r.trust.relist <- struct{}{}:
	default:
	}
}
