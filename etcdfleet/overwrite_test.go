package etcdfleet_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// getKV returns key's current value and lease, "" if there is none.
func getKV(t *testing.T, cli *clientv3.Client, key string) (string, clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", clientv3.NoLease
	}
	return string(resp.Kvs[0].Value), clientv3.LeaseID(resp.Kvs[0].Lease)
}

// waitKV waits, within patience, until key holds want attached to lease.
func waitKV(t *testing.T, cli *clientv3.Client, key, want string, lease clientv3.LeaseID) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		got, l := getKV(t, cli, key)
		if got == want && l == lease {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q on lease %x after %v; want %q on lease %x", key, got, l, patience, want, lease)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A holder whose genuine record is overwritten puts it back, attached to
// its lease again (a plain put detaches the key from the lease, so the
// name would outlive the holder), and its consumer lives on: the key never
// ceased to exist, so nobody else can have claimed the name. A holder
// whose key is deleted gives the claim up: its consumer dies, and the name
// is free, never held twice.
func TestOverwrittenClaim(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	key := toolKey("whoami")
	kb := b.mustStart(t, life, "whoami")
	waitView(t, a.View(), "whoami listed", func() bool { return slices.Contains(remoteTools(a.Replica), "whoami") })
	genuine, lease := getKV(t, cli, key)
	if lease != b.Lease() {
		t.Fatalf("the claim is on lease %x, b's is %x", lease, b.Lease())
	}

	for _, tc := range []struct {
		what string
		val  string
		opts []clientv3.OpOption
	}{
		{"a forged record, no lease", `{"replica":"evil","endpoint":"http://127.0.0.1:9999/steal","kind":"tool","tool":{"name":"whoami"}}`, nil},
		{"the genuine record, endpoint edited, same lease", edit(t, genuine, func(m map[string]any) {
			m["endpoint"] = "http://127.0.0.1:9999/fleet"
		}), []clientv3.OpOption{clientv3.WithLease(lease)}},
		{"the genuine record, without its lease", genuine, nil},
	} {
		put(t, cli, key, tc.val, tc.opts...)
		waitKV(t, cli, key, genuine, lease)
		select {
		case <-kb.Done():
			t.Fatalf("%s: the holder's consumer died", tc.what)
		default:
		}
		waitView(t, a.View(), tc.what+": whoami listed again", func() bool {
			rec, ok := a.View().Holder(key)
			return ok && rec.Replica == "b"
		})
	}
	// Deleted behind b's back: b gives the claim up, and a may take it.
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitDone(t, kb)
	if got, _ := getKV(t, cli, key); got != "" {
		t.Fatalf("after the deletion %s holds %q", key, got)
	}
	a.mustStart(t, life, "whoami")
	if got := holder(t, cli, key); got != "a" {
		t.Fatalf("whoami held by %q, want a", got)
	}
}

// A key deleted and claimed by another replica before its holder hears of
// either: the holder cannot put its record back (the create revision
// changed), so it kills its consumer; one holder remains, the new one.
func TestDeletedAndTakenClaim(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	kb := b.mustStart(t, life, "x")
	resume := b.PauseFollower()
	if _, err := cli.Delete(ctx, toolKey("x")); err != nil {
		t.Fatal(err)
	}
	ka := a.mustStart(t, life, "x")
	resume()
	waitDone(t, kb)
	if got := holder(t, cli, toolKey("x")); got != "a" {
		t.Fatalf("x held by %q, want a", got)
	}
	select {
	case <-ka.Done():
		t.Fatal("the new holder's consumer died")
	default:
	}
	if _, err := b.start(life, "x"); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("b's restart: %v, want ErrDuplicate", err)
	}
}

// A replica that has lost its session stops listing and locating the
// fleet's routes when it kills its own consumers, announcing the change,
// and lists them again once a listing under its new session has replaced
// its view: a tool it lists is one some replica serves.
func TestLostSessionHidesTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a := newReplica(t, ep, "a")
	b := newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second,
		Replica: "b", Advertise: "http://127.0.0.1:1/fleet"}))
	life := lifeFor(t)
	b.mustStart(t, life, "far")
	near := a.mustStart(t, life, "near")
	waitView(t, a.View(), "far listed on a", func() bool { return slices.Contains(remoteTools(a.Replica), "far") })
	if _, ok := a.Peer(catalog.KindTool, "far"); !ok {
		t.Fatal("far not located")
	}
	version := a.Remote().ToolsVersion()
	// The follower held, so that only the session's loss acts on a: not
	// the deletions its lease's expiry brings.
	resume := a.PauseFollower()
	a.OrphanSession()
	waitDone(t, near)
	if got := remoteTools(a.Replica); len(got) != 0 {
		t.Fatalf("a lists %q while between sessions", got)
	}
	if got, ok := a.Peer(catalog.KindTool, "far"); ok {
		t.Fatalf("a locates far at %s while between sessions", got)
	}
	if a.Remote().ToolsVersion() == version {
		t.Fatal("hiding the fleet's routes did not move the version: no list_changed")
	}
	resume()
	waitView(t, a.View(), "far listed again", func() bool { return slices.Contains(remoteTools(a.Replica), "far") })
	if a.Lease() == clientv3.NoLease {
		t.Fatal("far listed again before a new session")
	}
	if _, ok := a.Peer(catalog.KindTool, "far"); !ok {
		t.Fatal("far not located again")
	}
	if slices.Contains(remoteTools(a.Replica), "near") {
		t.Fatal("a's dead consumer's route is listed")
	}
}
