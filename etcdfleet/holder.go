package etcdfleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/livereg/livereg/catalog"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// A replica's membership is one key, <prefix>/replicas/<name>, that holds
// a signed record of kind KindReplica: the replica's name, its endpoint
// and its incarnation, a random name drawn once per process. It is put
// when each session opens, attached to the session's lease, so it stands
// exactly as long as the replica's lease does: a crashed process's goes
// when its lease expires, as its claims do. It is put again every TTL/2
// with a growing sequence number (liveness.go), so that a lease kept alive
// by someone else's keepalives does not keep it believed.
//
// It is what tells the others whether a task's holder (package mcpserve's
// tasks across a fleet) is still alive once it holds no claim: a task
// outlives its call, and a completed task's result is kept after its
// consumer stopped. A task's ID carries its holder's stamp (Stamp), and
// every replica locates the stamp in its View (Locate).

// KindReplica is the kind of a replica's membership record.
const KindReplica catalog.Kind = "replica"

// maxIncarnationBytes bounds a membership's incarnation.
const maxIncarnationBytes = 64

// member is the membership the current session put.
type member struct {
	rev int64 // the revision of its put; 0: none
}

// stamp is what a task ID carries of its holder: enough to find the
// replica in a View, to tell a View that has not heard of it yet from one
// that saw it go, and where it was.
type stamp struct {
	Replica     string `json:"r"`
	Incarnation string `json:"i"`
	Rev         int64  `json:"v"` // the membership's revision when the stamp was made
	Endpoint    string `json:"e,omitempty"`
}

// newIncarnation draws a process's incarnation: 96 random bits.
func newIncarnation() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's doc)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// memberKey is the key of this replica's membership.
func (r *Replica) memberKey() string {
	return r.cfg.Prefix + "/replicas/" + url.PathEscape(r.cfg.Replica)
}

// join puts this replica's enrollment and membership under session s, in
// one Txn within ctx, and returns the revision of the put. The enrollment
// comes first and in the same revision, so that a follower knows the key
// before it sees any record the replica signs with it; the Txn fails with
// ErrRevoked if the key was revoked. A membership the others would drop
// (a replica name too long for a key) is not put: the replica then stamps
// no task, and its tasks are served by it alone (rev is then 0).
func (r *Replica) join(ctx context.Context, s *concurrency.Session) (int64, error) {
	ops := []clientv3.Op{clientv3.OpPut(r.enrollKey, r.enrollVal, clientv3.WithLease(s.Lease()))}
	key := r.memberKey()
	rec := r.membership()
	member := len(key) <= MaxKeyBytes && validRecord(r.cfg.Prefix, key, rec, r.trust.peerPath, r.trust.peers) == nil
	if member {
		val, err := seal(r.key, key, int64(s.Lease()), rec)
		if err != nil {
			return 0, err
		}
		ops = append(ops, clientv3.OpPut(key, val, clientv3.WithLease(s.Lease())))
	} else {
		r.cfg.Logger.Warn("etcdfleet: no membership: the replica's name makes no valid key; its tasks are served by it alone", zap.String("replica", quoted(r.cfg.Replica)))
	}
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(revokedKey(r.cfg.Prefix, r.PublicKey())), "=", 0)).
		Then(ops...).
		Commit()
	switch {
	case err != nil:
		return 0, unavailable(err)
	case !resp.Succeeded:
		return 0, fmt.Errorf("%w: this replica's key (%s)", ErrRevoked, quoted(r.cfg.Replica))
	case !member:
		return 0, nil
	}
	return resp.Header.Revision, nil
}

// Stamp names this replica as the holder of the tasks it starts now, for
// package mcpserve (mcpserve.TaskHolders): its name, incarnation and
// endpoint, and the revision of its membership. ok is false between
// sessions, for a replica that put no membership, and for one that
// advertises no endpoint, whose tasks nobody else could reach. Safe for concurrent
// use; one lock and a small JSON encoding.
func (r *Replica) Stamp() (string, bool) {
	r.mu.Lock()
	m, live := r.member, r.sess != nil
	r.mu.Unlock()
	if !live || m.rev == 0 || r.cfg.Advertise == "" {
		return "", false
	}
	b, err := json.Marshal(stamp{Replica: r.cfg.Replica, Incarnation: r.incarnation, Rev: m.rev, Endpoint: r.cfg.Advertise})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Locate says where the holder that stamp names is, as the View has it
// (mcpserve.TaskHolders): HolderHere for this process; HolderLive, at the
// endpoint its membership advertises, while its membership of the same
// incarnation stands; HolderLost, with the endpoint the stamp recorded,
// once the View has seen the revision the stamp was made at and holds no
// such membership (its lease expired or was revoked, or its process was
// replaced); HolderUnknown while the View is hidden or behind the stamp.
// A stamp that does not decode is HolderLost, with no endpoint: only a
// fleet member can have minted it, and none mints such a stamp. Safe for
// concurrent use; it does not block: a JSON decode and one map lookup
// under the View's lock.
func (r *Replica) Locate(s string) (endpoint string, where catalog.HolderState) {
	var st stamp
	if err := json.Unmarshal([]byte(s), &st); err != nil || st.Replica == "" {
		return "", catalog.HolderLost
	}
	if st.Replica == r.cfg.Replica {
		if st.Incarnation == r.incarnation {
			return "", catalog.HolderHere
		}
		// A predecessor of this name: this process never held its tasks.
		return "", catalog.HolderLost
	}
	if r.view.isHidden() {
		return "", catalog.HolderUnknown
	}
	rec, ok := r.view.Holder(r.cfg.Prefix + "/replicas/" + url.PathEscape(st.Replica))
	switch {
	case ok && rec.Incarnation == st.Incarnation:
		return rec.Endpoint, catalog.HolderLive
	case r.view.Revision() < st.Rev:
		return "", catalog.HolderUnknown
	}
	// The stamp is the fleet's own, but its endpoint passes the rules a
	// record's does all the same: a forward goes only where the fleet may.
	ep := st.Endpoint
	if checkPeerEndpoint(ep, r.trust.peerPath, r.trust.peers) != nil || r.trust.self != "" && normalEndpoint(ep) == r.trust.self {
		ep = ""
	}
	return ep, catalog.HolderLost
}
