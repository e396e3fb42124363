package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/etcdfleet"
)

// The TLS flags: the pair goes together and loads at start, a bad,
// expired or not yet valid pair or CA file is refused, and so is an
// advertise URL that would send the hop in clear text beyond loopback,
// unless -fleet-insecure-network says the network is trusted. Loopback
// http, today's one-machine fleet, is accepted as it was.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "fleet CA")
	good := ca.issueNow(t)
	other := ca.issueNow(t)
	files := func(name string, data []byte) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, data, 0o600))
		return f
	}
	cert, key := files("cert.pem", good.certPEM), files("key.pem", good.keyPEM)
	otherKey := files("other-key.pem", other.keyPEM)
	expired := ca.issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	future := ca.issue(t, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	expCert, expKey := files("exp-cert.pem", expired.certPEM), files("exp-key.pem", expired.keyPEM)
	futCert, futKey := files("fut-cert.pem", future.certPEM), files("fut-key.pem", future.keyPEM)
	caFile, notPEM := files("ca.pem", ca.pem), files("not.pem", []byte("not a certificate\n"))
	withToken := func(k string) string {
		if k == fleetTokenEnv {
			return testFleetToken
		}
		return ""
	}
	etcd := []string{"-etcd", "http://127.0.0.1:2379"}
	tlsOn := []string{"-tls-cert", cert, "-tls-key", key}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	adv := func(u string) []string { return []string{"-advertise", u} }
	insecure := []string{"-fleet-insecure-network"}
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"TLS alone", tlsOn, ""},
		{"TLS in a fleet", join(etcd, tlsOn, []string{"-fleet-ca", caFile}), ""},
		{"loopback http", join(etcd, adv("http://127.0.0.1:8931/fleet")), ""},
		{"loopback http, IPv6", join(etcd, adv("http://[::1]:8931/fleet")), ""},
		{"loopback http, localhost", join(etcd, adv("http://localhost:8931/fleet")), ""},
		{"default advertise on loopback", etcd, ""},
		{"default advertise on a wildcard", join(etcd, []string{"-addr", "0.0.0.0:8931"}), ""},
		{"https beyond loopback", join(etcd, adv("https://10.0.0.5:8931/fleet")), ""},
		{"http beyond loopback, trusted", join(etcd, adv("http://10.0.0.5:8931/fleet"), insecure), ""},
		{"default advertise beyond loopback with TLS", join(etcd, []string{"-addr", "10.0.0.5:8931"}, tlsOn), ""},
		{"default advertise beyond loopback, trusted", join(etcd, []string{"-addr", "10.0.0.5:8931"}, insecure), ""},

		{"http beyond loopback", join(etcd, adv("http://10.0.0.5:8931/fleet")), "-advertise is http:// on a host beyond loopback"},
		{"http on a host name", join(etcd, adv("http://fleet.internal:8931/fleet")), "-fleet-insecure-network"},
		{"default advertise beyond loopback", join(etcd, []string{"-addr", "10.0.0.5:8931"}), "-addr is not loopback and TLS is off"},
		{"http advertise with TLS", join(etcd, adv("http://127.0.0.1:8931/fleet"), tlsOn), "must be https:// with -tls-cert"},
		{"cert without key", []string{"-tls-cert", cert}, "-tls-cert and -tls-key go together"},
		{"key without cert", []string{"-tls-key", key}, "-tls-cert and -tls-key go together"},
		{"TLS with stdio", join(tlsOn, []string{"-stdio"}), "-stdio serves no HTTP"},
		{"fleet CA outside a fleet", []string{"-fleet-ca", caFile}, "-fleet-ca needs -etcd"},
		{"trusted network outside a fleet", insecure, "-fleet-insecure-network needs -etcd"},
		{"mismatched pair", []string{"-tls-cert", cert, "-tls-key", otherKey}, "private key does not match"},
		{"missing cert", []string{"-tls-cert", filepath.Join(dir, "none.pem"), "-tls-key", key}, "none.pem"},
		{"key for cert", []string{"-tls-cert", key, "-tls-key", key}, "-tls-cert"},
		{"expired", []string{"-tls-cert", expCert, "-tls-key", expKey}, "the certificate expired at"},
		{"not yet valid", []string{"-tls-cert", futCert, "-tls-key", futKey}, "not valid before"},
		{"CA file without a certificate", join(etcd, []string{"-fleet-ca", notPEM}), "no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseArgs(tt.args, withToken, io.Discard)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, slices.Contains(tt.args, "-tls-cert"), cfg.tlsSettings.on())
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			assert.NotContains(t, err.Error(), testFleetToken)
			assert.NotContains(t, err.Error(), "10.0.0.5", "the error quotes a value given")
		})
	}
}

// A bad pair at start, and a non-loopback http advertise URL, exit 2 with
// the reason.
func TestTLSRefusalsExit2(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "fleet CA")
	a, b := ca.issueNow(t), ca.issueNow(t)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cert, a.certPEM)
	writeFile(t, key, b.keyPEM)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls-cert", cert, "-tls-key", key}, "private key does not match"},
		{[]string{"-etcd", "http://127.0.0.1:1", "-advertise", "http://10.0.0.5:8931/fleet"}, "-fleet-insecure-network"},
	} {
		cmd := exec.Command(os.Args[0], tt.args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", fleetTokenEnv+"="+testFleetToken)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%q: %s", tt.args, out)
		assert.Equal(t, 2, ee.ExitCode(), "%q: %s", tt.args, out)
		assert.Contains(t, string(out), tt.want)
	}
}

// A served connection negotiates TLS 1.2 at least: a client that offers
// no more than 1.1 is refused, even where GODEBUG brings the standard
// library's default minimum down to 1.0.
func TestTLSMinVersion(t *testing.T) {
	t.Setenv("GODEBUG", "tls10server=1")
	dir := t.TempDir()
	ca := newTestCA(t, "fleet CA")
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issueNow(t).write(t, cert, key)
	var cfg config
	cfg.certFile, cfg.keyFile = cert, key
	require.NoError(t, checkTLS(&cfg, nil))
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := cfg.tlsSettings.listener(raw)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	old := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	_, err = tls.Dial("tcp", ln.Addr().String(), old)
	require.ErrorContains(t, err, "protocol version")
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, conn.ConnectionState().Version, uint16(tls.VersionTLS12))
	_ = conn.Close()
}

// Where GODEBUG=x509keypairleaf=0 leaves the parsed leaf out of a loaded
// pair, the pair is still checked for its validity dates, and served with
// its leaf.
func TestLoadKeyPairWithoutLeaf(t *testing.T) {
	t.Setenv("GODEBUG", "x509keypairleaf=0")
	dir := t.TempDir()
	ca := newTestCA(t, "fleet CA")
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	good := ca.issueNow(t)
	good.write(t, cert, key)
	pair, err := loadKeyPair(cert, key, time.Now())
	require.NoError(t, err)
	require.NotNil(t, pair.Leaf)
	assert.Equal(t, good.serial.String(), pair.Leaf.SerialNumber.String())
	ca.issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)).write(t, cert, key)
	_, err = loadKeyPair(cert, key, time.Now())
	require.ErrorContains(t, err, "the certificate expired at")
}

// A default advertise URL that only the bound address shows to be beyond
// loopback (an -addr host name) is refused when the replica joins, before
// anything starts, unless TLS is on or the network is trusted; the trusted
// network reaches etcdfleet, which would refuse the URL too.
func TestDerivedAdvertise(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "fleet CA")
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issueNow(t).write(t, cert, key)
	withToken := func(k string) string {
		if k == fleetTokenEnv {
			return testFleetToken
		}
		return ""
	}
	bound := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8931}
	// A context already ended: a join that gets past the checks fails at
	// once, on etcd.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name    string
		args    []string
		refused bool
	}{
		{"plain", nil, true},
		{"trusted network", []string{"-fleet-insecure-network"}, false},
		{"TLS", []string{"-tls-cert", cert, "-tls-key", key}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseArgs(append([]string{"-etcd", "http://127.0.0.1:1", "-addr", "replica.example:8931"}, tt.args...), withToken, io.Discard)
			require.NoError(t, err)
			fl, err := joinFleet(ctx, cfg, bound, quiet())
			require.Error(t, err)
			assert.Nil(t, fl)
			if tt.refused {
				assert.ErrorContains(t, err, "the advertise URL derived from -addr is http:// on a host beyond loopback")
				return
			}
			assert.NotContains(t, err.Error(), "beyond loopback")
			assert.NotErrorIs(t, err, etcdfleet.ErrPlainHTTP)
		})
	}
}

// The hop's client trusts -fleet-ca alone, as loaded at each dial: a
// replica whose certificate another CA signs is refused until that CA is
// added to the file and the file loaded again; nothing else need restart.
func TestHopClientFleetCA(t *testing.T) {
	dir := t.TempDir()
	ca, next := newTestCA(t, "fleet CA"), newTestCA(t, "next fleet CA")
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, ca.pem)
	var cfg config
	cfg.fleetCA = caFile
	cfg.etcd = "http://127.0.0.1:2379" // -fleet-ca needs a fleet
	require.NoError(t, checkTLS(&cfg, map[string]bool{"fleet-ca": true}))
	hc := cfg.tlsSettings.hopClient()
	require.NotNil(t, hc)
	t.Cleanup(hc.CloseIdleConnections)

	pair := next.issueNow(t)
	served, err := tls.X509KeyPair(pair.certPEM, pair.keyPEM)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "peer")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{served}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)

	_, err = hc.Get(srv.URL)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "a certificate of a CA that -fleet-ca does not hold")

	// Both CAs in the file, as in a CA rotation; reload as SIGHUP does.
	writeFile(t, caFile, append(append([]byte{}, ca.pem...), next.pem...))
	cfg.cas.reload()
	resp, err := hc.Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "peer", string(body))
	assert.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
}
