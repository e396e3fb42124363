package etcdfleet_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/etcdfleet"
)

// waitView waits, within patience, until cond holds for v, waking on its
// changes.
func waitView(t *testing.T, v *etcdfleet.View, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(patience)
	for {
		ch := v.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("view: %s: not after %v; tools %v", what, patience, v.Tools())
		}
	}
}

// A replica's view follows the other replicas' claims: starts, stops,
// deaths and crashes.
func TestViewFollowsFleet(t *testing.T) {
	ep := startEtcd(t)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	v := b.View()
	before := v.Version()

	k := a.mustStart(t, life, "one")
	cctx, cancel := context.WithCancel(life)
	a.mustStart(t, cctx, "two")
	b.mustStart(t, life, "mine")
	waitView(t, v, "one, two and mine listed", func() bool {
		return viewHas(v, "one") && viewHas(v, "two") && viewHas(v, "mine")
	})
	if rec, ok := v.Holder(toolKey("one")); !ok || rec.Replica != "a" || rec.Tool.Description != "d" {
		t.Fatalf("holder of one: %+v %v", rec, ok)
	}
	if v.Version() == before {
		t.Fatal("version did not move")
	}
	if got := v.Tools(); got[0].Name != "mine" || got[1].Name != "one" || got[2].Name != "two" {
		t.Fatalf("not sorted: %v", got)
	}

	if err := k.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitView(t, v, "a stopped one", func() bool { return !viewHas(v, "one") })
	cancel()
	waitView(t, v, "two died", func() bool { return !viewHas(v, "two") })

	a.mustStart(t, life, "three")
	waitView(t, v, "three listed", func() bool { return viewHas(v, "three") })
	a.Crash()
	waitView(t, v, "a crashed: three expired", func() bool { return !viewHas(v, "three") })
	if !viewHas(v, "mine") {
		t.Fatalf("b's own claim left the view: b lost %d sessions, key held by %q", b.SessionsLost(), holder(t, client(t, ep), toolKey("mine")))
	}
}

// A follower whose revisions were compacted away lists again, and the view
// holds exactly what the fleet holds.
func TestViewRelistsAfterCompaction(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	v := b.View()
	k := a.mustStart(t, life, "one")
	waitView(t, v, "one listed", func() bool { return viewHas(v, "one") })
	resume := b.PauseFollower()
	// While b's follower is cut off: one goes, two comes, and the history
	// is compacted.
	if err := k.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	a.mustStart(t, life, "two")
	head := compact(t, ctx, cli)
	if !viewHas(v, "one") || viewHas(v, "two") {
		t.Fatalf("a paused follower's view changed: %v", v.Tools())
	}
	resume()
	waitView(t, v, "relisted", func() bool { return !viewHas(v, "one") && viewHas(v, "two") })
	if v.Revision() < head {
		t.Fatalf("view at revision %d, compacted at %d", v.Revision(), head)
	}
	// And it keeps following from there.
	a.mustStart(t, life, "three")
	waitView(t, v, "three listed", func() bool { return viewHas(v, "three") })
}

// A follower that lists again opens its watch first, so that it follows
// from the listing at once: a change made between the two is in the
// listing, and the watch's copy of it, already listed, changes nothing.
func TestViewRelistSkipsWhatItListed(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	v := b.View()
	a.mustStart(t, life, "one")
	waitView(t, v, "one listed", func() bool { return viewHas(v, "one") })

	var changes atomic.Int64
	v.Watch(func() { changes.Add(1) })
	listed := make(chan struct{})
	b.SetBeforeList(func() {
		// On b's follower, its new watch open: a claim it must not miss
		// and must not apply twice.
		a.mustStart(t, life, "between")
		changes.Store(0)
		close(listed)
	})
	resume := b.PauseFollower()
	// Paused, b misses changes whose revisions are then compacted away
	// (the last one's is kept).
	a.mustStart(t, life, "during")
	a.mustStart(t, life, "during-too")
	compact(t, ctx, cli)
	resume()
	<-listed
	waitView(t, v, "between listed", func() bool { return viewHas(v, "between") })
	// A change after the listing, to know the watch has delivered
	// everything before it.
	a.mustStart(t, life, "after")
	waitView(t, v, "after listed", func() bool { return viewHas(v, "after") })
	if n := changes.Load(); n != 2 {
		t.Errorf("the view changed %d times after the new watch opened, want 2: the listing and after", n)
	}
	if !viewHas(v, "one") || !viewHas(v, "during") {
		t.Errorf("the view lost a claim: %v", v.Tools())
	}
}

// compact compacts etcd's history up to its current revision, which it
// returns.
func compact(t *testing.T, ctx context.Context, cli *clientv3.Client) int64 {
	t.Helper()
	head, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, head.Header.Revision); err != nil {
		t.Fatal(err)
	}
	return head.Header.Revision
}
