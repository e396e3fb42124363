package etcdfleet_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const prefix = "/fleet"

// patience bounds every wait for something that must happen eventually:
// generous, so that a slow machine makes a test slow, never red.
const patience = 30 * time.Second

// promptly bounds a wait for what must follow at once from an event a
// test has already seen (a version that moves, a notification sent with
// the change), so that a test whose awaited step never comes fails within
// seconds rather than after patience.
const promptly = 2 * time.Second

func ctxFor(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// lifeFor returns a context for consumers to live by: unlike ctxFor's it
// has no deadline, so that no consumer dies of old age while a test waits
// for a death to come from elsewhere.
func lifeFor(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// join joins the fleet at ep as replica name with a 1 s TTL, closed when
// the test ends.
func join(t testing.TB, ep, name string) *etcdfleet.Replica {
	t.Helper()
	return joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second, Replica: name})
}

// joinConfig joins the fleet with cfg, closed when the test ends.
func joinConfig(t testing.TB, cfg etcdfleet.Config) *etcdfleet.Replica {
	t.Helper()
	r, err := etcdfleet.Join(ctxFor(t), cfg)
	if err != nil {
		t.Fatalf("join %s: %v", cfg.Replica, err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("close %s: %v", cfg.Replica, err)
		}
	})
	return r
}

// replica is one process of a fleet: a catalog whose names r claims.
type replica struct {
	*etcdfleet.Replica
	cat  *catalog.Catalog
	keep func(*catalog.Consumer)
}

func newReplica(t testing.TB, ep, name string) replica {
	t.Helper()
	return newReplicaOf(t, join(t, ep, name))
}

// newReplicaOf makes r the claimer and remote of a new catalog.
func newReplicaOf(t testing.TB, r *etcdfleet.Replica) replica {
	t.Helper()
	cat, err := catalog.New(catalog.Config{Claimer: r, Remote: r.Remote()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		kept []*catalog.Consumer
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		runtime.KeepAlive(kept)
	})
	return replica{r, cat, func(k *catalog.Consumer) {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, k)
	}}
}

func echo(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil }

// start starts a consumer for tool name on r. The test keeps every
// consumer it started reachable until it ends, so that none dies of being
// dropped unless a test means it to (and then calls StartTool itself).
func (r replica) start(ctx context.Context, name string) (*catalog.Consumer, error) {
	k, err := r.cat.StartTool(ctx, catalog.Tool{Name: name, Description: "d"}, bindsec.Plan{Public: true}, echo)
	if err == nil {
		r.keep(k)
	}
	return k, err
}

func (r replica) mustStart(t testing.TB, ctx context.Context, name string) *catalog.Consumer {
	t.Helper()
	k, err := r.start(ctx, name)
	if err != nil {
		t.Fatalf("%s: start %s: %v", r.Name(), name, err)
	}
	return k
}

// startWhenFree starts name on r, retrying while another owner still holds
// it (a crashed replica's lease not yet expired), within patience.
func (r replica) startWhenFree(t testing.TB, name string) *catalog.Consumer {
	t.Helper()
	ctx, life := ctxFor(t), lifeFor(t)
	for {
		k, err := r.start(life, name)
		if err == nil {
			return k
		}
		if !errors.Is(err, catalog.ErrDuplicate) {
			t.Fatalf("%s: start %s: %v", r.Name(), name, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s still held after %v: %v", r.Name(), name, patience, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// holder returns the replica recorded in key's value, "" if there is no key.
func holder(t testing.TB, cli *clientv3.Client, key string) string {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	rec, err := etcdfleet.DecodeRecord(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Replica
}

// waitGone waits, within patience, until key does not exist.
func waitGone(t testing.TB, cli *clientv3.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for holder(t, cli, key) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %v", key, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitDone(t testing.TB, k *catalog.Consumer) {
	t.Helper()
	select {
	case <-k.Done():
	case <-time.After(patience):
		t.Fatalf("consumer %s still alive after %v", k.Name(), patience)
	}
}

func toolKey(name string) string { return prefix + "/tools/" + name }

// leaseGranted reports whether etcd still holds lease: it has not expired
// nor been revoked. etcd answers TTL -1 for a lease it no longer holds; a
// granted one has 0 or more whole seconds left.
func leaseGranted(t testing.TB, cli *clientv3.Client, lease clientv3.LeaseID) bool {
	t.Helper()
	ttl, err := cli.TimeToLive(ctxFor(t), lease)
	if err != nil {
		t.Fatal(err)
	}
	return ttl.TTL >= 0
}
