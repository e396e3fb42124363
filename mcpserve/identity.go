package mcpserve

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"

	"github.com/livereg/livereg/internal/quote"
)

// Identity proves this replica to the others on the fleet hop and checks their proofs.
type Identity interface {
	// Self is this replica's name in the fleet.
	Self() string
	// Sign returns this replica's signature over msg.
	Sign(msg []byte) ([]byte, error)
	// Verify returns nil when sig is the signature over msg of the replica named,
	// enrolled and not revoked now, and an error otherwise. It is called on every
	// forwarded request, concurrently, and must not block.
	Verify(replica string, msg, sig []byte) error
}

var (
	// ErrUnknownReplica: a hop request names a replica the Identity does
	// not know (not enrolled, or revoked).
	ErrUnknownReplica = errors.New("mcpserve: unknown fleet replica")
	// ErrBadSignature: a hop request's signature is not its replica's
	// over what it carries.
	ErrBadSignature = errors.New("mcpserve: bad fleet signature")
)

// Keyring is a static Identity: this replica's Ed25519 key and the public
// keys of every replica of the fleet, fixed when it is made. It suits a
// fleet without etcd (whose replicas are configured by hand) and tests;
// package etcdfleet's Replica is the Identity whose enrollments and
// revocations change while it runs. Safe for concurrent use; Verify costs
// a map lookup and one Ed25519 verification (some 50 µs), and allocates
// nothing.
type Keyring struct {
	self  string
	key   ed25519.PrivateKey
	peers map[string]ed25519.PublicKey
}

// NewKeyring returns the Keyring of replica self, which signs with key,
// and believes the replicas of peers, by name. self is added to peers with
// key's public half if it is not there. It refuses an empty name, a key
// of the wrong size, and a peer whose key is of the wrong size or, for
// self, another than key's.
func NewKeyring(self string, key ed25519.PrivateKey, peers map[string]ed25519.PublicKey) (*Keyring, error) {
	switch {
	case self == "":
		return nil, fmt.Errorf("%w: a keyring without a replica name", ErrInvalidOptions)
	case len(key) != ed25519.PrivateKeySize:
		return nil, fmt.Errorf("%w: replica %s: a private key of %d bytes; an Ed25519 key has %d", ErrInvalidOptions, quote.Name(self), len(key), ed25519.PrivateKeySize)
	}
	pub := key.Public().(ed25519.PublicKey)
	k := &Keyring{self: self, key: key, peers: maps.Clone(peers)}
	if k.peers == nil {
		k.peers = map[string]ed25519.PublicKey{}
	}
	for name, p := range k.peers {
		switch {
		case len(p) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("%w: replica %s: a public key of %d bytes; an Ed25519 key has %d", ErrInvalidOptions, quote.Name(name), len(p), ed25519.PublicKeySize)
		case name == self && !p.Equal(pub):
			return nil, fmt.Errorf("%w: replica %s: its public key in peers is not its private key's", ErrInvalidOptions, quote.Name(self))
		}
	}
	k.peers[self] = pub
	return k, nil
}

// Self returns the replica's name.
func (k *Keyring) Self() string { return k.self }

// Sign signs msg with the replica's key.
func (k *Keyring) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.key, msg), nil }

// Verify checks that sig is replica's signature over msg: ErrUnknownReplica
// for a replica not in the keyring, ErrBadSignature for another signature.
func (k *Keyring) Verify(replica string, msg, sig []byte) error {
	pub, ok := k.peers[replica]
	switch {
	case !ok:
		return fmt.Errorf("%w %s", ErrUnknownReplica, quote.Name(replica))
	case !ed25519.Verify(pub, msg, sig):
		return fmt.Errorf("%w from replica %s", ErrBadSignature, quote.Name(replica))
	}
	return nil
}
