package etcdfleet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

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
