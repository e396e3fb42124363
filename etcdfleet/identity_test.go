package etcdfleet_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/etcdfleet/embedded"
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

// A revocation signed by the fleet authority is honoured by every
// replica within promptly of its put, though the revoked key's records
// stay in etcd: they leave every View and Peer, Verify refuses the key,
// and the others go on serving and verifying each other.
func TestRevokedKeyRefused(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	c := joinAs(t, ep, "c", epC, nil)
	life := lifeFor(t)
	b.mustStart(t, life, "on_b")
	c.mustStart(t, life, "on_c")
	msg := []byte("a forwarded request")
	sigB, err := b.Sign(msg)
	require.NoError(t, err)
	sigC, err := c.Sign(msg)
	require.NoError(t, err)
	for _, r := range []replica{a, c} {
		waitView(t, r.View(), "b's route listed", func() bool { return heldBy(r.View(), toolKey("on_b"), "b") })
		require.NoError(t, r.Verify("b", msg, sigB))
	}
	waitView(t, a.View(), "c's route listed", func() bool { return heldBy(a.View(), toolKey("on_c"), "c") })

	key, val := etcdfleet.Revocation(fleetToken, prefix, "b", b.PublicKey())
	put(t, cli, key, val)
	for _, r := range []replica{a, c} {
		waitViewWithin(t, r.View(), promptly, "b's records dropped", func() bool {
			return !heldBy(r.View(), toolKey("on_b"), "b") && !heldBy(r.View(), prefix+"/replicas/b", "b")
		})
		_, ok := r.Peer(catalog.KindTool, "on_b")
		assert.False(t, ok, "%s locates a revoked replica's route", r.Name())
		assert.ErrorIs(t, r.Verify("b", msg, sigB), etcdfleet.ErrRevoked, r.Name())
	}
	assert.Equal(t, "b", holder(t, cli, toolKey("on_b")), "the revoked replica's claim is still in etcd")
	assert.NoError(t, a.Verify("c", msg, sigC))
	assert.True(t, heldBy(a.View(), toolKey("on_c"), "c"))
	// A claim b makes now is no better: its key is revoked.
	b.mustStart(t, life, "on_b_later")
	c.mustStart(t, life, "on_c_later")
	waitView(t, a.View(), "c's later route", func() bool { return heldBy(a.View(), toolKey("on_c_later"), "c") })
	assert.False(t, heldBy(a.View(), toolKey("on_b_later"), "b"))
	// Deleting the revocation revokes nothing back.
	_, err = cli.Delete(ctxFor(t), key)
	require.NoError(t, err)
	c.mustStart(t, life, "on_c_last")
	waitView(t, a.View(), "c's last route", func() bool { return heldBy(a.View(), toolKey("on_c_last"), "c") })
	assert.ErrorIs(t, a.Verify("b", msg, sigB), etcdfleet.ErrRevoked)
}

// Replica.Revoke revokes a replica's key and its lease: the names it held
// are free at once for the others to claim, the revoked process cannot
// join again with its key, and the others never restart.
func TestRevoke(t *testing.T) {
	ep := startEtcd(t)
	a := joinAs(t, ep, "a", epA, nil)
	kB := etcdfleet.KeyFor(fleetToken, "b")
	b := joinAs(t, ep, "b", epB, kB)
	life := lifeFor(t)
	k := b.mustStart(t, life, "taken")
	waitView(t, a.View(), "b's route listed", func() bool { return heldBy(a.View(), toolKey("taken"), "b") })
	assert.ErrorIs(t, a.Revoke(ctxFor(t), "nobody"), etcdfleet.ErrNotEnrolled)

	require.NoError(t, a.Revoke(ctxFor(t), "b"))
	waitViewWithin(t, a.View(), promptly, "b's route dropped", func() bool { return !heldBy(a.View(), toolKey("taken"), "b") })
	a.mustStart(t, life, "taken") // b's lease went with its key: the name is free
	waitDone(t, k)                // b's session ended with its lease
	_, err := etcdfleet.Join(ctxFor(t), etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken,
		TTL: time.Second, Replica: "b", Advertise: epB, Key: kB})
	assert.ErrorIs(t, err, etcdfleet.ErrRevoked)
	assert.Equal(t, 0, a.SessionsLost())
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

// A listing judges every record by the enrollments and revocations of its
// own revision, whatever order their keys sort in: a replica whose
// follower missed a revocation that was then compacted away lists the
// prefix again and drops the revoked replica's membership and prompt
// (keys that sort before the revocation's) as well as its tool, while it
// still lists the others' records, enrolled under keys that sort first.
func TestRelistAppliesRevocationsFirst(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	c := joinAs(t, ep, "c", epC, nil)
	life := lifeFor(t)
	b.mustStart(t, life, "on_b")
	k, err := b.cat.StartPrompt(life, catalog.Prompt{Name: "prompt_b"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
			return catalog.PromptResult{}, nil
		})
	require.NoError(t, err)
	b.keep(k)
	c.mustStart(t, life, "on_c")
	member := prefix + "/replicas/b"
	waitView(t, a.View(), "b's and c's records listed", func() bool {
		return heldBy(a.View(), toolKey("on_b"), "b") && heldBy(a.View(), promptKey("prompt_b"), "b") &&
			heldBy(a.View(), member, "b") && heldBy(a.View(), toolKey("on_c"), "c")
	})

	resume := a.PauseFollower()
	key, val := etcdfleet.Revocation(fleetToken, prefix, "b", b.PublicKey())
	put(t, cli, key, val)
	c.mustStart(t, life, "during") // the compaction must pass the revocation's revision
	compact(t, ctxFor(t), cli)
	c.mustStart(t, life, "after")
	relisted := make(chan struct{}, 1)
	a.SetBeforeList(func() {
		select {
		case relisted <- struct{}{}:
		default:
		}
	})
	resume()
	waitView(t, a.View(), "the listing after the compaction", func() bool { return heldBy(a.View(), toolKey("after"), "c") })
	select {
	case <-relisted:
	default:
		t.Fatal("a did not list the prefix again after the compaction: the test proves nothing")
	}
	for _, k := range []string{member, promptKey("prompt_b"), toolKey("on_b")} {
		assert.False(t, heldBy(a.View(), k, "b"), "%s of the revoked replica is listed", k)
	}
	assert.True(t, heldBy(a.View(), toolKey("on_c"), "c"))
	assert.True(t, heldBy(a.View(), prefix+"/replicas/c", "c"))
}

// A crashed replica whose lease an etcd writer keeps alive with keepalives
// is dropped once it has not renewed its membership for staleRenewals
// periods (4 TTLs): its records leave every other view and Peer, and
// Verify refuses it, though its keys stay in etcd; a replay of its genuine
// membership, renewal included, does not bring it back.
func TestStaleReplicaDropped(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	life := lifeFor(t)
	b.mustStart(t, life, "on_b")
	member := prefix + "/replicas/b"
	waitView(t, a.View(), "b's route listed", func() bool { return heldBy(a.View(), toolKey("on_b"), "b") })
	msg := []byte("m")
	sig, err := b.Sign(msg)
	require.NoError(t, err)
	require.NoError(t, a.Verify("b", msg, sig))
	lease := b.Lease()
	got, err := cli.Get(ctxFor(t), member)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	genuine := string(got.Kvs[0].Value)

	// b crashes; a writer keeps its lease alive.
	b.Crash()
	keep, err := cli.KeepAlive(life, lease)
	require.NoError(t, err)
	go func() {
		for range keep {
		}
	}()
	// Four TTLs, the sweep's half TTL, and a moment.
	waitViewWithin(t, a.View(), 5*time.Second+promptly, "b's records dropped", func() bool {
		return !heldBy(a.View(), toolKey("on_b"), "b") && !heldBy(a.View(), member, "b")
	})
	assert.ErrorIs(t, a.Verify("b", msg, sig), etcdfleet.ErrNotEnrolled)
	_, ok := a.Peer(catalog.KindTool, "on_b")
	assert.False(t, ok)
	assert.True(t, leaseGranted(t, cli, lease), "the writer's keepalives kept b's lease")
	assert.Equal(t, "b", holder(t, cli, toolKey("on_b")), "b's claim is still in etcd")

	// A replay of b's genuine membership, on its key and lease.
	put(t, cli, member, genuine, clientv3.WithLease(lease))
	a.mustStart(t, life, "control")
	waitView(t, a.View(), "the control", func() bool { return heldBy(a.View(), toolKey("control"), "a") })
	assert.False(t, heldBy(a.View(), member, "b"), "a replayed membership brought b back")
	assert.False(t, heldBy(a.View(), toolKey("on_b"), "b"))
}

// Membership renewals change nothing a reader of the view sees: over
// several renewal periods of a quiet fleet the view's version stays put,
// while its revision moves with the renewals.
func TestRenewalsAreQuiet(t *testing.T) {
	ep := startEtcd(t)
	a := joinAs(t, ep, "a", epA, nil)
	b := joinAs(t, ep, "b", epB, nil)
	b.mustStart(t, lifeFor(t), "on_b")
	waitView(t, a.View(), "b's route listed", func() bool { return heldBy(a.View(), toolKey("on_b"), "b") })
	before, rev := a.View().Version(), a.View().Revision()
	// Renewals every TTL/2 = 500 ms: wait until the view's revision has
	// moved past several of them, by either replica.
	deadline := time.After(patience)
	for a.View().Revision() < rev+4 {
		select {
		case <-deadline:
			t.Fatalf("no renewals seen: revision %d, from %d", a.View().Revision(), rev)
		case <-time.After(50 * time.Millisecond):
		}
	}
	assert.Equal(t, before, a.View().Version(), "renewals moved the view's version")
	assert.True(t, heldBy(a.View(), prefix+"/replicas/b", "b"))
}
