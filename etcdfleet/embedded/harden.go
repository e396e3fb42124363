package embedded

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// The peer certificate and key of a hardened etcd, in its data directory.
const (
	peerCertFile = "peer.crt"
	peerKeyFile  = "peer.key"
)

// noOrigin is a hardened etcd's only CORS origin: etcd grants every origin
// when the list is empty, so it gets one that no browser sends (a
// serialized origin holds no space), and grants none.
const noOrigin = "the embedded etcd grants no origin"

// harden keeps ecfg's etcd, serving clients at client, to its own
// fleet. Browsers: no CORS grant, and only requests whose Host is a
// loopback name (etcd compares the Host header without its port), so that
// a page that rebinds its DNS name to 127.0.0.1 is refused. Other local
// processes: the peer port, which a single member never dials but must
// listen on, serves raft messages and lease renewals without etcd's auth,
// so it takes TLS connections only from a client certificate that this
// start makes and keeps in the data directory (mode 0600 in a 0700
// directory). Cost: one ECDSA key and certificate per start.
func harden(ecfg *embed.Config, client *url.URL) error {
	ecfg.CORS = map[string]struct{}{noOrigin: {}}
	hosts := map[string]struct{}{"localhost": {}, "127.0.0.1": {}, "::1": {}, "[::1]": {}}
	if h := client.Hostname(); h != "" {
		hosts[h] = struct{}{}
		if strings.Contains(h, ":") {
			hosts["["+h+"]"] = struct{}{} // a Host without a port keeps its brackets
		}
	}
	ecfg.HostWhitelist = hosts

	cert, key, err := writePeerCert(ecfg.Dir, client.Hostname())
	if err != nil {
		return fmt.Errorf("peer certificate: %w", err)
	}
	ecfg.PeerTLSInfo = transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: cert, ClientCertAuth: true}
	for _, urls := range [][]url.URL{ecfg.ListenPeerUrls, ecfg.AdvertisePeerUrls} {
		for i := range urls {
			urls[i].Scheme = "https"
		}
	}
	ecfg.InitialCluster = ecfg.InitialClusterFromName(ecfg.Name)
	return nil
}

// PeerCert returns the files of the certificate and key that a hardened
// etcd's peer port requires of its clients, and ok false if the etcd is
// not hardened. Whoever reads them can speak raft to the etcd.
func (e *Etcd) PeerCert() (cert, key string, ok bool) {
	if !e.hardened {
		return "", "", false
	}
	return filepath.Join(e.dir, peerCertFile), filepath.Join(e.dir, peerKeyFile), true
}

// writePeerCert writes a new self-signed certificate for host, its own CA,
// and its key into dir, replacing the previous start's.
func writePeerCert(dir, host string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "embedded etcd peer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, peerCertFile), filepath.Join(dir, peerKeyFile)
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, nil
}
