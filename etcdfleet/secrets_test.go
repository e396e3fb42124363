package etcdfleet_test

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/etcdfleet/embedded"
)

// secretForms returns the spellings of secret that a value could hold:
// the bytes, hex and every base64 alphabet, padded or not.
func secretForms(secret []byte) []string {
	return []string{string(secret), hex.EncodeToString(secret),
		base64.StdEncoding.EncodeToString(secret), base64.RawStdEncoding.EncodeToString(secret),
		base64.URLEncoding.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)}
}

// hmacOf is HMAC-SHA256(key, label): how keys were derived from the
// fleet token before, and how package mcpserve derives some still.
func hmacOf(key, label string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Nothing a fleet stores in etcd lets anyone recover the fleet token or a
// key derived from it, nor a replica's private key: after two replicas
// joined, claimed, and one revoked the other, no key or value holds the
// token, the authority's seed or private key, the keys derived from the
// token by HMAC or HKDF (records' MAC key, package mcpserve's
// requestState and task ID keys, the etcd root password once derived
// from it), nor either replica's seed, in any common encoding.
func TestNothingSecretInEtcd(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	kA, kB := etcdfleet.KeyFor(fleetToken, "a"), etcdfleet.KeyFor(fleetToken, "b")
	a := joinAs(t, ep, "a", epA, kA)
	b := joinAs(t, ep, "b", epB, kB)
	life := lifeFor(t)
	a.mustStart(t, life, "on_a")
	b.mustStart(t, life, "on_b")
	waitView(t, a.View(), "b's route listed", func() bool { return heldBy(a.View(), toolKey("on_b"), "b") })
	revKey, revVal := etcdfleet.Revocation(fleetToken, prefix, "c", etcdfleet.KeyFor(fleetToken, "c").Public().(ed25519.PublicKey))
	put(t, cli, revKey, revVal)

	macKey, err := hkdf.Key(sha256.New, []byte(fleetToken), nil, "livereg etcdfleet record MAC v1", sha256.Size)
	require.NoError(t, err)
	seed := etcdfleet.AuthoritySeed(fleetToken)
	secrets := map[string][]byte{
		"the fleet token":              []byte(fleetToken),
		"the authority's seed":         seed,
		"the authority's private key":  ed25519.NewKeyFromSeed(seed),
		"the record MAC key":           macKey,
		"the requestState key":         hmacOf(fleetToken, "livereg requestState key v1"),
		"the task ID key":              hmacOf(fleetToken, "livereg fleet task ID key v1"),
		"the derived etcd root secret": hmacOf(fleetToken, "livereg etcd root v1"),
		"a's seed":                     kA.Seed(),
		"b's seed":                     kB.Seed(),
	}
	resp, err := cli.Get(ctxFor(t), "", clientv3.WithFromKey())
	require.NoError(t, err)
	require.NotEmpty(t, resp.Kvs)
	var enrollments int
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Key), prefix+"/enroll/") {
			enrollments++
		}
		for what, secret := range secrets {
			for _, form := range secretForms(secret) {
				assert.NotContains(t, string(kv.Key), form, "a key holds %s", what)
				assert.NotContains(t, string(kv.Value), form, "%s holds %s", kv.Key, what)
			}
		}
	}
	assert.Equal(t, 2, enrollments, "the scan saw both enrollments")
}

// Replicas that log in as a user who may read and write the prefix alone
// (package embedded's GrantPrefix) join, claim, list each other, revoke
// one another and claim the names a revocation freed: the fleet needs no
// more of etcd than its prefix.
func TestFleetOfPrefixUsers(t *testing.T) {
	e := startEtcdWith(t, embedded.Config{BcryptCost: 4})
	ctx := ctxFor(t)
	rootPW, _, err := e.RootPassword()
	require.NoError(t, err)
	require.NoError(t, e.EnableAuth(ctx, rootPW))
	const user, userPW = "livereg-fleet", "fleet-user-password-0123456789"
	require.NoError(t, e.GrantPrefix(ctx, rootPW, user, userPW, prefix))
	as := func(name, endpoint string) replica {
		return newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{e.Endpoint()}, Prefix: prefix, Token: fleetToken,
			TTL: time.Second, Replica: name, Advertise: endpoint, Username: user, Password: userPW}))
	}
	a, b := as("a", epA), as("b", epB)
	life := lifeFor(t)
	k := b.mustStart(t, life, "on_b")
	waitView(t, a.View(), "b's route listed", func() bool { return heldBy(a.View(), toolKey("on_b"), "b") })
	require.NoError(t, a.Revoke(ctx, "b"))
	waitDone(t, k)
	a.mustStart(t, life, "on_b")
	waitView(t, a.View(), "a's claim on b's old name", func() bool { return heldBy(a.View(), toolKey("on_b"), "a") })
}
