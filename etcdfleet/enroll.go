package etcdfleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// enrolled is what a follower knows of one replica's enrollment.
type enrolled struct {
	pub      ed25519.PublicKey
	endpoint string
	lease    int64 // the lease the enrollment is attached to
	revoked  bool  // in a published snapshot: the key is revoked
	stale    bool  // in a published snapshot: the replica stopped renewing
}

// registry is the follower's table of enrollments and revocations. byName
// and revoked belong to the follower (list, applyEvents), which alone
// changes them; every change is published as an immutable snapshot that
// Verify and Revoke read with one atomic load.
type registry struct {
	byName  map[string]enrolled // verified enrollments, by replica name
	revoked map[string]struct{} // revoked public keys; never shrinks
}

// lookup returns the enrollment records of replica must verify under; the
// follower's own. Errors wrap ErrNotEnrolled or ErrRevoked.
func (t *trust) lookup(replica string) (enrolled, error) {
	e, ok := t.reg.byName[replica]
	if !ok {
		return enrolled{}, fmt.Errorf("%w: replica %s", ErrNotEnrolled, quoted(replica))
	}
	if _, gone := t.reg.revoked[string(e.pub)]; gone {
		return enrolled{}, fmt.Errorf("%w: replica %s", ErrRevoked, quoted(replica))
	}
	return e, nil
}

// publish makes the follower's table what Verify and Revoke see.
func (t *trust) publish() {
	m := make(map[string]enrolled, len(t.reg.byName))
	for name, e := range t.reg.byName {
		_, e.revoked = t.reg.revoked[string(e.pub)]
		if l, ok := t.alive[name]; ok {
			e.stale = l.stale
		}
		m[name] = e
	}
	t.snap.Store(&m)
}

// identityDir returns the directory of key if it is an enrollment's or a
// revocation's, and "" otherwise.
func (r *Replica) identityDir(key string) string {
	rest, ok := strings.CutPrefix(key, r.cfg.Prefix+"/")
	if !ok {
		return ""
	}
	dir, _, _ := strings.Cut(rest, "/")
	if dir == enrollDir || dir == revokedDir {
		return dir
	}
	return ""
}

// noteIdentity applies kv, a put (or, with deleted, a delete) of an
// enrollment or revocation key, to the follower's table, and adds to
// dirty the replicas whose records must be checked again: those whose
// enrollment changed, went or was revoked. The caller publishes the table. An enrollment or revocation
// that does not verify is counted and logged as a dropped record; one
// put over an enrollment removes it.
func (r *Replica) noteIdentity(kv *mvccpb.KeyValue, deleted bool, dirty map[string]bool) {
	key := string(kv.Key)
	reg := &r.trust.reg
	if r.identityDir(key) == revokedDir {
		if deleted {
			return // a revocation is for good: deleting it revokes nothing back
		}
		v, err := r.trust.auth.openRevocation(key, kv.Value)
		if err == nil && revokedKey(r.cfg.Prefix, v.Key) != key {
			err = fmt.Errorf("%w: a revocation under another key's name", errBadEnrollment)
		}
		if err != nil {
			r.reject(key, err)
			return
		}
		reg.revoked[string(v.Key)] = struct{}{}
		for name, e := range reg.byName {
			if bytes.Equal(e.pub, v.Key) {
				dirty[name] = true
			}
		}
		return
	}
	esc := key[len(r.cfg.Prefix)+len("/"+enrollDir+"/"):]
	name, err := url.PathUnescape(esc)
	if err != nil || enrollKey(r.cfg.Prefix, name) != key {
		// Not the key of any replica's enrollment: it enrolls nobody,
		// and removes nobody's.
		if !deleted {
			r.reject(key, fmt.Errorf("%w: a key whose name is not canonically escaped", errBadEnrollment))
		}
		return
	}
	old, had := reg.byName[name]
	drop := func() {
		if had {
			delete(reg.byName, name)
			dirty[name] = true
		}
	}
	if deleted {
		drop()
		return
	}
	e, err := r.trust.auth.openEnrollment(key, kv.Value, r.trust.peerPath, r.trust.peers)
	if err == nil && enrollKey(r.cfg.Prefix, e.Replica) != key {
		err = fmt.Errorf("%w: an enrollment under another replica's name", errBadEnrollment)
	}
	if err != nil {
		r.reject(key, err)
		drop()
		return
	}
	reg.byName[name] = enrolled{pub: e.Key, endpoint: e.Endpoint, lease: kv.Lease}
	if !had || !bytes.Equal(old.pub, e.Key) || old.endpoint != e.Endpoint {
		// Records verified under the old key or endpoint are not this
		// enrollment's; a session's new put of the same enrollment
		// changes nothing.
		dirty[name] = true
	}
}

// reject counts and logs a dropped record.
func (r *Replica) reject(key string, err error) {
	r.trust.rejected.Add(1)
	r.trust.log.note(r.cfg.Logger, key, err)
}

// Self returns this replica's name in the fleet (Config.Replica): the name
// its records and its enrollment carry. It is package mcpserve's
// Identity.Self.
func (r *Replica) Self() string { return r.cfg.Replica }

// PublicKey returns this replica's Ed25519 public key, as its enrollment
// records it.
func (r *Replica) PublicKey() ed25519.PublicKey { return r.key.Public().(ed25519.PublicKey) }

// Sign returns this replica's Ed25519 signature over msg, in the hop's own
// domain (no record, enrollment or revocation is ever signed over the same
// bytes). It is package mcpserve's Identity.Sign: safe for concurrent use,
// one Ed25519 signature (tens of µs), never an error.
func (r *Replica) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(r.key, frame(hopDomain, msg)), nil
}

// Verify returns nil when sig is the Sign signature over msg of the
// replica named, by the key its enrollment holds now in this replica's
// view, not revoked. It is package mcpserve's Identity.Verify: safe for
// concurrent use, it never touches etcd and does not block (an atomic load,
// a map lookup, the view's lock for a moment and one Ed25519
// verification). Errors wrap ErrNotEnrolled (no enrollment in the view,
// or the view is hidden while this replica is between sessions),
// or the replica stopped renewing its membership; see liveness.go),
// ErrRevoked or ErrBadSignature, and quote the name cut to 64 bytes.
//
// A revocation takes effect here when the follower sees it: as soon as
// the watch delivers it, and for a replica cut off from etcd at most when
// it loses its session (the TTL), which hides the view.
func (r *Replica) Verify(replica string, msg, sig []byte) error {
	if r.view.isHidden() {
		return fmt.Errorf("etcdfleet: verify %s: %w: this replica is between sessions and its view is hidden", quoted(replica), ErrNotEnrolled)
	}
	e, ok := (*r.trust.snap.Load())[replica]
	switch {
	case !ok:
		return fmt.Errorf("etcdfleet: verify %s: %w", quoted(replica), ErrNotEnrolled)
	case e.revoked:
		return fmt.Errorf("etcdfleet: verify %s: %w", quoted(replica), ErrRevoked)
	case e.stale:
		return fmt.Errorf("etcdfleet: verify %s: %w: it stopped renewing its membership", quoted(replica), ErrNotEnrolled)
	case len(sig) != ed25519.SignatureSize || !ed25519.Verify(e.pub, frame(hopDomain, msg), sig):
		return fmt.Errorf("etcdfleet: verify %s: %w", quoted(replica), ErrBadSignature)
	}
	return nil
}

// Revoke revokes, for good, the key that replica's enrollment holds in
// this replica's view: it puts a revocation signed by the fleet authority,
// which every replica's follower honours as it sees it (the replica's
// records leave every View and Peer, and Verify refuses it; see Verify for
// the bound), and revokes the lease the enrollment hangs on, which frees
// its names at once. The replica's process cannot open a session with
// that key again (Join and every new session give ErrRevoked); the others
// go on serving, without a restart. A replica that holds the fleet token
// can still enroll a fresh key: to shut out such a holder, rotate the
// token (the package doc's "Rotation").
//
// Errors: ErrNotEnrolled (the view holds no enrollment of that name, as
// once a revoked replica's lease is gone), ErrUnavailable (no answer
// within ctx). Cost: two round trips.
func (r *Replica) Revoke(ctx context.Context, replica string) error {
	e, ok := (*r.trust.snap.Load())[replica]
	if !ok {
		return fmt.Errorf("etcdfleet: revoke %s: %w", quoted(replica), ErrNotEnrolled)
	}
	if e.revoked {
		return nil
	}
	key, val, err := r.trust.auth.revoke(r.cfg.Prefix, replica, e.pub)
	if err != nil {
		return fmt.Errorf("etcdfleet: revoke %s: %w", quoted(replica), err)
	}
	if _, err := r.cli.Put(ctx, key, val); err != nil {
		return fmt.Errorf("etcdfleet: revoke %s: %w", quoted(replica), unavailable(err))
	}
	if e.lease == 0 {
		return nil
	}
	if _, err := r.cli.Revoke(ctx, clientv3.LeaseID(e.lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdfleet: revoke %s: the key is revoked, but not its lease: %w", quoted(replica), unavailable(err))
	}
	return nil
}
