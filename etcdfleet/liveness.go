package etcdfleet

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// A lease lives as long as anyone sends it keepalives, and etcd does not
// ask who: an etcd writer can keep a crashed replica's lease, and so its
// claims, alive for as long as it likes. So a replica also renews its
// membership every TTL/2, signed with a sequence number that grows with
// each renewal (Record.Seq), and says how often it renews (Record.Every).
// A follower that has seen no higher sequence number of a replica's
// incarnation for staleRenewals of its periods (by its own clock; the
// writers' clocks never matter) holds the replica stale: its records leave
// the view and Peer, and Verify refuses it, until a renewal with a higher
// sequence number comes, which a replayed genuine value never has.

// staleRenewals is how many renewal periods a follower waits for a
// replica's next renewal before it holds the replica stale: 4 TTLs, so
// that a replica slowed down, but alive enough to keep its lease, is not.
const staleRenewals = 8

// liveness is what a follower knows of one replica's renewals.
type liveness struct {
	incarnation string
	seq         uint64
	seen        time.Time     // when the follower saw seq
	every       time.Duration // the replica's renewal period
	stale       bool
}

// renewEvery is this replica's renewal period: TTL/2.
func (r *Replica) renewEvery() time.Duration { return r.cfg.TTL / 2 }

// noteAlive records a membership the follower admitted, and reports
// whether it may be shown: not while its replica is stale, unless it is a
// renewal that brings the replica back (a higher sequence number, or a
// new incarnation), in which case the follower lists the prefix again to
// show the replica's records. Only the follower calls it.
func (r *Replica) noteAlive(rec Record, now time.Time) bool {
	l, ok := r.trust.alive[rec.Replica]
	every := time.Duration(rec.Every) * time.Millisecond
	switch {
	case !ok || l.incarnation != rec.Incarnation:
		r.trust.alive[rec.Replica] = &liveness{incarnation: rec.Incarnation, seq: rec.Seq, seen: now, every: every}
		if ok && l.stale {
			r.trust.publish()
			r.requestRelist()
		}
		return true
	case rec.Seq > l.seq:
		l.seq, l.seen, l.every = rec.Seq, now, every
		if l.stale {
			l.stale = false
			r.trust.publish()
			r.requestRelist()
		}
		return true
	}
	return !l.stale
}

// isStale reports whether the follower holds replica stale.
func (r *Replica) isStale(replica string) bool {
	l, ok := r.trust.alive[replica]
	return ok && l.stale
}

// sweepStale holds stale every replica whose last renewal the follower saw
// more than staleRenewals periods ago, drops its records from the view
// and publishes the table, so that Verify refuses it. Cost: one pass over
// the replicas; it runs on the follower every TTL/2.
func (r *Replica) sweepStale(now time.Time) {
	stale := map[string]bool{}
	for name, l := range r.trust.alive {
		if !l.stale && l.every > 0 && now.Sub(l.seen) > staleRenewals*l.every {
			l.stale = true
			stale[name] = true
			r.cfg.Logger.Warn("etcdfleet: a replica stopped renewing its membership; its records are dropped until it does",
				zap.String("replica", quoted(name)), zap.Duration("since", now.Sub(l.seen)))
		}
	}
	if len(stale) == 0 {
		return
	}
	r.trust.publish()
	puts := map[string]*Record{}
	for _, k := range r.view.keysOf(stale) {
		puts[k] = nil
	}
	r.view.apply(puts, r.view.Revision())
}

// renew puts this replica's membership again under session s with the
// next sequence number, fenced by the key's lease: a membership another
// process of the same name put is left alone. A failure is logged; the
// next renewal, or the session's loss, follows. One Txn, bounded by
// Config.OpTimeout.
func (r *Replica) renew(s *concurrency.Session) {
	key := r.memberKey()
	rec := r.membership()
	val, err := seal(r.key, key, int64(s.Lease()), rec)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	_, err = r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", s.Lease())).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(s.Lease()))).
		Commit()
	if err != nil && r.ctx.Err() == nil {
		r.cfg.Logger.Warn("etcdfleet: renewing the membership", zap.Error(err))
	}
}

// membership returns this replica's membership record with the next
// sequence number.
func (r *Replica) membership() Record {
	return Record{Replica: r.cfg.Replica, Endpoint: r.cfg.Advertise, Kind: KindReplica, Incarnation: r.incarnation,
		Seq: r.seq.Add(1), Every: r.renewEvery().Milliseconds()}
}
