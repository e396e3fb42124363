package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/livereg/livereg/etcdfleet/embedded"
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
		{[]string{"-etcd", "http://e:2379"}, none, "", etcdFleetUser},
		{[]string{"-etcd-embedded", "d"}, none, "", etcdFleetUser},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "fleet"}, withPw, "", "fleet"},
		{[]string{"-etcd", "http://e:2379", "-etcd-user", "fleet", "-etcd-password-file", pwFile}, none, "", "fleet"},
		{[]string{"-etcd", https + ",unixs:///run/e.sock", "-etcd-ca", ca}, none, "", etcdFleetUser},
		{[]string{"-etcd", https, "-etcd-ca", ca, "-etcd-cert", cert, "-etcd-key", key, "-etcd-user", "fleet"}, withPw, "", "fleet"},
		{[]string{"-etcd", https, "-etcd-cert", cert, "-etcd-key", key}, none, "", etcdFleetUser},
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
			if tt.wantUser == etcdFleetUser {
				wantPw = etcdFleetPassword(testFleetToken)
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
	e := startSecuredEtcd(t, t.TempDir(), joinConfig{fleetToken: testFleetToken})
	ep := e.Endpoint()

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
	rootPassword, _, err := e.RootPassword()
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: etcdRoot, Password: rootPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if resp, err := root.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the etcd holds %v, %v after refused writes; want nothing", resp, err)
	}
	// The gateway works, with the replicas' user's token, on the
	// fleet's prefix alone.
	resp, err := http.Post(ep+"/v3/auth/authenticate", "application/json",
		strings.NewReader(`{"name":"`+etcdFleetUser+`","password":"`+etcdFleetPassword(testFleetToken)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var auth struct{ Token string }
	err = json.NewDecoder(resp.Body).Decode(&auth)
	resp.Body.Close()
	if err != nil || auth.Token == "" {
		t.Fatalf("gateway authenticate as root: %v", err)
	}
	if code := put("application/json", auth.Token, defaultFleetPrefix+"/with-token"); code != http.StatusOK {
		t.Errorf("gateway put with the replicas' token: HTTP %d", code)
	}
	if resp, err := root.Get(ctx, defaultFleetPrefix+"/with-token"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("gateway put with the replicas' token wrote %v, %v", resp, err)
	}
	if code := put("application/json", auth.Token, "/outside"); code == http.StatusOK {
		t.Error("gateway put outside the fleet's prefix with the replicas' token")
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

	// The peer port, which serves raft without etcd's auth, takes TLS
	// clients with this start's certificate alone (package embedded's
	// Hardened; TestHardenedPeerPortClosed there tries the certificate).
	if _, _, ok := e.PeerCert(); !ok {
		t.Error("the embedded etcd is not hardened: its peer port has no certificate")
	}
	if resp, err := http.Get("http://" + e.PeerAddr() + "/members"); err == nil {
		resp.Body.Close()
		t.Errorf("the peer port answered plain HTTP: HTTP %d", resp.StatusCode)
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

// Root's password is random, kept 0600 in the data directory, and
// derives from no fleet token: a restart logs in with it, and sets the
// replicas' user's password to the current token's, so that a new token
// takes over and the old one's password stops working. An etcd an earlier
// version secured, root's password derived from the token, is taken over
// with $LIVEREG_FLEET_TOKEN_PREVIOUS; a token it never knew is refused,
// without quoting it.
func TestEmbeddedEtcdRestartAndRotation(t *testing.T) {
	dir := t.TempDir()
	const next, stranger = "fleet-secret-next-0123456789", "fleet-secret-stranger-012345"
	for _, cfg := range []joinConfig{
		{fleetToken: testFleetToken}, // the first start turns auth on
		{fleetToken: testFleetToken}, // a restart logs in
		{fleetToken: next, fleetTrust: fleetTrust{fleetPrevious: []string{testFleetToken}}},
	} {
		startSecuredEtcd(t, dir, cfg).Close()
	}
	st, err := os.Stat(filepath.Join(dir, "root.password"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("root's password file: %v, %v; want mode 0600", st, err)
	}
	secured := startSecuredEtcd(t, dir, joinConfig{fleetToken: next})
	ep := secured.Endpoint()
	login := func(user, password string) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			Username: user, Password: password})
		if err == nil {
			_ = cli.Close()
		}
		return err
	}
	for tok, ok := range map[string]bool{next: true, testFleetToken: false} {
		if err := login(etcdFleetUser, etcdFleetPassword(tok)); (err == nil) != ok {
			t.Errorf("the replicas' login with the password of token %q: %v, want success %v", tok[:12], err, ok)
		}
		if err := login(etcdRoot, legacyRootPassword(tok)); err == nil {
			t.Errorf("root logs in with a password derived from token %q", tok[:12])
		}
	}
	secured.Close()

	// An etcd that an earlier version secured, root's password derived
	// from the token: taken over with the token, or refused.
	legacy := t.TempDir()
	e, err := startEtcd(ctxGuard(t), legacy, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.EnableAuth(ctxGuard(t), legacyRootPassword(testFleetToken)); err != nil {
		t.Fatal(err)
	}
	err = secureEtcd(ctxGuard(t), e, joinConfig{fleetToken: stranger, fleetPrefix: defaultFleetPrefix}, quiet())
	if err == nil || !strings.Contains(err.Error(), fleetTokenPreviousEnv) || strings.Contains(err.Error(), stranger) {
		t.Errorf("a token the etcd never knew: %v", err)
	}
	if err := secureEtcd(ctxGuard(t), e, joinConfig{fleetToken: next, fleetPrefix: defaultFleetPrefix,
		fleetTrust: fleetTrust{fleetPrevious: []string{testFleetToken}}}, quiet()); err != nil {
		t.Fatalf("taking over an etcd secured by an earlier version: %v", err)
	}
	e.Close()
}

// startSecuredEtcd starts the embedded etcd in dir as joinFleet does, on
// a fixed free port (etcd's HTTP gateway dials the listen address, so
// port 0 would leave it broken), and returns it; the test's end stops it,
// and so may the test (Close is idempotent).
func startSecuredEtcd(t *testing.T, dir string, cfg joinConfig) *embedded.Etcd {
	t.Helper()
	e, err := startEtcd(ctxGuard(t), dir, freeLoopbackURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if cfg.fleetPrefix == "" {
		cfg.fleetPrefix = defaultFleetPrefix
	}
	if err := secureEtcd(ctxGuard(t), e, cfg, quiet()); err != nil {
		t.Fatal(err)
	}
	return e
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

// A second -etcd-embedded over a directory whose etcd runs is refused at
// once, saying what to do, rather than waiting for etcd's own locks.
func TestEmbeddedEtcdDirectoryTaken(t *testing.T) {
	dir := t.TempDir()
	startSecuredEtcd(t, dir, joinConfig{fleetToken: testFleetToken})
	began := time.Now()
	e, err := startEtcd(ctxGuard(t), dir, freeLoopbackURL(t))
	if err == nil {
		e.Close()
		t.Fatal("a second etcd started in a directory whose etcd runs")
	}
	if !strings.Contains(err.Error(), "join it with -etcd") {
		t.Errorf("second start: %v, want it to say to join with -etcd", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the refusal took %v", took)
	}
}
