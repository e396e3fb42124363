package main

// TLS on the HTTP listener and on the fleet's hop, and the rule that keeps
// the hop off plain HTTP between machines.
//
// -tls-cert and -tls-key make the one listener, which serves the MCP
// endpoint (-path) and the fleet endpoint (/fleet) both, speak TLS only:
// version 1.2 at least, HTTP/1.1 as without TLS, so that a connection
// means what it means on a plain listener (mcpserve's per-peer connection
// cap, its drain at shutdown). The pair is loaded again when its files
// change (reload.go) or on SIGHUP; a bad new pair keeps the old one.
//
// The hop trusts the system's roots, through mcpserve's own client,
// unless -fleet-ca names the fleet's CAs: then its client (hopClient)
// trusts those alone, loaded again as the pair is.
//
// An -advertise URL that is http:// on a host other than loopback is
// refused unless -fleet-insecure-network says the network between the
// replicas is trusted (package etcdfleet's Config.InsecureNetwork, which
// Join enforces too); so is a default advertise URL that would be one.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/livereg/livereg/etcdfleet"
)

// hopMaxConnsPerPeer and hopHandshakeTimeout are those of mcpserve's own
// hop client, and of http.DefaultTransport, for the client -fleet-ca
// makes.
const (
	hopMaxConnsPerPeer  = 64
	hopHandshakeTimeout = 10 * time.Second
)

// tlsSettings is TLS on the listener and the hop, from the command line.
type tlsSettings struct {
	certFile, keyFile string // -tls-cert, -tls-key
	fleetCA           string // -fleet-ca
	insecureNetwork   bool   // -fleet-insecure-network

	certs *reloader[tls.Certificate] // nil without -tls-cert
	cas   *reloader[x509.CertPool]   // nil without -fleet-ca
}

func (c *tlsSettings) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.certFile, "tls-cert", "", "serve HTTPS on the MCP and fleet endpoints: PEM file of the certificate chain (with -tls-key); "+
		"loaded again when it changes or on SIGHUP")
	fs.StringVar(&c.keyFile, "tls-key", "", "PEM file of the private key of -tls-cert")
	fs.StringVar(&c.fleetCA, "fleet-ca", "", "PEM file of the CAs that sign the certificates of the fleet's https:// endpoints "+
		"(default: the system's roots); loaded again when it changes or on SIGHUP")
	fs.BoolVar(&c.insecureNetwork, "fleet-insecure-network", false, "allow an http:// advertise URL beyond loopback: "+
		"forwarded calls then cross the network in clear text, so set it only where that network is trusted")
}

// checkTLS validates the TLS flags of cfg and loads the files they name:
// a bad pair or CA file is an error here, before anything starts.
func checkTLS(cfg *config, set map[string]bool) error {
	c := &cfg.tlsSettings
	switch {
	case (c.certFile == "") != (c.keyFile == ""):
		return errors.New("-tls-cert and -tls-key go together: the certificate and its private key")
	case c.certFile != "" && cfg.stdio:
		return errors.New("-tls-cert serves HTTPS, and -stdio serves no HTTP")
	case !cfg.joins() && set["fleet-ca"]:
		return errors.New("-fleet-ca needs -etcd or -etcd-embedded")
	case !cfg.joins() && set["fleet-insecure-network"]:
		return errors.New("-fleet-insecure-network needs -etcd or -etcd-embedded")
	}
	var err error
	if certFile, keyFile := c.certFile, c.keyFile; certFile != "" {
		load := func() (*tls.Certificate, error) { return loadKeyPair(certFile, keyFile, time.Now()) }
		if c.certs, err = newReloader("the TLS certificate", load, certFile, keyFile); err != nil {
			return err
		}
	}
	if caFile := c.fleetCA; caFile != "" {
		load := func() (*x509.CertPool, error) { return loadCAs(caFile) }
		if c.cas, err = newReloader("the fleet's CAs", load, caFile); err != nil {
			return err
		}
	}
	return nil
}

// loadKeyPair loads the pair of -tls-cert and -tls-key, and refuses one
// whose certificate is not valid at now.
func loadKeyPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s and -tls-key %s: %w", certFile, keyFile, err)
	}
	leaf := pair.Leaf // LoadX509KeyPair parses it, unless GODEBUG=x509keypairleaf=0
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("-tls-cert %s: %w", certFile, err)
		}
		pair.Leaf = leaf
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("-tls-cert %s: the certificate expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("-tls-cert %s: the certificate is not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

// loadCAs loads the certificates of -fleet-ca.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-fleet-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-fleet-ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// on reports whether the listener serves TLS.
func (c tlsSettings) on() bool { return c.certs != nil }

// serveURL is endpointURL with https when the listener serves TLS.
func (c tlsSettings) serveURL(addr net.Addr, path string) (u string, wildcard bool) {
	u, wildcard = endpointURL(addr, path)
	if c.on() {
		u = "https" + strings.TrimPrefix(u, "http")
	}
	return u, wildcard
}

// listener is ln, speaking TLS if -tls-cert says so.
func (c tlsSettings) listener(ln net.Listener) net.Listener {
	if !c.on() {
		return ln
	}
	return tls.NewListener(ln, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.certs.get(), nil
		},
	})
}

// hopClient is the fleet's HTTP client with -fleet-ca: its https
// connections trust the fleet's CAs alone, as loaded at each dial. It
// dials the replicas directly, never through a proxy from the
// environment. nil without -fleet-ca: mcpserve's own client, which
// trusts the system's roots.
func (c tlsSettings) hopClient() *http.Client {
	if c.cas == nil {
		return nil
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: dialer.DialContext,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			raw, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			conn := tls.Client(raw, &tls.Config{
				MinVersion: tls.VersionTLS12,
				NextProtos: []string{"http/1.1"},
				ServerName: host,
				RootCAs:    c.cas.get(),
			})
			hctx, cancel := context.WithTimeout(ctx, hopHandshakeTimeout)
			defer cancel()
			if err := conn.HandshakeContext(hctx); err != nil {
				_ = raw.Close()
				return nil, err
			}
			return conn, nil
		},
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   hopMaxConnsPerPeer,
		MaxConnsPerHost:       hopMaxConnsPerPeer,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr}
}

// watch sends the reloaders' logs to log and loads their files again on
// each SIGHUP, until the returned stop is called. Without TLS files it
// does nothing, and SIGHUP keeps its default: the process ends.
func (c tlsSettings) watch(log *slog.Logger) (stop func()) {
	if c.certs == nil && c.cas == nil {
		return func() {}
	}
	if c.certs != nil {
		c.certs.setLogger(log)
	}
	if c.cas != nil {
		c.cas.setLogger(log)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				log.Info("SIGHUP: loading the TLS files again")
				if c.certs != nil {
					c.certs.reload()
				}
				if c.cas != nil {
					c.cas.reload()
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// checkAdvertiseScheme refuses what would send the hop in clear text
// beyond loopback without -fleet-insecure-network: an http:// -advertise
// on another host, or none with a non-loopback -addr IP and TLS off (a
// host name is looked at once it resolves, in joinFleet). With TLS on, an
// http:// -advertise is refused wherever it points: the listener speaks
// TLS only. Its errors quote no value.
func checkAdvertiseScheme(cfg *config) error {
	if cfg.advertise == "" {
		host, _, err := net.SplitHostPort(cfg.addr)
		if ip := net.ParseIP(host); err == nil && ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() &&
			!cfg.tlsSettings.on() && !cfg.insecureNetwork {
			return errors.New("-addr is not loopback and TLS is off: the fleet endpoint advertised would be http://, " +
				"and forwarded calls would cross the network in clear text; set -tls-cert and -tls-key, " +
				"or -fleet-insecure-network if the network between the replicas is trusted")
		}
		return nil
	}
	u, err := url.Parse(cfg.advertise)
	switch {
	case err != nil || u.Scheme != "http":
		return nil // validAdvertise refused the unparsable
	case cfg.tlsSettings.on():
		return errors.New("-advertise must be https:// with -tls-cert: the listener speaks TLS only")
	}
	return checkDerivedAdvertise(cfg, cfg.advertise, "-advertise")
}

// checkDerivedAdvertise refuses an http:// advertise URL beyond loopback
// without -fleet-insecure-network; what names where it came from.
func checkDerivedAdvertise(cfg *config, advertise, what string) error {
	u, err := url.Parse(advertise)
	if err != nil || u.Scheme != "http" || cfg.insecureNetwork || etcdfleet.LoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%s is http:// on a host beyond loopback: forwarded calls would cross the network in clear text; "+
		"serve TLS (-tls-cert, -tls-key) and advertise https://, or set -fleet-insecure-network if the network between the replicas is trusted", what)
}
