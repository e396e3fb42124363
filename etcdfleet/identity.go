package etcdfleet

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// A replica's identity (the package doc's "Who a replica is"): its own
// Ed25519 key pair (Config.Key), enrolled in the fleet by the fleet
// authority, an Ed25519 key derived from the fleet token. The enrollment
// is a record, <prefix>/enroll/<name>, naming the replica, its public key
// and its advertised endpoint, signed by the authority. A revocation,
// <prefix>/revoked/<public key>, is a record signed by the authority that
// revokes one replica key for good.

// authorityLabel is the HKDF info that turns the fleet token into the
// authority's Ed25519 seed: a key of its own, so that nothing the
// authority signs reveals the token or any other key derived from it.
const authorityLabel = "livereg etcdfleet authority v1"

// Each signature's message begins with its own domain, so that no
// signature of one kind (a record, an enrollment, a revocation, a hop
// request) is ever a valid signature of another.
const (
	recordDomain     = "livereg etcdfleet record v1"
	enrollmentDomain = "livereg etcdfleet enrollment v1"
	revocationDomain = "livereg etcdfleet revocation v1"
	hopDomain        = "livereg etcdfleet hop v1"
)

// The directories of enrollments and revocations under the prefix.
const (
	enrollDir  = "enroll"
	revokedDir = "revoked"
)

// authority signs enrollments and revocations with the key derived from
// Config.Token, and verifies them under it and under the keys derived
// from Config.PreviousTokens. Immutable once built.
type authority struct {
	key    ed25519.PrivateKey
	accept []ed25519.PublicKey // key's own first
}

// authorityKey derives the authority's key from a fleet token.
func authorityKey(token string) (ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, []byte(token), nil, authorityLabel, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func newAuthority(token string, previous []string) (authority, error) {
	var a authority
	for i, t := range append([]string{token}, previous...) {
		k, err := authorityKey(t)
		if err != nil {
			return authority{}, err
		}
		if i == 0 {
			a.key = k
		}
		a.accept = append(a.accept, k.Public().(ed25519.PublicKey))
	}
	return a, nil
}

// verify reports whether sig is an accepted authority's signature of msg.
func (a authority) verify(msg, sig []byte) bool {
	for _, pub := range a.accept {
		if ed25519.Verify(pub, msg, sig) {
			return true
		}
	}
	return false
}

// frame is the message a signature covers: domain, then each part
// prefixed with its length, so that no two lists of parts share one.
func frame(domain string, parts ...[]byte) []byte {
	n := len(domain) + 1
	for _, p := range parts {
		n += 8 + len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, domain...)
	b = append(b, 0)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// enrollment is the value of <prefix>/enroll/<name>.
type enrollment struct {
	Replica  string `json:"replica"`
	Key      []byte `json:"key"` // the replica's Ed25519 public key
	Endpoint string `json:"endpoint,omitempty"`
	Sig      []byte `json:"sig"` // the authority's, over the key it is stored under and the rest
}

func (e enrollment) message(key string) []byte {
	return frame(enrollmentDomain, []byte(key), []byte(e.Replica), e.Key, []byte(e.Endpoint))
}

// revocation is the value of <prefix>/revoked/<base64url public key>.
type revocation struct {
	Replica string `json:"replica"` // whom the key was enrolled for, for people reading etcd
	Key     []byte `json:"key"`
	Sig     []byte `json:"sig"`
}

func (v revocation) message(key string) []byte {
	return frame(revocationDomain, []byte(key), []byte(v.Replica), v.Key)
}

func enrollKey(prefix, replica string) string {
	return prefix + "/" + enrollDir + "/" + url.PathEscape(replica)
}

func revokedKey(prefix string, pub ed25519.PublicKey) string {
	return prefix + "/" + revokedDir + "/" + base64.RawURLEncoding.EncodeToString(pub)
}

// enroll returns the key and value of the enrollment of replica, with
// public key pub and endpoint, signed by a.
func (a authority) enroll(prefix, replica string, pub ed25519.PublicKey, endpoint string) (string, string, error) {
	key := enrollKey(prefix, replica)
	e := enrollment{Replica: replica, Key: pub, Endpoint: endpoint}
	e.Sig = ed25519.Sign(a.key, e.message(key))
	b, err := json.Marshal(e)
	return key, string(b), err
}

// revoke returns the key and value of the revocation of pub, enrolled
// for replica, signed by a.
func (a authority) revoke(prefix, replica string, pub ed25519.PublicKey) (string, string, error) {
	key := revokedKey(prefix, pub)
	v := revocation{Replica: replica, Key: pub}
	v.Sig = ed25519.Sign(a.key, v.message(key))
	b, err := json.Marshal(v)
	return key, string(b), err
}

// errBadEnrollment: an enrollment or revocation that is malformed, stored
// under a key not its own, or not signed by an accepted authority.
var errBadEnrollment = errors.New("invalid enrollment")

// openEnrollment checks the enrollment stored under key: one for the
// name key names, with a public key of the right size, an endpoint that
// checkPeerEndpoint accepts, signed by an accepted authority. Its errors
// wrap errBadEnrollment and quote nothing beyond truncation.
func (a authority) openEnrollment(key string, val []byte, peerPath string, p peers) (enrollment, error) {
	var e enrollment
	if err := json.Unmarshal(val, &e); err != nil {
		return enrollment{}, fmt.Errorf("%w: not a JSON enrollment", errBadEnrollment)
	}
	switch {
	case e.Replica == "" || len(e.Replica) > maxReplicaBytes || !printable(e.Replica):
		return enrollment{}, fmt.Errorf("%w: a replica name that is not printable UTF-8 of at most %d bytes", errBadEnrollment, maxReplicaBytes)
	case len(e.Key) != ed25519.PublicKeySize:
		return enrollment{}, fmt.Errorf("%w: a public key of %d bytes; an Ed25519 key has %d", errBadEnrollment, len(e.Key), ed25519.PublicKeySize)
	case len(e.Sig) != ed25519.SignatureSize:
		return enrollment{}, fmt.Errorf("%w: a signature of %d bytes", errBadEnrollment, len(e.Sig))
	}
	if err := checkPeerEndpoint(e.Endpoint, peerPath, p); err != nil {
		return enrollment{}, fmt.Errorf("%w: %w", errBadEnrollment, err)
	}
	// The key is part of what is signed, and must be the name's own: an
	// enrollment copied under another name does not verify.
	if !a.verify(e.message(key), e.Sig) {
		return enrollment{}, fmt.Errorf("%w: not signed by the fleet authority for this key", errBadEnrollment)
	}
	return e, nil
}

// openRevocation checks the revocation stored under key: signed by an
// accepted authority, for the public key key names.
func (a authority) openRevocation(key string, val []byte) (revocation, error) {
	var v revocation
	if err := json.Unmarshal(val, &v); err != nil {
		return revocation{}, fmt.Errorf("%w: not a JSON revocation", errBadEnrollment)
	}
	if len(v.Key) != ed25519.PublicKeySize || len(v.Sig) != ed25519.SignatureSize || !a.verify(v.message(key), v.Sig) {
		return revocation{}, fmt.Errorf("%w: a revocation not signed by the fleet authority for this key", errBadEnrollment)
	}
	return v, nil
}

// checkKey checks Config.Key: nil, or a whole Ed25519 private key whose
// public half is its seed's. Its errors never quote the key.
func checkKey(k ed25519.PrivateKey) error {
	switch {
	case k == nil:
		return nil
	case len(k) != ed25519.PrivateKeySize:
		return fmt.Errorf("%w: Key has %d bytes; an Ed25519 private key has %d", ErrInvalidConfig, len(k), ed25519.PrivateKeySize)
	case !ed25519.NewKeyFromSeed(k.Seed()).Equal(k):
		return fmt.Errorf("%w: Key's public half is not its seed's", ErrInvalidConfig)
	}
	return nil
}
