package embedded_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/etcdfleet/embedded"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start runs an etcd for one test, stopped when the test ends.
func start(t *testing.T, cfg embedded.Config) *embedded.Etcd {
	t.Helper()
	cfg.TickMs, cfg.ElectionMs, cfg.NoFsync = 10, 100, true
	e, err := embedded.Start(ctxFor(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// A start serves a client on loopback and holds its directory: a second
// start there is ErrLocked at once, and the directory is free again, with
// its data, once the first has closed.
func TestStartLocksAndRestarts(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	e := start(t, embedded.Config{Dir: dir})
	if !strings.HasPrefix(e.Endpoint(), "http://127.0.0.1:") || strings.HasSuffix(e.Endpoint(), ":0") {
		t.Errorf("endpoint %q, want http://127.0.0.1 on the port picked", e.Endpoint())
	}
	cli, err := e.Client(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()

	// In a goroutine: without the lock, etcd's own would block the
	// second start for good, ctx or not.
	second := make(chan error, 1)
	go func() {
		e, err := embedded.Start(ctx, embedded.Config{Dir: dir})
		if err == nil {
			e.Close()
		}
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, embedded.ErrLocked) {
			t.Fatalf("a second start in the same directory = %v, want ErrLocked", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second start in the same directory did not return within 5 s")
	}
	e.Close()
	e.Close() // a second Close does nothing

	again := start(t, embedded.Config{Dir: dir})
	cli, err = again.Client(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if resp, err := cli.Get(ctx, "/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Errorf("after a restart /k = %v, %v; want v", resp, err)
	}
	if _, _, ok := again.PeerCert(); ok {
		t.Error("an etcd that is not hardened has a peer certificate")
	}
}

// A config Start cannot serve as asked is refused before anything runs.
func TestStartRefusesConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		cfg  embedded.Config
		want string
	}{
		{"no directory", embedded.Config{}, "no data directory"},
		{"not loopback", embedded.Config{Dir: dir, ClientURL: "http://10.0.0.1:0"}, "not a loopback IP"},
		{"a name, not an IP", embedded.Config{Dir: dir, ClientURL: "http://localhost:0"}, "not a loopback IP"},
		{"https without TLS", embedded.Config{Dir: dir, ClientURL: "https://127.0.0.1:0"}, "goes with ClientTLS"},
		{"unix", embedded.Config{Dir: dir, ClientURL: "unix:///tmp/etcd.sock"}, "neither http"},
	} {
		e, err := embedded.Start(ctxFor(t), tt.cfg)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused starts left %d files behind", len(entries))
	}
}

// A start whose context ends before the etcd serves gives the context's
// cause and leaves the directory free.
func TestStartCanceled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("given up")
	cancel(stop)
	if e, err := embedded.Start(ctx, embedded.Config{Dir: dir}); !errors.Is(err, stop) {
		if err == nil {
			e.Close()
		}
		t.Fatalf("start with an ended context = %v, want its cause", err)
	}
	start(t, embedded.Config{Dir: dir})
}

// What a stranger adds before EnableAuth (users, roles, keys) is gone
// once auth is on, and the planted user no longer logs in.
func TestEnableAuthSweeps(t *testing.T) {
	ctx := ctxFor(t)
	e := start(t, embedded.Config{Dir: t.TempDir(), BcryptCost: 4})
	anon, err := e.Client(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	for _, plant := range []func() error{
		func() error { _, err := anon.UserAdd(ctx, "intruder", "x"); return err },
		func() error { _, err := anon.RoleAdd(ctx, "intruder"); return err },
		func() error { _, err := anon.UserGrantRole(ctx, "intruder", embedded.Root); return err },
		func() error { _, err := anon.Put(ctx, "/fleet/tools/planted", "x"); return err },
	} {
		if err := plant(); err != nil {
			t.Fatal(err)
		}
	}
	if e.AuthEnabled() {
		t.Fatal("auth on before EnableAuth")
	}
	const password = "root-password-0123456789"
	if err := e.EnableAuth(ctx, password); err != nil {
		t.Fatal(err)
	}
	if !e.AuthEnabled() {
		t.Error("auth off after EnableAuth")
	}
	root, err := e.Client(ctx, embedded.Root, password)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	users, err := root.UserList(ctx)
	if err != nil || len(users.Users) != 1 || users.Users[0] != embedded.Root {
		t.Errorf("users after EnableAuth: %v, %v; want root alone", users, err)
	}
	roles, err := root.RoleList(ctx)
	if err != nil || len(roles.Roles) > 1 || len(roles.Roles) == 1 && roles.Roles[0] != embedded.Root {
		t.Errorf("roles after EnableAuth: %v, %v; want root alone", roles, err)
	}
	if resp, err := root.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("keys after EnableAuth: %v, %v; want none", resp, err)
	}
	if _, err := anon.Authenticate(ctx, "intruder", "x"); err == nil {
		t.Error("the planted user logs in")
	}
	if _, err := anon.Put(ctx, "/fleet/tools/late", "x"); err == nil {
		t.Error("a client without credentials writes once auth is on")
	}
}

// A hardened etcd's peer port, which serves raft messages and lease
// renewals without etcd's auth, takes no plain HTTP and no TLS client
// without this start's peer certificate; with it, it answers.
func TestHardenedPeerPortClosed(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	e := start(t, embedded.Config{Dir: dir, Hardened: true})
	peer := e.PeerAddr()
	get := func(url string, certs []tls.Certificate) (int, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("http://"+peer+"/members", nil); err == nil && code == http.StatusOK {
		t.Error("the peer port answered plain HTTP")
	}
	if code, err := get("https://"+peer+"/members", nil); err == nil {
		t.Errorf("the peer port answered HTTP %d to a TLS client without a certificate", code)
	}
	certFile, keyFile, ok := e.PeerCert()
	if !ok || filepath.Dir(certFile) != dir {
		t.Fatalf("PeerCert() = %s, %v; want a file in the data directory", certFile, ok)
	}
	for _, f := range []string{certFile, keyFile} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, st, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get("https://"+peer+"/members", []tls.Certificate{cert}); err != nil || code != http.StatusOK {
		t.Errorf("the peer port with its certificate: HTTP %d, %v", code, err)
	}
}
