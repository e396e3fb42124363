package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

// testPair is a certificate the test CA issued and its key, in PEM.
type testPair struct {
	serial          *big.Int
	certPEM, keyPEM []byte
}

var testSerial atomic.Int64

// nextSerial is a serial number no other certificate of the test has.
func nextSerial() *big.Int { return big.NewInt(100 + testSerial.Add(1)) }

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: pool}
}

// issue makes a server certificate for loopback (127.0.0.1, ::1 and
// localhost), valid from notBefore to notAfter.
func (ca *testCA) issue(t *testing.T, notBefore, notAfter time.Time) testPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial := nextSerial()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "replica " + serial.String()},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return testPair{serial: serial,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// issueNow is issue, valid from an hour ago for a day.
func (ca *testCA) issueNow(t *testing.T) testPair {
	return ca.issue(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// writeFile replaces name with data, atomically, as a rotation should.
func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(name), ".tmp-"+filepath.Base(name))
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, name))
}

// write writes the pair to certFile and keyFile.
func (p testPair) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	writeFile(t, certFile, p.certPEM)
	writeFile(t, keyFile, p.keyPEM)
}

// servedSerial is the serial number of the certificate that the TLS
// server at addr presents to a client that trusts pool alone.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}
