package etcdfleet

import (
	"crypto/ed25519"
	"crypto/sha256"
)

// OrphanSession stops the current session's keepalives without revoking its
// lease, as a partition or a stalled process would: the replica must treat
// it as a lost session.
func (r *Replica) OrphanSession() {
	r.mu.Lock()
	s := r.sess
	r.mu.Unlock()
	if s != nil {
		s.Orphan()
	}
}

// Crash stops the replica as a crashed process stops: no keepalive, no
// release, no revoke, no kill. Its keys stay until its lease expires.
func (r *Replica) Crash() {
	r.mu.Lock()
	r.closed = true
	r.sess, r.claims, r.pending = nil, nil, nil
	r.mu.Unlock()
	r.cancel()
	<-r.done
	<-r.followDone
	_ = r.cli.Close()
}

// PauseFollower cancels the follower's watch and holds it, as a
// disconnection would, until resume is called; then it watches again from
// the last revision it saw.
func (r *Replica) PauseFollower() (resume func()) {
	r.pause <- struct{}{}
	return func() { r.pause <- struct{}{} }
}

// KeyFor returns the Ed25519 key that Seal and Enrollment use for replica
// in a fleet whose token is token.
func KeyFor(token, replica string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(token + "\x00" + replica))
	return ed25519.NewKeyFromSeed(seed[:])
}

// Seal returns the value that rec.Replica, with KeyFor(token,
// rec.Replica) as its key, writes for rec on key, attached to lease: a
// genuine record, for tests to alter. It verifies once Enrollment's value
// for that replica and rec.Endpoint is in etcd.
func Seal(token, key string, lease int64, rec Record) string {
	val, err := seal(KeyFor(token, rec.Replica), key, lease, rec)
	if err != nil {
		panic(err)
	}
	return val
}

// SealWith returns the value that a replica whose key is priv writes for
// rec on key, attached to lease, whatever replica rec names.
func SealWith(priv ed25519.PrivateKey, key string, lease int64, rec Record) string {
	val, err := seal(priv, key, lease, rec)
	if err != nil {
		panic(err)
	}
	return val
}

// Revocation returns the key and value of the revocation of pub, enrolled
// for replica under prefix, signed by the authority of token.
func Revocation(token, prefix, replica string, pub ed25519.PublicKey) (key, val string) {
	a, err := newAuthority(token, nil)
	if err != nil {
		panic(err)
	}
	key, val, err = a.revoke(prefix, replica, pub)
	if err != nil {
		panic(err)
	}
	return key, val
}

// Enrollment returns the key and value of replica's enrollment under
// prefix, of KeyFor(token, replica) at endpoint, signed by the authority
// of token.
func Enrollment(token, prefix, replica, endpoint string) (key, val string) {
	a, err := newAuthority(token, nil)
	if err != nil {
		panic(err)
	}
	key, val, err = a.enroll(prefix, replica, KeyFor(token, replica).Public().(ed25519.PublicKey), endpoint)
	if err != nil {
		panic(err)
	}
	return key, val
}

// AuthoritySeed returns the seed of the authority key derived from token.
func AuthoritySeed(token string) []byte {
	k, err := authorityKey(token)
	if err != nil {
		panic(err)
	}
	return k.Seed()
}

// SetClaimPut makes every Claim call f with its key after its put
// succeeded and before it checks that its session is still current; f may
// block to park the claim there. Set it before the replica's first claim.
func (r *Replica) SetClaimPut(f func(key string)) { r.claimPut = f }

// Claims returns how many claims the replica holds under its current
// session: the ones a session loss would kill.
func (r *Replica) Claims() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.claims)
}

// SetBeforeList makes the follower call f after its watch opens and before
// it lists again (after a compaction or a new session), on its own
// goroutine.
func (r *Replica) SetBeforeList(f func()) { r.beforeList = f }

// SetBeforeApply makes the follower call f, on its own goroutine, before it
// applies each watch response, with the keys the response's events touch;
// f may block to hold the view at the revision before them. Set it before
// the events of interest are written.
func (r *Replica) SetBeforeApply(f func(keys []string)) { r.beforeApply.Store(&f) }
