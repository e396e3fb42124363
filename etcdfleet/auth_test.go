package etcdfleet_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/etcdfleet/embedded"
)

const testPassword = "s3cret-pass-word-0123"

func TestValidateAuth(t *testing.T) {
	tlsCfg := &tls.Config{}
	for _, tt := range []struct {
		name    string
		cfg     etcdfleet.Config
		wantErr string // "" for valid
	}{
		{"user and password", etcdfleet.Config{Username: "fleet", Password: testPassword}, ""},
		{"TLS https", etcdfleet.Config{Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}, TLS: tlsCfg}, ""},
		{"TLS unixs", etcdfleet.Config{Endpoints: []string{"unixs:///run/etcd.sock"}, TLS: tlsCfg}, ""},
		{"https without TLS: system roots", etcdfleet.Config{Endpoints: []string{"https://10.0.0.1:2379"}}, ""},
		{"TLS and credentials", etcdfleet.Config{Endpoints: []string{"https://10.0.0.1:2379"}, TLS: tlsCfg, Username: "u", Password: testPassword}, ""},

		{"password without user", etcdfleet.Config{Password: testPassword}, "a Password without a Username"},
		{"user without password", etcdfleet.Config{Username: "fleet"}, "a Username without a Password"},
		{"user not printable", etcdfleet.Config{Username: "a\nb", Password: testPassword}, "Username is not printable"},
		{"TLS with http", etcdfleet.Config{TLS: tlsCfg}, "every endpoint must be https:// or unixs://"},
		{"TLS with unix", etcdfleet.Config{Endpoints: []string{"unix:///run/etcd.sock"}, TLS: tlsCfg}, "every endpoint must be https"},
		{"TLS with one http of two", etcdfleet.Config{Endpoints: []string{"https://10.0.0.1:2379", "http://10.0.0.2:2379"}, TLS: tlsCfg}, "endpoint \"http://10.0.0.2:2379\" is http"},
	} {
		cfg := tt.cfg
		if cfg.Endpoints == nil {
			cfg.Endpoints = []string{"http://127.0.0.1:2379"}
		}
		cfg.Prefix, cfg.Token = prefix, fleetToken
		err := cfg.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (!errors.Is(err, etcdfleet.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want ErrInvalidConfig saying %q", tt.name, err, tt.wantErr)
		case err != nil && strings.Contains(err.Error(), testPassword):
			t.Errorf("%s: the error quotes the password: %v", tt.name, err)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	pki := newPKI(t)
	if c, err := etcdfleet.TLSFiles(pki.ca, "", ""); err != nil || c.RootCAs == nil {
		t.Errorf("TLSFiles(ca) = %v, %v; want a config trusting the CA", c, err)
	}
	if c, err := etcdfleet.TLSFiles(pki.ca, pki.cert, pki.key); err != nil || c.GetClientCertificate == nil {
		t.Errorf("TLSFiles(ca, cert, key) = %v, %v; want a client certificate", c, err)
	}
	for _, tt := range []struct{ ca, cert, key, want string }{
		{pki.ca, pki.cert, "", "both files or neither"},
		{pki.ca, "", pki.key, "both files or neither"},
		{filepath.Join(t.TempDir(), "missing.pem"), "", "", "TLS files"},
		{pki.key, "", "", "TLS files"}, // not a certificate
		{pki.ca, pki.cert, pki.ca, "TLS files"},
	} {
		if _, err := etcdfleet.TLSFiles(tt.ca, tt.cert, tt.key); !errors.Is(err, etcdfleet.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("TLSFiles(%s, %s, %s) = %v, want ErrInvalidConfig saying %q", tt.ca, tt.cert, tt.key, err, tt.want)
		}
	}
}

// A cluster served over TLS: Join with its CA works; without it the
// handshake fails, and Join gives ErrUnavailable when its ctx ends, with
// and without credentials to send.
func TestJoinTLS(t *testing.T) {
	pki := newPKI(t)
	ep := startEtcdTLS(t, pki.cert, pki.key)
	tlsCfg, err := etcdfleet.TLSFiles(pki.ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	r := newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, TTL: time.Second, Replica: "tls", Token: fleetToken, TLS: tlsCfg}))
	r.mustStart(t, lifeFor(t), "over-tls")

	for _, creds := range []bool{false, true} {
		cfg := etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Replica: "untrusting", Token: fleetToken, TLS: &tls.Config{}}
		if creds {
			cfg.Username, cfg.Password = "root", testPassword
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := etcdfleet.Join(ctx, cfg)
		took := time.Since(start)
		cancel()
		switch {
		case !errors.Is(err, etcdfleet.ErrUnavailable):
			t.Errorf("join without the CA (credentials %v) = %v, want ErrUnavailable", creds, err)
		case took > 3*time.Second: // the ctx's 1 s, not OpTimeout's 5 s
			t.Errorf("join without the CA (credentials %v) took %v, with a 1 s ctx", creds, took)
		}
	}
}

// A cluster with auth on: the right password joins, a wrong one is
// ErrAuthFailed without the password in the error, and none is refused.
func TestJoinUserPassword(t *testing.T) {
	// bcrypt's lowest cost: at the default, each login's check takes the
	// CPU for long enough, under the race detector, that 1 s leases expire.
	ep := startEtcdWith(t, embedded.Config{BcryptCost: 4}).Endpoint()
	ctx := ctxFor(t)
	admin := client(t, ep)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", testPassword); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		// A user of the prefix alone, as the package doc describes it.
		func() error { _, err := admin.UserAdd(ctx, "fleet", testPassword); return err },
		func() error { _, err := admin.RoleAdd(ctx, "fleet"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "fleet", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "fleet", "fleet"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, TTL: time.Second, Replica: "authed", Token: fleetToken, Username: "root", Password: testPassword}
	r := newReplicaOf(t, joinConfig(t, cfg))
	r.mustStart(t, lifeFor(t), "authed-tool")
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Username: "root", Password: testPassword, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if got := holder(t, root, toolKey("authed-tool")); got != "authed" {
		t.Errorf("authed-tool held by %q, want the replica that joined with the password", got)
	}

	user := cfg
	user.Replica, user.Username = "user", "fleet"
	u := newReplicaOf(t, joinConfig(t, user))
	u.mustStart(t, lifeFor(t), "user-tool")
	if got := holder(t, root, toolKey("user-tool")); got != "user" {
		t.Errorf("user-tool held by %q, want the replica that joined as a user of the prefix", got)
	}

	wrong := cfg
	wrong.Replica, wrong.Password = "wrong", testPassword+"x"
	_, err = etcdfleet.Join(ctx, wrong)
	if !errors.Is(err, etcdfleet.ErrAuthFailed) || strings.Contains(err.Error(), wrong.Password) {
		t.Errorf("join with a wrong password = %v, want ErrAuthFailed without the password", err)
	}
	anon := cfg
	anon.Replica, anon.Username, anon.Password = "anon", "", ""
	if r, err := etcdfleet.Join(ctx, anon); err == nil {
		_ = r.Close(ctx)
		t.Error("join without credentials succeeded on a cluster with auth on")
	}
}

// pki is a CA and one certificate it signed, for the loopback names,
// usable by a server and a client, in PEM files.
type pki struct{ ca, cert, key string }

func newPKI(t testing.TB) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdfleet test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ""},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{p.ca, "CERTIFICATE", caDER}, {p.cert, "CERTIFICATE", der}, {p.key, "PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
