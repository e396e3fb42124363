package etcdfleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

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
