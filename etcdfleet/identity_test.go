package etcdfleet_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

// Endpoints that replicas advertise in these tests; nothing listens there.
const (
	epA = "http://127.0.0.1:1/fleet"
	epB = "http://127.0.0.1:2/fleet"
	epC = "http://127.0.0.1:3/fleet"
)

// joinAs joins as name, advertising endpoint, with key (nil: a fresh one),
// as the claimer of a new catalog.
func joinAs(t *testing.T, ep, name, endpoint string, key ed25519.PrivateKey) replica {
	t.Helper()
	return newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken,
		TTL: time.Second, Replica: name, Advertise: endpoint, Key: key}))
}

// waitViewWithin waits, within d, until cond holds for v, waking on its
// changes.
func waitViewWithin(t *testing.T, v *etcdfleet.View, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		ch := v.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("view: %s: not after %v; tools %v", what, d, v.Tools())
		}
	}
}

// heldBy reports whether v holds key's record, naming replica.
func heldBy(v *etcdfleet.View, key, replica string) bool {
	rec, ok := v.Holder(key)
	return ok && rec.Replica == replica
}

// A replica signs only its own records: a record that names b, written by
// a with a's own key (with b's endpoint or a's), is neither listed nor
// located anywhere, nor is a membership for b; a's records under its own
// name are.
func TestRecordForAnotherReplicaRefused(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	kA := etcdfleet.KeyFor(fleetToken, "a")
	a := joinAs(t, ep, "a", epA, kA)
	b := joinAs(t, ep, "b", epB, nil)
	c := joinAs(t, ep, "c", epC, nil)
	lease := a.Lease()
	l := int64(lease)
	forged := map[string]etcdfleet.Record{
		toolKey("as_b_at_b"):   toolRecord("b", epB, "as_b_at_b"),
		toolKey("as_b_at_a"):   toolRecord("b", epA, "as_b_at_a"),
		prefix + "/replicas/b": {Replica: "b", Endpoint: epB, Kind: etcdfleet.KindReplica, Incarnation: "forged"},
	}
	before := c.Rejected()
	for key, rec := range forged {
		put(t, cli, key, etcdfleet.SealWith(kA, key, l, rec), clientv3.WithLease(lease))
	}
	// The control, a's own record signed by a's own key, comes last.
	put(t, cli, toolKey("control"), etcdfleet.SealWith(kA, toolKey("control"), l, toolRecord("a", epA, "control")), clientv3.WithLease(lease))
	for _, r := range []replica{b, c} {
		waitView(t, r.View(), "the control listed", func() bool { return heldBy(r.View(), toolKey("control"), "a") })
		for key := range forged {
			assert.False(t, heldBy(r.View(), key, "b"), "%s: %s, signed by a, is in the view", r.Name(), key)
		}
		for _, name := range []string{"as_b_at_b", "as_b_at_a"} {
			_, ok := r.Peer(catalog.KindTool, name)
			assert.False(t, ok, "%s: %s located", r.Name(), name)
		}
		got, ok := r.Peer(catalog.KindTool, "control")
		assert.True(t, ok)
		assert.Equal(t, epA, got)
	}
	assert.GreaterOrEqual(t, c.Rejected()-before, uint64(len(forged)))
}

// An impostor with valid etcd access and no enrollment by the fleet's
// authority (records of its own, an enrollment signed by another
// authority, or a whole replica joined with another token) is never
// listed, located or verified, and the fleet goes on serving.
func TestImpostorNeverListed(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	const otherToken = "an-impostor-token-0123456789"
	life := lifeFor(t)

	// A bare record, its replica never enrolled.
	put(t, cli, toolKey("bare"), etcdfleet.Seal(fleetToken, toolKey("bare"), 0, toolRecord("imp1", epC, "bare")))
	// An enrollment signed by another authority, and records by its key.
	ek, ev := etcdfleet.Enrollment(otherToken, prefix, "imp2", epC)
	put(t, cli, ek, ev)
	put(t, cli, toolKey("self_enrolled"), etcdfleet.Seal(otherToken, toolKey("self_enrolled"), 0, toolRecord("imp2", epC, "self_enrolled")))
	// A whole replica on another token: it joins etcd and claims.
	imp := newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: otherToken,
		TTL: time.Second, Replica: "imp3", Advertise: epC}))
	imp.mustStart(t, life, "joined_impostor")
	// The control: b's genuine claim, after every forgery.
	b.mustStart(t, life, "control")

	waitView(t, a.View(), "the control listed", func() bool { return heldBy(a.View(), toolKey("control"), "b") })
	msg := []byte("a forwarded request")
	sig, err := imp.Sign(msg)
	require.NoError(t, err)
	for _, name := range []string{"bare", "self_enrolled", "joined_impostor"} {
		assert.NotContains(t, remoteTools(a.Replica), name)
		_, ok := a.Peer(catalog.KindTool, name)
		assert.False(t, ok, "%s located", name)
	}
	assert.False(t, heldBy(a.View(), prefix+"/replicas/imp3", "imp3"), "the impostor's membership is in the view")
	for _, name := range []string{"imp1", "imp2", "imp3"} {
		assert.ErrorIs(t, a.Verify(name, msg, sig), etcdfleet.ErrNotEnrolled, name)
	}
	// The fleet goes on: a claims, b lists it and verifies a.
	a.mustStart(t, life, "after")
	waitView(t, b.View(), "a's claim after the impostor's", func() bool { return heldBy(b.View(), toolKey("after"), "a") })
	sigA, err := a.Sign(msg)
	require.NoError(t, err)
	assert.NoError(t, b.Verify("a", msg, sigA))
}

// Every replica verifies every other's Sign, over that message alone,
// under that name alone; a signature of another size, one of a record
// and one of another replica are refused with ErrBadSignature.
func TestSignVerify(t *testing.T) {
	ep := startEtcd(t)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	msg := []byte("POST /fleet 1765152000 nonce body-hash")
	sigA, err := a.Sign(msg)
	require.NoError(t, err)
	sigB, err := b.Sign(msg)
	require.NoError(t, err)
	assert.Equal(t, "a", a.Self())
	waitView(t, b.View(), "a enrolled", func() bool { return b.Verify("a", msg, sigA) == nil })
	waitView(t, a.View(), "b enrolled", func() bool { return a.Verify("b", msg, sigB) == nil })
	assert.NoError(t, a.Verify("a", msg, sigA), "a verifies itself")
	// A record's signature over the same bytes is not a hop signature.
	raw := ed25519.Sign(etcdfleet.KeyFor(fleetToken, "x"), msg)
	for what, tc := range map[string]struct {
		replica  string
		msg, sig []byte
		want     error
	}{
		"another message":         {"a", []byte("POST /fleet 1765152001 nonce body-hash"), sigA, etcdfleet.ErrBadSignature},
		"another replica's sig":   {"a", msg, sigB, etcdfleet.ErrBadSignature},
		"a short signature":       {"a", msg, sigA[:32], etcdfleet.ErrBadSignature},
		"no signature":            {"a", msg, nil, etcdfleet.ErrBadSignature},
		"a signature outside hop": {"a", msg, raw, etcdfleet.ErrBadSignature},
		"an unknown replica":      {"z", msg, sigA, etcdfleet.ErrNotEnrolled},
	} {
		assert.ErrorIs(t, b.Verify(tc.replica, tc.msg, tc.sig), tc.want, what)
	}
}

// Enrollments that are not the fleet authority's own for their key (a
// public key of the wrong size, one copied under another replica's name,
// one for a name that nobody enrolled signed by another authority) are
// dropped and counted, and enroll nobody; the fleet goes on serving.
func TestBadEnrollmentsDropped(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	life := lifeFor(t)
	_, good := etcdfleet.Enrollment(fleetToken, prefix, "x", epC)
	var short map[string]any
	require.NoError(t, json.Unmarshal([]byte(good), &short))
	short["key"] = "AAAAAAAAAAAAAAAAAAAAAA==" // 16 bytes
	shortVal, err := json.Marshal(short)
	require.NoError(t, err)
	_, stranger := etcdfleet.Enrollment("another-fleet-token-0123", prefix, "unknown", epC)
	bad := map[string]string{
		prefix + "/enroll/x":       string(shortVal),
		prefix + "/enroll/y":       good, // x's, copied
		prefix + "/enroll/unknown": stranger,
		prefix + "/enroll/z":       "not json",
		prefix + "/revoked/AAAA":   good,
		prefix + "/enroll/%62":     good, // not b's key: "b" escapes to "b"
	}
	before := a.Rejected()
	for key, val := range bad {
		put(t, cli, key, val)
	}
	for _, name := range []string{"x", "y"} {
		key := toolKey("by_" + name)
		put(t, cli, key, etcdfleet.Seal(fleetToken, key, 0, toolRecord(name, epC, "by_"+name)))
	}
	b.mustStart(t, life, "control")
	waitView(t, a.View(), "the control listed", func() bool { return heldBy(a.View(), toolKey("control"), "b") })
	assert.Equal(t, uint64(len(bad)+2), a.Rejected()-before)
	assert.True(t, heldBy(a.View(), toolKey("control"), "b"), "a put under a key that is not b's enrollment's dropped b")
	assert.NotContains(t, remoteTools(a.Replica), "by_x")
	assert.NotContains(t, remoteTools(a.Replica), "by_y")
	msg := []byte("m")
	sig := ed25519.Sign(etcdfleet.KeyFor(fleetToken, "x"), msg)
	for _, name := range []string{"x", "y", "unknown", "z"} {
		assert.ErrorIs(t, a.Verify(name, msg, sig), etcdfleet.ErrNotEnrolled, name)
	}
	// A put of a bad enrollment over b's own removes b's enrollment from
	// every view, and with it b's records: what the key held is gone.
	put(t, cli, prefix+"/enroll/b", string(shortVal))
	waitViewWithin(t, a.View(), promptly, "b's route dropped", func() bool { return !heldBy(a.View(), toolKey("control"), "b") })
}

// Join refuses a Key that is no Ed25519 private key, quoting no byte of
// it.
func TestJoinRefusesBadKey(t *testing.T) {
	_, good, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	mismatched := append(ed25519.PrivateKey{}, good...)
	mismatched[40] ^= 1
	for what, key := range map[string]ed25519.PrivateKey{
		"a seed alone":              good.Seed(),
		"a public key":              ed25519.PrivateKey(good.Public().(ed25519.PublicKey)),
		"65 bytes":                  append(append(ed25519.PrivateKey{}, good...), 0),
		"a public half not its own": mismatched,
	} {
		cfg := etcdfleet.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/p", Token: fleetToken, Key: key}
		err := cfg.Validate()
		require.ErrorIs(t, err, etcdfleet.ErrInvalidConfig, what)
		assert.Contains(t, err.Error(), "Key", what)
	}
	cfg := etcdfleet.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/p", Token: fleetToken, Key: good}
	assert.NoError(t, cfg.Validate())
}
