package mcpserve_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// A fleet without etcd: each replica holds its own Ed25519 key and the
// public keys of the others, and signs its requests to them with it.
func ExampleNewKeyring() {
	// Each replica makes its key once and keeps it; the operator gives
	// every replica the others' public keys.
	pubA, keyA, _ := ed25519.GenerateKey(nil)
	pubB, _, _ := ed25519.GenerateKey(nil)
	ringA, err := mcpserve.NewKeyring("replica-a", keyA, map[string]ed25519.PublicKey{"replica-a": pubA, "replica-b": pubB})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = mcpserve.Fleet{Identity: ringA /* Peers, Token, Advertise... */}

	msg := []byte("a request")
	sig, _ := ringA.Sign(msg)
	fmt.Println(ringA.Verify("replica-a", msg, sig))
	fmt.Println(errors.Is(ringA.Verify("replica-b", msg, sig), mcpserve.ErrBadSignature))
	fmt.Println(errors.Is(ringA.Verify("replica-c", msg, sig), mcpserve.ErrUnknownReplica))
	// Output:
	// <nil>
	// true
	// true
}

// NewKeyring refuses keys of the wrong size, an empty name, and a peer
// entry for itself with another key; its errors quote no key.
func TestNewKeyringBadInput(t *testing.T) {
	seed := sha256.Sum256([]byte("k"))
	key := ed25519.NewKeyFromSeed(seed[:])
	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	for name, tc := range map[string]struct {
		self  string
		key   ed25519.PrivateKey
		peers map[string]ed25519.PublicKey
	}{
		"no name":             {"", key, nil},
		"a seed for a key":    {"r", ed25519.PrivateKey(seed[:]), nil},
		"a short peer key":    {"r", key, map[string]ed25519.PublicKey{"p": other[:16]}},
		"itself, another key": {"r", key, map[string]ed25519.PublicKey{"r": other}},
	} {
		_, err := mcpserve.NewKeyring(tc.self, tc.key, tc.peers)
		require.ErrorIs(t, err, mcpserve.ErrInvalidOptions, name)
		assert.NotContains(t, err.Error(), fmt.Sprintf("%x", seed[:4]), name)
	}
}
