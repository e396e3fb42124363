package main

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

// A replica whose etcd session is lost has its consumers killed (package
// etcdfleet); the adopter starts the demo's again on the new session. The
// embedded etcd is this command's own (startEtcd).
func TestAdopterRestartsAfterSessionLoss(t *testing.T) {
	ctx := ctxGuard(t)
	e, err := startEtcd(ctx, t.TempDir(), "http://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ep := e.Endpoint()
	rep, err := etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: []string{ep}, Prefix: "/t", TTL: time.Second, Replica: "a", Token: testFleetToken})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(catalog.Config{Claimer: rep, Remote: rep.Remote(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	adopt := newAdopter(rep, quiet())
	// No periodic retry within the test: only the death can restart them.
	adopt.retry = time.Hour
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ks, err := startDemo(cctx, cat, adopt)
	if err != nil {
		t.Fatal(err)
	}
	adopt.run()
	defer func() {
		adopt.stop()
		_ = rep.Close(context.Background())
		stopAll(append(ks, adopt.close()...))
	}()
	echo := func() error {
		_, err := cat.CallTool(ctx, "echo", []byte(`{"text":"x"}`), "")
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}

	// The lease revoked from outside, as an expiry in a partition would.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(ctx, rep.Lease()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the session is lost and the demo consumers die", func() bool {
		select {
		case <-ks[0].Done():
			return rep.SessionsLost() == 1
		default:
			return false
		}
	})
	// The periodic retry is an hour away: the death set the restart off.
	took := eventually(t, 30*time.Second, "every demo route is served again", func() bool {
		st := cat.Stats()
		return echo() == nil && st.Tools == len(ks)-1 && st.Resources == 1
	})
	t.Logf("the demo routes served again %v after their consumers' death", took.Round(time.Millisecond))
}
