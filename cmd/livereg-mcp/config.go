package main

// The command line: every flag, the config it fills, grouped by the part
// of the server each group configures, and its parsing. The checks of a
// group's values live with the part (checkFleet in fleet.go, checkEtcdAuth
// in etcdauth.go, checkFleetTrust in fleettrust.go, checkTLS in tls.go);
// parseArgs calls them.

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// tokensEnv is the environment variable read when -tokens is empty.
const tokensEnv = "LIVEREG_MCP_TOKENS"

// config is the command line, checked, with what the environment and the
// files it names gave. run reads it and never changes it.
type config struct {
	serveConfig
	tokenConfig
	logConfig
	joinConfig
	gcConfig
	tlsSettings // tls.go
}

// serveConfig is where and how MCP is served, and which routes.
type serveConfig struct {
	addr, path      string
	stdio           bool
	stateless       bool
	maxListens      int
	conformance     bool
	urlFile         string
	shutdownTimeout time.Duration
	listTTL         time.Duration
}

// tokenConfig is the clients' bearer tokens.
type tokenConfig struct {
	tokens          string // the token spec, from whichever source
	tokensFile      string
	tokensOnCmdline bool // the spec came from -tokens, which ps shows
}

// logConfig is the log and the metrics listener.
type logConfig struct {
	logLevel    slog.Level
	logJSON     bool
	metricsAddr string
	// onMetrics, if set, is called with the metrics URL once it listens.
	onMetrics func(url string)
}

// joinConfig is joining a fleet (fleet.go): etcd or etcdEmbedded is set.
type joinConfig struct {
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

// etcdAuth is how a replica authenticates to etcd (etcdauth.go).
type etcdAuth struct {
	ca, cert, key string      // -etcd-ca, -etcd-cert, -etcd-key
	user          string      // -etcd-user
	passwordFile  string      // -etcd-password-file
	password      string      // from the file or $LIVEREG_ETCD_PASSWORD
	tls           *tls.Config // from the three files; nil without them
}

// fleetTrust is what a replica believes of the fleet's records (package
// etcdfleet's doc, "What a replica trusts"; fleettrust.go).
type fleetTrust struct {
	fleetPeersFlag string   // -fleet-peers, as given
	fleetPeers     []string // parsed, or the default
	fleetPrevious  []string // from $LIVEREG_FLEET_TOKEN_PREVIOUS
}

// joins reports whether cfg joins a fleet.
func (cfg config) joins() bool { return cfg.etcd != "" || cfg.etcdEmbedded != "" }

func (c *serveConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8931", "TCP address to serve streamable HTTP on")
	fs.StringVar(&c.path, "path", "/mcp", "URL path of the MCP endpoint")
	fs.BoolVar(&c.stdio, "stdio", false, "serve one session over stdin/stdout instead of HTTP")
	fs.BoolVar(&c.stateless, "stateless", false, "serve HTTP without any session; the default endpoint already serves MCP 2026-07-28 clients beside the sessions of older ones, which -stateless serves one request at a time, without list_changed, logging/setLevel or a body's questions mid-call")
	fs.IntVar(&c.maxListens, "max-listen-streams", 1000, "cap on the open subscriptions/listen streams (negative: no cap)")
	fs.BoolVar(&c.conformance, "conformance", false, "also start the fixtures of the MCP conformance suite")
	fs.StringVar(&c.urlFile, "url-file", "", "write the endpoint URL to this file once listening")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 5*time.Second, "bound on the graceful shutdown")
	fs.DurationVar(&c.listTTL, "list-ttl", 0, "how long MCP 2026-07-28 clients may cache a listing (ttlMs); 0: not at all")
}

func (c *tokenConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.tokens, "tokens", "", "bearer tokens, "+tokenSpecHelp+" (default $"+tokensEnv+
		"); visible to every user of the machine in ps: prefer -tokens-file or $"+tokensEnv)
	fs.StringVar(&c.tokensFile, "tokens-file", "", "read the bearer tokens from this file, which only its owner may read or write (mode 0600)")
}

func (c *logConfig) flags(fs *flag.FlagSet) {
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.StringVar(&c.metricsAddr, "metrics", "", "also serve Prometheus metrics at http://ADDR/metrics (host:port; off if empty)")
}

func (c *joinConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.etcd, "etcd", "", "join the fleet over the etcd cluster at these client URLs (comma-separated)")
	fs.StringVar(&c.etcdEmbedded, "etcd-embedded", "", "start a single-node etcd with its data in this directory, and join the fleet over it")
	fs.StringVar(&c.etcdListen, "etcd-listen", defaultEtcdListen, "client URL of the -etcd-embedded etcd, on loopback (port 0: a free one)")
	fs.StringVar(&c.advertise, "advertise", "", "URL at which the other replicas reach this one's fleet endpoint (default: the listening address and "+mcpserve.DefaultFleetPath+", https with -tls-cert); http:// beyond loopback needs -fleet-insecure-network")
	fs.StringVar(&c.fleetToken, "fleet-token", "", "credential the replicas of a fleet share, at least 16 bytes (default $"+fleetTokenEnv+
		"); visible to every user of the machine in ps: prefer $"+fleetTokenEnv)
	fs.DurationVar(&c.fleetTTL, "fleet-ttl", etcdfleet.DefaultTTL, "lease TTL, whole seconds: how long a crashed replica's names stay claimed")
	fs.StringVar(&c.fleetPrefix, "fleet-prefix", defaultFleetPrefix, "etcd key prefix of the fleet, the same on every replica")
	fs.StringVar(&c.fleetPeersFlag, "fleet-peers", "", "hosts the replicas may advertise, comma-separated CIDRs or host names: "+
		"records naming another are ignored (default: any; with -etcd-embedded "+strings.Join(embeddedPeers, ",")+")")
	fs.StringVar(&c.replica, "replica", "", "this replica's name in the fleet, unique in it; it serves the tool "+replicaToolPrefix+"NAME (default: host name and process id)")
	a := &c.etcdAuth
	fs.StringVar(&a.ca, "etcd-ca", "", "with -etcd: PEM file of the CAs that sign the etcd servers' certificates (https:// or unixs:// endpoints)")
	fs.StringVar(&a.cert, "etcd-cert", "", "with -etcd: PEM file of this replica's client certificate for etcd (with -etcd-key)")
	fs.StringVar(&a.key, "etcd-key", "", "with -etcd: PEM file of the key of -etcd-cert")
	fs.StringVar(&a.user, "etcd-user", "", "with -etcd: log in to etcd as this user, with the password in $"+etcdPasswordEnv+
		" or -etcd-password-file (default: livereg-fleet, read and write on the fleet's prefix alone, with a password derived from the fleet token, as -etcd-embedded sets it)")
	fs.StringVar(&a.passwordFile, "etcd-password-file", "", "read -etcd-user's password from this file (mode 0600); there is no password flag: ps shows command lines")
}

// parseArgs parses the command line args, reading the environment with
// getenv and printing -h to stderr. Its errors never quote a value given:
// it may be a token.
func parseArgs(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("livereg-mcp", flag.ContinueOnError)
	// The flag package's own errors quote the argument they choke on,
	// which may be a token: they are discarded and replaced (flagError).
	fs.SetOutput(io.Discard)
	fs.Usage = func() { usage(fs, stderr) }
	cfg.serveConfig.flags(fs)
	cfg.tokenConfig.flags(fs)
	cfg.logConfig.flags(fs)
	cfg.joinConfig.flags(fs)
	cfg.gcConfig.flags(fs)
	cfg.tlsSettings.flags(fs)
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
	if err := checkServe(cfg.serveConfig); err != nil {
		return config{}, err
	}
	if err := readTokens(&cfg.tokenConfig, getenv); err != nil {
		return config{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkTLS(&cfg, set); err != nil {
		return config{}, err
	}
	if err := checkFleet(&cfg, set, getenv); err != nil {
		return config{}, err
	}
	if err := checkEtcdAuth(&cfg, set, getenv); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// checkServe checks the serving flags against each other.
func checkServe(c serveConfig) error {
	switch {
	case c.stateless && c.stdio:
		return errors.New("-stateless and -stdio are mutually exclusive: stdio has no HTTP sessions to drop")
	case c.maxListens == 0:
		return errors.New("-max-listen-streams must not be 0 (negative means no cap)")
	case c.listTTL < 0:
		return errors.New("-list-ttl must not be negative (0 means listings are not cached)")
	}
	return nil
}

// readTokens fills in the token spec from whichever source gave it: the
// file, the flag or the environment.
func readTokens(c *tokenConfig, getenv func(string) string) error {
	switch {
	case c.tokensFile != "" && c.tokens != "":
		return errors.New("-tokens and -tokens-file are mutually exclusive")
	case c.tokensFile != "":
		spec, err := readTokensFile(c.tokensFile)
		if err != nil {
			return err
		}
		c.tokens = spec
	case c.tokens == "":
		c.tokens = getenv(tokensEnv)
	default:
		c.tokensOnCmdline = true
	}
	return nil
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
The embedded etcd's auth is on, root's password random in DIR, the
replicas' user's derived from the fleet token; for an etcd of your own, see -etcd-ca, -etcd-cert, -etcd-key and
-etcd-user (its password in $%s).

TLS: -tls-cert and -tls-key serve HTTPS on the MCP and fleet endpoints,
reloaded when the files change or on SIGHUP; -fleet-ca names the CAs the
replicas' https endpoints are checked against. An http:// -advertise URL
beyond loopback needs -fleet-insecure-network.

Flags:
`, tokensEnv, tokenSpecHelp, minTokenLen, fleetTokenEnv, etcdPasswordEnv)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// newLogger is the log cfg asks for, written to w.
func newLogger(cfg logConfig, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logJSON {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}
