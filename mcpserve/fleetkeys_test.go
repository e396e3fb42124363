package mcpserve_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// fleetKeyCount is how many replicas the tests' fleet enrolls: every
// replica a test starts takes the next name, and believes them all.
const fleetKeyCount = 64

// fleetKeys are the tests' replicas' keys, by name, each from a seed of
// its own name: the same in every run.
var fleetKeys = sync.OnceValues(func() (map[string]ed25519.PrivateKey, map[string]ed25519.PublicKey) {
	priv, pub := map[string]ed25519.PrivateKey{}, map[string]ed25519.PublicKey{}
	for i := range fleetKeyCount {
		name := fmt.Sprintf("replica-%02d", i)
		seed := sha256.Sum256([]byte(name))
		priv[name] = ed25519.NewKeyFromSeed(seed[:])
		pub[name] = priv[name].Public().(ed25519.PublicKey)
	}
	return priv, pub
})

var nextFleetKey atomic.Int64

// fleetIdentity is the keyring of the next replica of the tests' fleet.
func fleetIdentity(t testing.TB) *mcpserve.Keyring {
	t.Helper()
	priv, pub := fleetKeys()
	name := fmt.Sprintf("replica-%02d", nextFleetKey.Add(1)%fleetKeyCount)
	k, err := mcpserve.NewKeyring(name, priv[name], pub)
	require.NoError(t, err)
	return k
}

// strangerIdentity is a keyring whose own key no replica of the tests'
// fleet believes, though it names itself as one of them.
func strangerIdentity(t testing.TB) *mcpserve.Keyring {
	t.Helper()
	_, pub := fleetKeys()
	seed := sha256.Sum256([]byte("a stranger"))
	others := map[string]ed25519.PublicKey{}
	for n, p := range pub {
		if n != "replica-00" {
			others[n] = p
		}
	}
	k, err := mcpserve.NewKeyring("replica-00", ed25519.NewKeyFromSeed(seed[:]), others)
	require.NoError(t, err)
	return k
}

// signed signs req, with a body in memory (from GetBody), as a replica of
// the tests' fleet (or id, if given) forwards it to the holder at
// endpoint now, for alice (goodToken) unless a says otherwise.
func signed(t testing.TB, req *http.Request, endpoint string, a *mcpserve.HopAssertion, id ...mcpserve.Identity) *http.Request {
	t.Helper()
	return signedAt(t, req, endpoint, a, time.Now(), id...)
}

// signedAt is signed at time at.
func signedAt(t testing.TB, req *http.Request, endpoint string, a *mcpserve.HopAssertion, at time.Time, id ...mcpserve.Identity) *http.Request {
	t.Helper()
	var body []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		require.NoError(t, err)
		body, err = io.ReadAll(rc)
		require.NoError(t, err)
	}
	if a == nil {
		a = &mcpserve.HopAssertion{Token: goodToken, Subject: "alice", Roles: []string{"reader"}}
	}
	if a.Expires.IsZero() {
		a.Expires = at.Add(time.Minute)
	}
	var signer mcpserve.Identity = fleetIdentity(t)
	if len(id) > 0 {
		signer = id[0]
	}
	require.NoError(t, mcpserve.SignHop(req, body, signer, fleetToken, endpoint, *a, at))
	return req
}
