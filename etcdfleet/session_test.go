package etcdfleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A replica whose keepalives stop has lost its session: every local
// consumer that held a claim dies, its names are freed, and the replica
// opens a new session on which the consumers can start again.
func TestSessionLossKillsConsumers(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	life := lifeFor(t)
	k1 := a.mustStart(t, life, "one")
	k2 := a.mustStart(t, life, "two")
	read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil }
	k3, err := a.cat.StartResource(life, catalog.Resource{URI: "file:///r/s"}, bindsec.Plan{Public: true}, read)
	if err != nil {
		t.Fatal(err)
	}
	kb := b.mustStart(t, life, "three")
	old := a.Lease()

	a.OrphanSession()
	for _, k := range []*catalog.Consumer{k1, k2, k3} {
		waitDone(t, k)
	}
	for _, key := range []string{toolKey("one"), toolKey("two"), prefix + "/resources/file:%2F%2F%2Fr%2Fs"} {
		waitGone(t, cli, key)
	}
	select {
	case <-kb.Done():
		t.Fatal("another replica's consumer died")
	default:
	}
	if a.SessionsLost() != 1 {
		t.Fatalf("sessions lost %d, want 1", a.SessionsLost())
	}
	// The consumers restart through their own supervision, on the new
	// session (Claim waits for it).
	a.mustStart(t, life, "one")
	if l := a.Lease(); l == clientv3.NoLease || l == old {
		t.Fatalf("lease %x after the loss, old %x", l, old)
	}
	if got := holder(t, cli, toolKey("one")); got != "a" {
		t.Fatalf("one held by %q", got)
	}
	if _, err := b.start(life, "one"); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("b took a's restarted name: %v", err)
	}
}

// A crashed replica's names stay claimed until its lease expires, and then
// any replica may claim them.
func TestReplicaCrash(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	a.mustStart(t, life, "x")
	lease := a.Lease()
	a.Crash()
	crashed := time.Now()
	// Until the lease expires the key is a's: a claim that succeeded while
	// the lease is still granted found the key gone early. Expiry is
	// permanent, so a lease that reads granted after the claim returned was
	// granted throughout it.
	if _, err := b.start(life, "x"); err == nil && leaseGranted(t, cli, lease) {
		t.Fatal("b claimed a crashed replica's name while its lease was still granted")
	}
	b.startWhenFree(t, "x")
	t.Logf("a crashed replica's name was claimable after %v (TTL 1 s)", time.Since(crashed).Round(time.Millisecond))
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Fatalf("crashed replica's lease still has TTL %d", ttl.TTL)
	}
	if got := holder(t, cli, toolKey("x")); got != "b" {
		t.Fatalf("x held by %q", got)
	}
}

// A replica whose lease expired behind its back (a partition: the server
// expired it, and the replica has not heard yet) can neither delete nor
// overwrite the key of the replica that claimed the name next: its late
// stop is fenced by the create revision, and its claim finds the key. Then
// it learns of the expiry as of any session loss, and kills the rest.
func TestExpiredReplicaCannotTouchSuccessor(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	kx := a.mustStart(t, life, "x")
	ky := a.mustStart(t, life, "y")
	if _, err := cli.Revoke(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	b.mustStart(t, life, "x")
	// a hears of the expiry at its next keepalive, a third of the TTL
	// away at most: its stop comes before, and sends its fenced delete.
	noticed := a.SessionsLost() != 0
	if err := kx.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := holder(t, cli, toolKey("x")); got != "b" {
		t.Fatalf("after a's late stop x is held by %q, want b", got)
	}
	if _, err := a.start(life, "x"); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("a's claim of b's name: %v, want ErrDuplicate", err)
	}
	waitDone(t, ky)
	if got := holder(t, cli, toolKey("x")); got != "b" {
		t.Fatalf("after a's loss x is held by %q, want b", got)
	}
	if a.SessionsLost() != 1 {
		t.Fatalf("a lost %d sessions, want 1", a.SessionsLost())
	}
	if noticed {
		t.Log("a noticed the expiry before its stop: the fence was not needed this time")
	}
}
