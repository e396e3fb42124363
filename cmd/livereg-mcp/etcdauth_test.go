package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const testEtcdPassword = "etcd-pass-0123456789"

func TestEtcdAuthFlags(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeCert(t, dir)
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(testEtcdPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openFile := filepath.Join(dir, "pw-open")
	if err := os.WriteFile(openFile, []byte(testEtcdPassword), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			if k == fleetTokenEnv {
				return testFleetToken
			}
			return ""
		}
	}
	none, withPw := env(), env(etcdPasswordEnv, testEtcdPassword)
	const https = "https://10.0.0.1:2379"
	for _, tt := range []struct {
		args     []string
		getenv   func(string) string
		wantErr  string // "" for success
		wantUser string
	}{
		{[]string{"-etcd", "http://e:2379"}, none, "", "root"},
		{[]string{"-etcd-embedded", "d"}, none, "", "root"},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "fleet"}, withPw, "", "fleet"},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "fleet", "-etcd-password-file", pwFile}, none, "", "fleet"},
		{[]string{"-etcd", https + ",unixs:///run/e.sock", "-etcd-ca", ca}, none, "", "root"},
		{[]string{"-etcd", https, "-etcd-ca", ca, "-etcd-cert", cert, "-etcd-key", key, "-etcd-user", "fleet"}, withPw, "", "fleet"},
		{[]string{"-etcd", https, "-etcd-cert", cert, "-etcd-key", key}, none, "", "root"},
		{[]string{}, withPw, "", ""}, // the variable alone joins nothing

		{[]string{"-etcd-ca", ca}, none, "-etcd-ca needs -etcd", ""},
		{[]string{"-etcd-user", "u"}, withPw, "-etcd-user needs -etcd", ""},
		{[]string{"-etcd-password-file", pwFile}, none, "-etcd-password-file needs -etcd", ""},
		{[]string{"-etcd-embedded", "d", "-etcd-cert", cert, "-etcd-key", key}, none, "-etcd-cert is for an etcd of your own", ""},
		{[]string{"-etcd-embedded", "d", "-etcd-ca", ca}, none, "-etcd-ca is for an etcd of your own", ""},
		{[]string{"-etcd-embedded", "d", "-etcd-key", key}, none, "-etcd-key is for an etcd of your own", ""},
		{[]string{"-etcd-embedded", "d", "-etcd-user", "u"}, withPw, "-etcd-user is for an etcd of your own", ""},
		{[]string{"-etcd-embedded", "d", "-etcd-password-file", pwFile}, none, "-etcd-password-file is for an etcd of your own", ""},
		{[]string{"-etcd-embedded", "d"}, withPw, "unset it", ""},
		{[]string{"-etcd", "http://e:2379"}, withPw, "needs -etcd-user", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-password-file", pwFile}, none, "needs -etcd-user", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "u"}, none, "-etcd-user needs its password", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", ""}, withPw, "-etcd-user must not be empty", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "a b"}, withPw, "-etcd-user must hold no spaces", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "u", "-etcd-password-file", pwFile}, withPw, "mutually exclusive", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "u", "-etcd-password-file", openFile}, none, "chmod 600", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "u", "-etcd-password-file", filepath.Join(dir, "missing")}, none, "-etcd-password-file: open", ""},
		{[]string{"-etcd", https, "-etcd-cert", cert}, none, "-etcd-cert and -etcd-key go together", ""},
		{[]string{"-etcd", https, "-etcd-key", key}, none, "-etcd-cert and -etcd-key go together", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-ca", ca}, none, "all https:// or unixs://", ""},
		{[]string{"-etcd", https + ",http://e:2379", "-etcd-ca", ca}, none, "all https:// or unixs://", ""},
		{[]string{"-etcd", https, "-etcd-ca", key}, none, "-etcd-ca, -etcd-cert, -etcd-key: etcdfleet: invalid config", ""},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "u", "-etcd-password", testEtcdPassword}, none, "there is no -etcd-password", ""},
		{[]string{"-etcd", "http://e:2379", "--etcd-password=" + testEtcdPassword}, none, "there is no -etcd-password", ""},
	} {
		cfg, err := parseArgs(tt.args, tt.getenv, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tt.args, err, tt.wantErr)
		case err != nil && (strings.Contains(err.Error(), testEtcdPassword) || strings.Contains(err.Error(), testFleetToken)):
			t.Errorf("%q: the error quotes a secret: %v", tt.args, err)
		case err == nil && cfg.joins():
			user, pw := cfg.etcdCredentials()
			wantPw := testEtcdPassword
			if tt.wantUser == etcdRoot {
				wantPw = etcdRootPassword(testFleetToken)
			}
			if user != tt.wantUser || pw != wantPw {
				t.Errorf("%q: logs in as %q (password right: %v), want %q", tt.args, user, pw == wantPw, tt.wantUser)
			}
			if (cfg.etcdAuth.tls != nil) != strings.Contains(strings.Join(tt.args, " "), "-etcd-c") {
				t.Errorf("%q: TLS config %v", tt.args, cfg.etcdAuth.tls)
			}
		}
	}
}

// A contradiction exits 2 without quoting a secret; so does a password
// flag, which does not exist.
func TestEtcdAuthFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"-etcd-embedded", t.TempDir(), "-etcd-user", "u"},
		{"-etcd", "http://127.0.0.1:1", "-etcd-user", "u", "-etcd-password", testEtcdPassword},
	} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", fleetTokenEnv+"="+testFleetToken, etcdPasswordEnv+"=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(string(out), testEtcdPassword) || !strings.Contains(string(out), "-etcd-") {
			t.Errorf("%q: exit %v, output %q; want exit status 2 and the reason, without the password", args, err, out)
		}
	}
}

// The embedded etcd, as -etcd-embedded runs it, refuses strangers: a
// client without the credential cannot write, through gRPC or through
// the HTTP gateway (JSON or text/plain); a foreign Origin gets no CORS
// grant; a foreign Host is refused. The same gateway takes a write that
// carries root's token, so the refusals are the credential's doing.
func TestEmbeddedEtcdRefusesStrangers(t *testing.T) {
	ctx := ctxGuard(t)
	ep, _ := startSecuredEtcd(t, t.TempDir(), config{fleetToken: testFleetToken})

	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Put(ctx, "/livereg-mcp/tools/planted", "x"); err == nil {
		t.Error("a client without credentials wrote to the embedded etcd")
	}

	put := func(contentType, token, key string) int {
		body := `{"key":"` + base64.StdEncoding.EncodeToString([]byte(key)) + `","value":"eA=="}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ep+"/v3/kv/put", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", "http://evil.example")
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("POST with a foreign Origin: Access-Control-Allow-Origin %q", got)
		}
		return resp.StatusCode
	}
	for _, ct := range []string{"application/json", "text/plain"} {
		if code := put(ct, "", "/planted-"+ct); code == http.StatusOK {
			t.Errorf("gateway put (%s) without credentials: HTTP %d", ct, code)
		}
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: etcdRoot, Password: etcdRootPassword(testFleetToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if resp, err := root.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the etcd holds %v, %v after refused writes; want nothing", resp, err)
	}
	// The gateway works, with a token.
	resp, err := http.Post(ep+"/v3/auth/authenticate", "application/json",
		strings.NewReader(`{"name":"root","password":"`+etcdRootPassword(testFleetToken)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var auth struct{ Token string }
	err = json.NewDecoder(resp.Body).Decode(&auth)
	resp.Body.Close()
	if err != nil || auth.Token == "" {
		t.Fatalf("gateway authenticate as root: %v", err)
	}
	if code := put("application/json", auth.Token, "/with-token"); code != http.StatusOK {
		t.Errorf("gateway put with root's token: HTTP %d", code)
	}
	if resp, err := root.Get(ctx, "/with-token"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("gateway put with root's token wrote %v, %v", resp, err)
	}

	// CORS: a preflight from a foreign origin gets no grant.
	req, _ := http.NewRequestWithContext(ctx, http.MethodOptions, ep+"/v3/kv/put", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type, authorization")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("preflight from a foreign origin: Access-Control-Allow-Origin %q", got)
		}
	}

	// Host: loopback names pass, a rebound name is refused.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ep, "http://"))
	for host, want := range map[string]int{
		"evil.example": http.StatusMisdirectedRequest, "evil.example:" + port: http.StatusMisdirectedRequest,
		"127.0.0.1:" + port: http.StatusOK, "localhost:" + port: http.StatusOK, "[::1]:" + port: http.StatusOK, "[::1]": http.StatusOK,
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/health", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /health with Host %s: HTTP %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// A restart over the same directory logs in; a new fleet token with the
// old one in $LIVEREG_FLEET_TOKEN_PREVIOUS takes root's password over; a
// token the etcd never knew is refused, without quoting it.
func TestEmbeddedEtcdRestartAndRotation(t *testing.T) {
	dir := t.TempDir()
	const next, stranger = "fleet-secret-next-0123456789", "fleet-secret-stranger-012345"
	for _, cfg := range []config{
		{fleetToken: testFleetToken}, // the first start turns auth on
		{fleetToken: testFleetToken}, // a restart logs in
		{fleetToken: next, fleetTrust: fleetTrust{fleetPrevious: []string{"not-this-one-0123456789", testFleetToken}}},
	} {
		_, stop := startSecuredEtcd(t, dir, cfg)
		stop()
	}
	ep, stop := startSecuredEtcd(t, dir, config{fleetToken: next})
	for tok, ok := range map[string]bool{next: true, testFleetToken: false} {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			Username: etcdRoot, Password: etcdRootPassword(tok)})
		if err == nil {
			_ = cli.Close()
		}
		if (err == nil) != ok {
			t.Errorf("root login with the password of token %q: %v, want success %v", tok[:12], err, ok)
		}
	}
	stop()
	lock, e, err := startEtcd(ctxGuard(t), dir, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close(); _ = lock.Close() }()
	err = secureEtcd(ctxGuard(t), e, "http://"+e.Clients[0].Addr().String(), config{fleetToken: stranger}, quiet())
	if err == nil || !strings.Contains(err.Error(), fleetTokenPreviousEnv) || strings.Contains(err.Error(), stranger) {
		t.Errorf("a token the etcd never knew: %v", err)
	}
}

// startSecuredEtcd starts the embedded etcd in dir as joinFleet does, on
// a fixed free port (etcd's HTTP gateway dials the listen address, so
// port 0 would leave it broken), and returns its client URL and a stop
// function, which the test's end also calls.
func startSecuredEtcd(t *testing.T, dir string, cfg config) (string, func()) {
	t.Helper()
	lock, e, err := startEtcd(ctxGuard(t), dir, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { e.Close(); _ = lock.Close() }) }
	t.Cleanup(stop)
	ep := "http://" + e.Clients[0].Addr().String()
	if err := secureEtcd(ctxGuard(t), e, ep, cfg, quiet()); err != nil {
		t.Fatal(err)
	}
	return ep, stop
}

func freeLoopbackURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// writeCert writes a self-signed loopback certificate, usable as a CA and
// as a client certificate, and its key, as PEM files in dir.
func writeCert(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "livereg-mcp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{cert, "CERTIFICATE", der}, {key, "PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, cert, key
}

// What a stranger adds in the milliseconds between the first start's
// listening and its AuthEnable (users, roles, keys) is gone once auth is
// on.
func TestEmbeddedEtcdFirstStartSweeps(t *testing.T) {
	ctx := ctxGuard(t)
	dir := t.TempDir()
	lock, e, err := startEtcd(ctx, dir, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close(); _ = lock.Close() }()
	ep := "http://" + e.Clients[0].Addr().String()
	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	for _, plant := range []func() error{
		func() error { _, err := anon.UserAdd(ctx, "intruder", "x"); return err },
		func() error { _, err := anon.RoleAdd(ctx, "intruder"); return err },
		func() error { _, err := anon.UserGrantRole(ctx, "intruder", etcdRoot); return err },
		func() error { _, err := anon.Put(ctx, "/livereg-mcp/tools/planted", "x"); return err },
	} {
		if err := plant(); err != nil {
			t.Fatal(err)
		}
	}
	if err := secureEtcd(ctx, e, ep, config{fleetToken: testFleetToken}, quiet()); err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: etcdRoot, Password: etcdRootPassword(testFleetToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	users, err := root.UserList(ctx)
	if err != nil || len(users.Users) != 1 || users.Users[0] != etcdRoot {
		t.Errorf("users after the first start: %v, %v; want root alone", users, err)
	}
	roles, err := root.RoleList(ctx)
	if err != nil || len(roles.Roles) > 1 || len(roles.Roles) == 1 && roles.Roles[0] != etcdRoot {
		t.Errorf("roles after the first start: %v, %v; want root alone", roles, err)
	}
	if resp, err := root.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("keys after the first start: %v, %v; want none", resp, err)
	}
	if _, err := anon.Authenticate(ctx, "intruder", "x"); err == nil {
		t.Error("the planted user logs in")
	}
}

// The embedded etcd's peer port, which serves raft messages and lease
// renewals without etcd's auth, takes no plain HTTP and no TLS client
// without this start's peer certificate; with it, it answers.
func TestEmbeddedEtcdPeerPortClosed(t *testing.T) {
	ctx := ctxGuard(t)
	dir := t.TempDir()
	lock, e, err := startEtcd(ctx, dir, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close(); _ = lock.Close() }()
	peer := e.Peers[0].Addr().String()
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
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, peerCertFile), filepath.Join(dir, peerKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get("https://"+peer+"/members", []tls.Certificate{cert}); err != nil || code != http.StatusOK {
		t.Errorf("the peer port with its certificate: HTTP %d, %v", code, err)
	}
}
