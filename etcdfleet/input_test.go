package etcdfleet_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestJoinRefusesBadConfig(t *testing.T) {
	ok := etcdfleet.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/p", Token: fleetToken, Advertise: "http://127.0.0.1:8931/fleet"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate of a valid config: %v", err)
	}
	for name, mod := range map[string]func(*etcdfleet.Config){
		"no endpoints":       func(c *etcdfleet.Config) { c.Endpoints = nil },
		"unknown scheme":     func(c *etcdfleet.Config) { c.Endpoints = []string{"ftp://127.0.0.1:2379"} },
		"no scheme":          func(c *etcdfleet.Config) { c.Endpoints = []string{"127.0.0.1:2379"} },
		"no port":            func(c *etcdfleet.Config) { c.Endpoints = []string{"http://127.0.0.1"} },
		"path":               func(c *etcdfleet.Config) { c.Endpoints = []string{"http://127.0.0.1:2379/v3"} },
		"empty prefix":       func(c *etcdfleet.Config) { c.Prefix = "" },
		"relative prefix":    func(c *etcdfleet.Config) { c.Prefix = "p" },
		"root prefix":        func(c *etcdfleet.Config) { c.Prefix = "/" },
		"trailing slash":     func(c *etcdfleet.Config) { c.Prefix = "/p/" },
		"empty segment":      func(c *etcdfleet.Config) { c.Prefix = "/a//b" },
		"control character":  func(c *etcdfleet.Config) { c.Prefix = "/a\x00b" },
		"invalid UTF-8":      func(c *etcdfleet.Config) { c.Prefix = "/a\xffb" },
		"long prefix":        func(c *etcdfleet.Config) { c.Prefix = "/" + strings.Repeat("a", 600) },
		"short TTL":          func(c *etcdfleet.Config) { c.TTL = 500 * time.Millisecond },
		"fractional TTL":     func(c *etcdfleet.Config) { c.TTL = 1500 * time.Millisecond },
		"negative timeout":   func(c *etcdfleet.Config) { c.OpTimeout = -1 },
		"negative cap":       func(c *etcdfleet.Config) { c.Cap = -1 },
		"bad replica name":   func(c *etcdfleet.Config) { c.Replica = "a\nb" },
		"advertise no host":  func(c *etcdfleet.Config) { c.Advertise = "http:///fleet" },
		"advertise scheme":   func(c *etcdfleet.Config) { c.Advertise = "ftp://127.0.0.1:1/fleet" },
		"advertise relative": func(c *etcdfleet.Config) { c.Advertise = "127.0.0.1:1/fleet" },
		"advertise user":     func(c *etcdfleet.Config) { c.Advertise = "http://u:p@127.0.0.1:1/fleet" },
		"advertise query":    func(c *etcdfleet.Config) { c.Advertise = "http://127.0.0.1:1/fleet?x=1" },
		"advertise control":  func(c *etcdfleet.Config) { c.Advertise = "http://127.0.0.1:1/a\x00b" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			mod(&cfg)
			if err := cfg.Validate(); !errors.Is(err, etcdfleet.ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig", err)
			}
			r, err := etcdfleet.Join(context.Background(), cfg)
			if !errors.Is(err, etcdfleet.ErrInvalidConfig) {
				t.Fatalf("Join: %v, want ErrInvalidConfig", err)
			}
			if r != nil {
				t.Fatal("a refused Join returned a replica")
			}
		})
	}
}

// A cluster that does not answer: Join fails with ErrUnavailable once its
// ctx ends, and leaves nothing running (TestMain's goleak check).
func TestJoinUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	r, err := etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken})
	if !errors.Is(err, etcdfleet.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if r != nil {
		t.Fatal("a failed Join returned a replica")
	}
	// Not a timing assert on the deadline itself: only that Join does not
	// hang far beyond it.
	if d := time.Since(began); d > patience {
		t.Fatalf("Join returned after %v", d)
	}
	t.Logf("unreachable cluster: Join returned after %v with %v", time.Since(began).Round(time.Millisecond), err)
}

// A name the catalog accepts but that makes no valid key is refused with
// ErrInvalidName, and nothing is claimed or left registered.
func TestNameTooLongForAKey(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := newReplica(t, ep, "a")
	ctx, life := ctxFor(t), lifeFor(t)
	uri := "file:///" + strings.Repeat("é", 1500) // 3,008 bytes: valid for the catalog
	read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil }
	_, err := a.cat.StartResource(life, catalog.Resource{URI: uri}, bindsec.Plan{Public: true}, read)
	if !errors.Is(err, catalog.ErrInvalidName) {
		t.Fatalf("start: %v, want ErrInvalidName", err)
	}
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		// A membership or an enrollment is no claim.
		if !strings.HasPrefix(string(kv.Key), prefix+"/replicas/") && !strings.HasPrefix(string(kv.Key), prefix+"/enroll/") {
			t.Fatalf("key %s claimed", kv.Key)
		}
	}
	if n := len(a.cat.Resources().List()); n != 0 {
		t.Fatalf("%d resources listed", n)
	}
	// The catalog is unharmed: a short URI starts.
	if _, err := a.cat.StartResource(life, catalog.Resource{URI: "file:///ok"}, bindsec.Plan{Public: true}, read); err != nil {
		t.Fatal(err)
	}
}
