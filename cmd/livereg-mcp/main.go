// Command livereg-mcp is an MCP server whose tools and resources live in a
// livereg catalog: streamable HTTP at /mcp (default 127.0.0.1:8931) or stdio.
//
// It starts a few demo consumers (the tools echo, stats and whoami, and the
// resource livereg://about), and a demo of what livereg is for: the public
// tool fortune, owned by a consumer that the admin-only tools demo_crash
// (by stop, cancel, panic or drop) and demo_restart end and start again,
// so that a client sees it leave the listing, receives list_changed, and
// sees the restart take the name over; ops_report needs the role ops.
// With -conformance it also starts the fixture tools and resources that
// the official MCP conformance suite calls.
//
// Usage:
//
//	livereg-mcp [-addr host:port] [-path /mcp] [-stdio] [-stateless]
//	            [-max-listen-streams n] [-conformance]
//	            [-tokens-file file | -tokens spec] [-url-file file]
//	            [-metrics host:port] [-log-level level] [-log-json]
//	            [-shutdown-timeout d]
//	            [-etcd URL[,URL...] [-etcd-ca file] [-etcd-cert file -etcd-key file]
//	             [-etcd-user name [-etcd-password-file file]]
//	             | -etcd-embedded DIR [-etcd-listen URL]]
//	            [-advertise URL] [-fleet-token token] [-fleet-ttl d]
//	            [-fleet-prefix /prefix] [-replica name] [-fleet-peers list]
//
// For a wildcard -addr (0.0.0.0, [::]) it logs, and writes to -url-file,
// the loopback URL, which a client on the machine can use, and logs the
// machine's addresses. -metrics serves Prometheus metrics at /metrics.
//
// -stateless serves streamable HTTP without sessions, which the MCP
// revision 2026-07-28 needs: its clients discover the server with
// server/discover, send the protocol version with every request, and
// receive list_changed over subscriptions/listen (at most
// -max-listen-streams such streams at once). Clients of earlier revisions
// are served too, but without list_changed: they must list again. Without
// -stateless, a 2026-07-28 client falls back to the initialize handshake
// of 2025-11-25 and gets list_changed on its session's standalone stream.
//
// Bearer tokens come from -tokens-file (a file only its owner may read or
// write; it is refused otherwise), from -tokens, or, when neither is set,
// from the LIVEREG_MCP_TOKENS environment variable. Prefer the file or the
// variable: a command line, -tokens included, is visible to every user of
// the machine in ps. The spec is a list of TOKEN@SUBJECT[:ROLE[+ROLE...]]
// entries separated by commas or newlines; a file may hold '#' comment
// lines. A TOKEN is an RFC 6750 bearer token of at least 16 bytes (base64
// padding included), which never contains '@', so the first '@' of an
// entry ends the token. For example
//
//	LIVEREG_MCP_TOKENS='0bc3f1e7a9d24c58b6e2@alice:admin+ops,dG9rZW4tZm9yLWJvYg==@bob' livereg-mcp
//
// Errors about the spec or the command line never quote what was given,
// since it may be a token.
//
// With -etcd (an etcd cluster's client URLs) or -etcd-embedded (a
// directory, where it starts a single-node etcd listening on -etcd-listen,
// loopback only, for a fleet on one machine) the server is one replica of
// a fleet (package etcdfleet): route names are one namespace across the
// replicas, every replica lists every replica's routes, and a call for a
// route another replica serves is forwarded to it, at the URL it
// advertises (-advertise; by default the address it listens on, path
// /fleet), authenticated by the fleet token that every replica shares:
// $LIVEREG_FLEET_TOKEN, or -fleet-token, which ps shows. Every replica
// starts the same demo consumers; one replica wins each name, and the
// others take a name over when it is free again. Each replica also serves
// replica_NAME (-replica NAME), which says where a call ran.
//
// The embedded etcd runs with auth on: its one user, root, has a password
// derived from the fleet token, with which every replica that gives no
// -etcd-user logs in. It grants no CORS origin and serves only loopback
// Host names. For an etcd of one's own, -etcd-ca, -etcd-cert and -etcd-key
// set TLS, and -etcd-user an etcd user, whose password comes from
// $LIVEREG_ETCD_PASSWORD or -etcd-password-file, never from a flag.
//
// The fleet token also signs every record a replica writes in etcd, and a
// replica believes no other (package etcdfleet's "What a replica
// trusts"): a record that is not signed, or whose endpoint is not /fleet
// on a host -fleet-peers allows (any by default; loopback only with
// -etcd-embedded), is neither listed nor forwarded to. While the fleet
// rotates its token, $LIVEREG_FLEET_TOKEN_PREVIOUS (comma-separated)
// holds the tokens still accepted, never sent.
//
// Without tokens only public routes answer and the server refuses to listen
// on a non-loopback address; with tokens, a non-loopback listener answers
// only requests that carry one, initialize included. SIGINT or SIGTERM
// shuts it down gracefully, and the process then exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// version is reported to clients as serverInfo.version.
const version = "0.1.0"

// tokensEnv is the environment variable read when -tokens is empty.
const tokensEnv = "LIVEREG_MCP_TOKENS"

type config struct {
	addr, path      string
	stdio           bool
	stateless       bool
	maxListens      int
	conformance     bool
	tokens          string // the token spec, from whichever source
	tokensFile      string
	tokensOnCmdline bool // the spec came from -tokens, which ps shows
	urlFile         string
	logLevel        slog.Level
	logJSON         bool
	shutdownTimeout time.Duration
	metricsAddr     string
	// onMetrics, if set, is called with the metrics URL once it listens.
	onMetrics func(url string)

	// Joining a fleet (fleet.go): etcd or etcdEmbedded is set.
	etcd                string // -etcd: comma-separated client URLs
	etcdEmbedded        string // -etcd-embedded: the data directory
	etcdListen          string // the embedded etcd's client URL
	advertise           string // empty: derived from the listener
	fleetToken          string // from whichever source
	fleetTokenOnCmdline bool   // the token came from -fleet-token, which ps shows
	fleetTTL            time.Duration
	fleetPrefix         string
	replica             string
	etcdAuth            etcdAuth // etcdauth.go
	fleetTrust                   // -fleet-peers, previous tokens (fleettrust.go)
}

// joins reports whether cfg joins a fleet.
func (cfg config) joins() bool { return cfg.etcd != "" || cfg.etcdEmbedded != "" }

func parseArgs(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("livereg-mcp", flag.ContinueOnError)
	// The flag package's own errors quote the argument they choke on,
	// which may be a token: they are discarded and replaced (flagError).
	fs.SetOutput(io.Discard)
	fs.Usage = func() { usage(fs, stderr) }
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8931", "TCP address to serve streamable HTTP on")
	fs.StringVar(&cfg.path, "path", "/mcp", "URL path of the MCP endpoint")
	fs.BoolVar(&cfg.stdio, "stdio", false, "serve one session over stdin/stdout instead of HTTP")
	fs.BoolVar(&cfg.stateless, "stateless", false, "serve HTTP without sessions, as MCP 2026-07-28 clients need (legacy clients then get no list_changed)")
	fs.IntVar(&cfg.maxListens, "max-listen-streams", mcpserve.DefaultMaxListenStreams, "cap on the open subscriptions/listen streams (negative: no cap)")
	fs.BoolVar(&cfg.conformance, "conformance", false, "also start the fixtures of the MCP conformance suite")
	fs.StringVar(&cfg.tokens, "tokens", "", "bearer tokens, "+tokenSpecHelp+" (default $"+tokensEnv+
		"); visible to every user of the machine in ps: prefer -tokens-file or $"+tokensEnv)
	fs.StringVar(&cfg.tokensFile, "tokens-file", "", "read the bearer tokens from this file, which only its owner may read or write (mode 0600)")
	fs.StringVar(&cfg.urlFile, "url-file", "", "write the endpoint URL to this file once listening")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&cfg.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.StringVar(&cfg.metricsAddr, "metrics", "", "also serve Prometheus metrics at http://ADDR/metrics (host:port; off if empty)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", mcpserve.DefaultShutdownTimeout, "bound on the graceful shutdown")
	fs.StringVar(&cfg.etcd, "etcd", "", "join the fleet over the etcd cluster at these client URLs (comma-separated)")
	fs.StringVar(&cfg.etcdEmbedded, "etcd-embedded", "", "start a single-node etcd with its data in this directory, and join the fleet over it")
	fs.StringVar(&cfg.etcdListen, "etcd-listen", defaultEtcdListen, "client URL of the -etcd-embedded etcd, on loopback (port 0: a free one)")
	fs.StringVar(&cfg.advertise, "advertise", "", "URL at which the other replicas reach this one's fleet endpoint (default: the listening address and "+mcpserve.DefaultFleetPath+")")
	fs.StringVar(&cfg.fleetToken, "fleet-token", "", "credential the replicas of a fleet share, at least 16 bytes (default $"+fleetTokenEnv+
		"); visible to every user of the machine in ps: prefer $"+fleetTokenEnv)
	fs.DurationVar(&cfg.fleetTTL, "fleet-ttl", etcdfleet.DefaultTTL, "lease TTL, whole seconds: how long a crashed replica's names stay claimed")
	fs.StringVar(&cfg.fleetPrefix, "fleet-prefix", defaultFleetPrefix, "etcd key prefix of the fleet, the same on every replica")
	cfg.fleetTrust.flags(fs)
	fs.StringVar(&cfg.replica, "replica", "", "this replica's name in the fleet, unique in it; it serves the tool "+replicaToolPrefix+"NAME (default: host name and process id)")
	etcdAuthFlags(fs, &cfg.etcdAuth)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err // the flag package printed the usage
		}
		return config{}, flagError(fs, err)
	}
	if fs.NArg() > 0 {
		// Not quoted: a stray argument is often the second half of a
		// -tokens value that a space split.
		return config{}, fmt.Errorf("%d unexpected argument(s) after the flags (not shown: one may be a token); run with -h", fs.NArg())
	}
	switch {
	case cfg.stateless && cfg.stdio:
		return config{}, errors.New("-stateless and -stdio are mutually exclusive: stdio has no HTTP sessions to drop")
	case cfg.maxListens == 0:
		return config{}, errors.New("-max-listen-streams must not be 0 (negative means no cap)")
	}
	switch {
	case cfg.tokensFile != "" && cfg.tokens != "":
		return config{}, errors.New("-tokens and -tokens-file are mutually exclusive")
	case cfg.tokensFile != "":
		spec, err := readTokensFile(cfg.tokensFile)
		if err != nil {
			return config{}, err
		}
		cfg.tokens = spec
	case cfg.tokens == "":
		cfg.tokens = getenv(tokensEnv)
	default:
		cfg.tokensOnCmdline = true
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkFleet(&cfg, set, getenv); err != nil {
		return config{}, err
	}
	if err := checkEtcdAuth(&cfg, set, getenv); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// flagError rewrites a flag parsing error so that it names at most a flag
// this command defines, never the value or the unknown argument given.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if _, name, ok := strings.Cut(msg, "needs an argument: -"); ok && fs.Lookup(name) != nil {
		return fmt.Errorf("flag -%s needs an argument", name)
	}
	if _, rest, ok := strings.Cut(msg, " for flag -"); ok {
		if name, _, _ := strings.Cut(rest, ":"); fs.Lookup(name) != nil {
			return fmt.Errorf("invalid value for flag -%s (not shown: it may be a token); run with -h", name)
		}
	}
	if strings.HasSuffix(msg, "not defined: -etcd-password") {
		return fmt.Errorf("there is no -etcd-password: ps shows command lines; use $%s or -etcd-password-file", etcdPasswordEnv)
	}
	return errors.New("unknown flag or bad flag syntax (not shown: it may be a token); run with -h")
}

// usage prints -h.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, `Usage: livereg-mcp [flags]

Serves MCP over streamable HTTP (or stdio with -stdio) from a livereg catalog.

Bearer tokens: -tokens-file FILE (mode 0600), or $%s, or -tokens. A command
line, -tokens included, is visible to every user of the machine in ps: prefer
the file or the environment variable. The spec is
%s;
a TOKEN is an RFC 6750 bearer token of at least %d bytes.

A fleet of replicas: -etcd URL[,URL...] joins one over an etcd cluster;
-etcd-embedded DIR starts a single-node etcd on loopback and joins it, and
other replicas join with -etcd. Every replica needs the same fleet token,
in $%s (-fleet-token shows in ps).
The embedded etcd's auth is on, its root password derived from the fleet
token; for an etcd of your own, see -etcd-ca, -etcd-cert, -etcd-key and
-etcd-user (its password in $%s).

Flags:
`, tokensEnv, tokenSpecHelp, minTokenLen, fleetTokenEnv, etcdPasswordEnv)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logJSON {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// run serves until ctx ends. ready, if set, is called with the endpoint URL
// once the HTTP listener is open.
//
// A replica of a fleet listens before it joins, since it advertises where
// it listens, and joins before its catalog exists, since the catalog
// claims its names through the replica. It shuts down in the reverse
// order: the server, then the replica (which frees all its names in one
// revision), then its consumers, then the embedded etcd.
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(url string)) error {
	tokens, err := parseTokens(cfg.tokens)
	if err != nil {
		return err
	}
	var auth bindsec.Authenticator
	if tokens != nil {
		auth = tokens
		log.Info("bearer tokens configured", "count", tokens.Len())
		if cfg.tokensOnCmdline {
			log.Warn("bearer tokens were given with -tokens: every user of this machine can read them in ps; use -tokens-file or $" + tokensEnv)
		}
	}
	var ln net.Listener
	if !cfg.stdio {
		if ln, err = listen(ctx, cfg.addr, auth); err != nil {
			return err
		}
		defer ln.Close() // Serve closes it; this covers an early return
	}
	// The consumers live until run returns: their context is run's.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		fl    *fleet
		adopt *adopter
		demo  demoRoutes
	)
	defer func() {
		// The replica first: its Close kills the consumers that hold its
		// names and frees them in one revision, and ends a takeover that
		// waits for a session of an etcd that is gone. The adopter stops
		// before, so as not to start them again.
		adopt.stop()
		fl.leave()
		adopted := adopt.close()
		demo.stop(adopted)
		fl.stopEtcd()
		cancel()
	}()
	catCfg := catalog.Config{Authenticator: auth, Logger: log}
	if cfg.joins() {
		if cfg.fleetTokenOnCmdline {
			log.Warn("the fleet token was given with -fleet-token: every user of this machine can read it in ps; use $" + fleetTokenEnv)
		}
		if fl, err = joinFleet(ctx, cfg, ln.Addr(), log); err != nil {
			return err
		}
		catCfg.Claimer, catCfg.Remote = fl.rep, fl.rep.Remote()
		adopt = newAdopter(fl.rep, log)
	}
	cat, err := catalog.New(catCfg)
	if err != nil {
		return err
	}
	if err := demo.start(cctx, cfg, cat, fl, adopt, log); err != nil {
		return err
	}
	opts := mcpserve.Options{
		Name: "livereg-mcp", Version: version,
		Instructions:     "Tools and resources served from a livereg catalog.",
		Logger:           log,
		Path:             cfg.path,
		ShutdownTimeout:  cfg.shutdownTimeout,
		Stateless:        cfg.stateless,
		MaxListenStreams: cfg.maxListens,
	}
	if fl != nil {
		opts.Fleet = &mcpserve.Fleet{Peers: fl.rep, Token: cfg.fleetToken, PreviousTokens: cfg.fleetPrevious, Advertise: fl.advertise}
	}
	srv, err := mcpserve.New(cat, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	adopt.run()
	stats := cat.Stats()
	if cfg.stdio {
		log.Info("serving stdio", "tools", stats.Tools, "resources", stats.Resources)
		return srv.ServeStdio(ctx)
	}
	url, wildcard := endpointURL(ln.Addr(), cfg.path)
	if wildcard {
		log.Info("listening on every interface; from this machine use the loopback URL",
			"addr", ln.Addr().String(), "interfaces", interfaceAddrs())
	}
	log.Info("serving streamable HTTP", "addr", ln.Addr().String(), "url", url,
		"tools", stats.Tools, "resources", stats.Resources, "conformance", cfg.conformance, "stateless", cfg.stateless)
	metricsDone := make(chan error, 1)
	if cfg.metricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("metrics: %w", err)
		}
		murl, _ := endpointURL(mln.Addr(), "/metrics")
		if !isLoopback(mln.Addr()) {
			log.Warn("metrics are served beyond loopback without authentication", "addr", mln.Addr().String())
		}
		log.Info("serving metrics", "url", murl)
		go func() { metricsDone <- serveMetrics(ctx, mln, cat, srv, log, fl.collectors()...) }()
		if cfg.onMetrics != nil {
			cfg.onMetrics(murl)
		}
	} else {
		metricsDone <- nil
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
	err = <-errc
	if err != nil {
		// Serve failed on its own: the metrics listener must not outlive it.
		return err
	}
	if err := <-metricsDone; err != nil {
		log.Warn("metrics server failed", "err", err)
	}
	log.Info("stopped")
	return nil
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

func stopAll(ks []*catalog.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range ks {
		_ = k.Stop(ctx)
	}
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

func main() {
	cfg, err := parseArgs(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "livereg-mcp:", err)
		os.Exit(2)
	}
	// Logs go to stderr: with -stdio, stdout carries the protocol.
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("livereg-mcp failed", "err", err)
		stop()
		os.Exit(1)
	}
}
