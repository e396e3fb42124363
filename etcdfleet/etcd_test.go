package etcdfleet_test

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/livereg/livereg/etcdfleet/embedded"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startEtcd runs a single-node etcd for one test: loopback on a port the
// kernel picks, 10 ms ticks, 100 ms elections, no fsync. It returns the
// client endpoint; the server stops when the test ends.
func startEtcd(t testing.TB) string {
	t.Helper()
	return startEtcdWith(t, embedded.Config{}).Endpoint()
}

// startEtcdWith is startEtcd with cfg's client URL, client TLS and bcrypt
// cost; it fills in the rest.
func startEtcdWith(t testing.TB, cfg embedded.Config) *embedded.Etcd {
	t.Helper()
	cfg.Name, cfg.Dir = "fleet", t.TempDir()
	cfg.TickMs, cfg.ElectionMs, cfg.NoFsync = 10, 100, true
	e, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// startEtcdTLS serves clients over TLS with the certificate in cert and
// key.
func startEtcdTLS(t testing.TB, cert, key string) string {
	t.Helper()
	return startEtcdWith(t, embedded.Config{
		ClientURL: "https://127.0.0.1:0", ClientTLS: &transport.TLSInfo{CertFile: cert, KeyFile: key},
	}).Endpoint()
}

// client is a plain etcd client on ep for a test's own reads.
func client(t testing.TB, ep string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
