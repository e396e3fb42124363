package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// serveHTTP serves srv on ln until ctx ends, with the metrics listener if
// cfg asks for one, and then reports the endpoint URL: to the log, to
// -url-file and to ready.
func serveHTTP(ctx context.Context, cfg config, ln net.Listener, srv *mcpserve.Server, cat *catalog.Catalog, fl *fleet, log *slog.Logger, ready func(url string)) error {
	url, wildcard := cfg.tlsSettings.serveURL(ln.Addr(), cfg.path)
	if wildcard {
		log.Info("listening on every interface; from this machine use the loopback URL",
			"addr", ln.Addr().String(), "interfaces", interfaceAddrs())
	}
	stats := cat.Stats()
	log.Info("serving streamable HTTP", "addr", ln.Addr().String(), "url", url, "tls", cfg.tlsSettings.on(),
		"tools", stats.Tools, "resources", stats.Resources, "conformance", cfg.conformance, "stateless", cfg.stateless)
	metricsDone, err := startMetrics(ctx, cfg.logConfig, cat, srv, fl, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	if cfg.urlFile != "" {
		if err := writeFileAtomic(cfg.urlFile, url+"\n"); err != nil {
			log.Error("cannot write the URL file", "file", cfg.urlFile, "err", err)
		}
	}
	if ready != nil {
		ready(url)
	}
	if err := <-errc; err != nil {
		// Serve failed on its own: the metrics listener must not outlive it.
		return err
	}
	if err := <-metricsDone; err != nil {
		log.Warn("metrics server failed", "err", err)
	}
	log.Info("stopped")
	return nil
}

// startMetrics serves the Prometheus metrics until ctx ends, if cfg asks
// for them; what the metrics server ends with comes on the channel, nil
// at once without one.
func startMetrics(ctx context.Context, cfg logConfig, cat *catalog.Catalog, srv *mcpserve.Server, fl *fleet, log *slog.Logger) (<-chan error, error) {
	done := make(chan error, 1)
	if cfg.metricsAddr == "" {
		done <- nil
		return done, nil
	}
	mln, err := net.Listen("tcp", cfg.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	murl, _ := endpointURL(mln.Addr(), "/metrics")
	if !isLoopback(mln.Addr()) {
		log.Warn("metrics are served beyond loopback without authentication", "addr", mln.Addr().String())
	}
	log.Info("serving metrics", "url", murl)
	go func() { done <- serveMetrics(ctx, mln, cat, srv, log, fl.collectors()...) }()
	if cfg.onMetrics != nil {
		cfg.onMetrics(murl)
	}
	return done, nil
}

// listen opens the HTTP listener at addr, refusing what the server
// refuses: a non-loopback address without bearer tokens (auth nil). The
// rule is mcpserve's, a plain function of the address and the
// authenticator, so that a refused address is never listened on even
// though the real server, whose catalog a replica of a fleet builds only
// after it listens, does not exist yet.
func listen(ctx context.Context, addr string, auth bindsec.Authenticator) (net.Listener, error) {
	if err := mcpserve.CheckListenAddress(ctx, addr, auth); err != nil {
		return nil, fmt.Errorf("%w (set -tokens-file or $%s, or listen on 127.0.0.1)", err, tokensEnv)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// Checked again on what was bound: a name may resolve differently now.
	if err := mcpserve.CheckExposure(ln.Addr(), auth); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%w (set -tokens-file or $%s, or listen on 127.0.0.1)", err, tokensEnv)
	}
	return ln, nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// endpointURL is the URL a client on this machine can use to reach a
// listener bound to addr. For a wildcard bind (0.0.0.0, [::]) that is the
// loopback address: the wildcard itself is no address to connect to, and
// the SDK's DNS-rebinding protection refuses a non-loopback Host header
// on a loopback connection. wildcard reports that case.
func endpointURL(addr net.Addr, path string) (url string, wildcard bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + addr.String() + path, false
	}
	// Go's wildcard listeners are dual-stack, so 127.0.0.1 reaches a
	// "[::]" bind as well as a "0.0.0.0" one.
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port)) + path, true
}

// interfaceAddrs lists the machine's addresses, for the log line of a
// wildcard bind.
func interfaceAddrs() []string {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// writeFileAtomic writes data so that a reader sees the whole file or none.
func writeFileAtomic(name, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".url-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(data); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), name)
}
