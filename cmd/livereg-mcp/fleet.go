package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/etcdfleet/embedded"
	"github.com/livereg/livereg/mcpserve"
)

// fleetTokenEnv is the environment variable read when -fleet-token is
// empty.
const fleetTokenEnv = "LIVEREG_FLEET_TOKEN"

// Defaults of the fleet flags.
const (
	defaultFleetPrefix = "/livereg-mcp"
	defaultEtcdListen  = "http://127.0.0.1:2379"
)

// replicaToolPrefix names the tool each replica of a fleet serves under
// its own name (replica_<name>): a call to it on any replica shows where
// it ran.
const replicaToolPrefix = "replica_"

// maxReplicaName keeps replica_<name> within the 128 characters of an
// MCP tool name.
const maxReplicaName = 128 - len(replicaToolPrefix)

// etcdReadyTimeout bounds the start of the embedded etcd.
const etcdReadyTimeout = 30 * time.Second

// fleetFlags are the flags that mean nothing without -etcd or
// -etcd-embedded.
var fleetFlags = []string{"advertise", "fleet-token", "fleet-ttl", "fleet-prefix", "replica", "etcd-listen", "fleet-peers"}

// checkFleet validates the fleet flags of cfg, given the set of flags the
// command line named, and fills in their defaults. Its errors never quote
// a value: a misplaced argument may be a token.
func checkFleet(cfg *config, set map[string]bool, getenv func(string) string) error {
	if cfg.etcd == "" && cfg.etcdEmbedded == "" {
		for _, name := range fleetFlags {
			if set[name] {
				return fmt.Errorf("-%s needs -etcd or -etcd-embedded", name)
			}
		}
		return nil
	}
	switch {
	case cfg.etcd != "" && cfg.etcdEmbedded != "":
		return errors.New("-etcd and -etcd-embedded are mutually exclusive: a replica that embeds etcd joins it")
	case set["etcd-listen"] && cfg.etcdEmbedded == "":
		return errors.New("-etcd-listen needs -etcd-embedded")
	case cfg.stdio:
		return errors.New("-stdio cannot join a fleet: the other replicas forward calls to it over HTTP")
	case cfg.path == mcpserve.DefaultFleetPath:
		return fmt.Errorf("-path %s is where replicas forward calls to each other; choose another path", mcpserve.DefaultFleetPath)
	case cfg.fleetTTL < time.Second || cfg.fleetTTL%time.Second != 0:
		return errors.New("-fleet-ttl must be a whole number of seconds, at least 1s")
	case !validPrefix(cfg.fleetPrefix):
		return errors.New("-fleet-prefix must begin with '/', not end with one, and hold no spaces, control characters or empty segments")
	}
	if cfg.etcd != "" {
		for ep := range strings.SplitSeq(cfg.etcd, ",") {
			if !validEtcdEndpoint(strings.TrimSpace(ep)) {
				return errors.New("-etcd takes a comma-separated list of etcd client URLs: http://host:port, https://host:port, unix://path")
			}
		}
	} else if !loopbackURL(cfg.etcdListen) {
		return errors.New("-etcd-listen must be http://IP:PORT on a loopback address (port 0 picks a free one): the embedded etcd serves plain HTTP")
	}
	if cfg.advertise != "" && !validAdvertise(cfg.advertise) {
		return errors.New("-advertise must be an http:// or https:// URL with a host and a path, such as https://10.0.0.5:8931" + mcpserve.DefaultFleetPath)
	}
	if cfg.replica == "" {
		cfg.replica = defaultReplicaName()
	} else if len(cfg.replica) > maxReplicaName || toolNameChars(cfg.replica) != cfg.replica {
		return fmt.Errorf("-replica must be 1 to %d characters, each a letter, a digit, '_', '-' or '.'", maxReplicaName)
	}
	switch {
	case cfg.fleetToken == "":
		cfg.fleetToken = getenv(fleetTokenEnv)
	default:
		cfg.fleetTokenOnCmdline = true
	}
	switch {
	case cfg.fleetToken == "":
		return fmt.Errorf("joining a fleet needs the fleet token, the same on every replica: set $%s (or -fleet-token)", fleetTokenEnv)
	case !isBearerToken(cfg.fleetToken):
		return errors.New("the fleet token is not a bearer token (letters, digits, -._~+/ and trailing '=' only)")
	case len(cfg.fleetToken) < mcpserve.MinFleetTokenBytes:
		return fmt.Errorf("the fleet token is shorter than %d bytes", mcpserve.MinFleetTokenBytes)
	}
	if err := checkAdvertiseScheme(cfg); err != nil {
		return err
	}
	return checkFleetTrust(cfg, getenv)
}

func validPrefix(p string) bool {
	return len(p) > 1 && p[0] == '/' && p[len(p)-1] != '/' && !strings.Contains(p, "//") &&
		!strings.ContainsFunc(p, isSpaceOrControl)
}

// validEtcdEndpoint accepts what the etcd client dials.
func validEtcdEndpoint(ep string) bool {
	u, err := url.Parse(ep)
	if err != nil || u.User != nil || u.RawQuery != "" {
		return false
	}
	switch u.Scheme {
	case "http", "https":
		return u.Hostname() != "" && u.Port() != "" && (u.Path == "" || u.Path == "/")
	case "unix", "unixs":
		return u.Host != "" || u.Path != ""
	}
	return false
}

// loopbackURL accepts http://IP:PORT with a loopback IP.
func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Path != "" && u.Path != "/" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	_, perr := strconv.ParseUint(u.Port(), 10, 16)
	return ip != nil && ip.IsLoopback() && perr == nil
}

func validAdvertise(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		strings.HasPrefix(u.Path, "/") && u.User == nil && u.RawQuery == "" && u.Fragment == "" &&
		!strings.ContainsFunc(s, isSpaceOrControl)
}

// defaultReplicaName is the host name and the process id, in the
// characters a tool name allows.
func defaultReplicaName() string {
	host, _ := os.Hostname()
	name := toolNameChars(host)
	if name == "" {
		name = "replica"
	}
	name = fmt.Sprintf("%s-%d", name, os.Getpid())
	if len(name) > maxReplicaName {
		name = name[len(name)-maxReplicaName:]
	}
	return name
}

// toolNameChars returns s with every character a tool name does not allow
// replaced by '-'.
func toolNameChars(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '-'
	}, s)
}

// fleet is this process's membership in a fleet: the replica and, with
// -etcd-embedded, the etcd it runs. Its methods accept a nil fleet (not in
// one) and do nothing then.
type fleet struct {
	rep       *etcdfleet.Replica
	etcd      *embedded.Etcd // nil unless embedded
	advertise string
	log       *slog.Logger
}

// joinFleet starts the embedded etcd if cfg asks for one, and joins the
// fleet, advertising the fleet path of the listener at addr unless
// -advertise says otherwise. On error nothing is left running.
func joinFleet(ctx context.Context, cfg config, addr net.Addr, log *slog.Logger) (*fleet, error) {
	f := &fleet{log: log, advertise: cfg.advertise}
	if f.advertise == "" {
		var wildcard bool
		f.advertise, wildcard = cfg.tlsSettings.serveURL(addr, mcpserve.DefaultFleetPath)
		if wildcard {
			log.Warn("advertising a loopback URL to the fleet: replicas on other machines cannot forward calls to it; set -advertise", "advertise", f.advertise)
		}
		if err := checkDerivedAdvertise(&cfg, f.advertise, "the advertise URL derived from -addr"); err != nil {
			return nil, err
		}
	}
	endpoints := splitEndpoints(cfg.etcd)
	if cfg.etcdEmbedded != "" {
		e, err := startEtcd(ctx, cfg.etcdEmbedded, cfg.etcdListen)
		if err != nil {
			return nil, err
		}
		f.etcd = e
		go func() {
			// Err is closed when the etcd stops.
			for err := range e.Err() {
				log.Error("embedded etcd failed", "err", err)
			}
		}()
		client := e.Endpoint()
		endpoints = []string{client}
		if err := secureEtcd(ctx, e, cfg.joinConfig, log); err != nil {
			f.stopEtcd()
			return nil, err
		}
		log.Info("embedded etcd serving; other replicas join with -etcd "+client, "client_url", client, "dir", cfg.etcdEmbedded)
	}
	jctx, cancel := context.WithTimeout(ctx, etcdfleet.DefaultOpTimeout)
	defer cancel()
	user, password := cfg.etcdCredentials()
	fc := fleetConfig(cfg, endpoints, f.advertise)
	fc.TLS, fc.Username, fc.Password = cfg.etcdAuth.tls, user, password
	rep, err := etcdfleet.Join(jctx, fc)
	if err != nil {
		f.stopEtcd()
		return nil, explainAuthFailure(cfg, err)
	}
	f.rep = rep
	log.Info("joined the fleet", "replica", rep.Name(), "advertise", f.advertise,
		"etcd", strings.Join(endpoints, ","), "prefix", cfg.fleetPrefix, "ttl", cfg.fleetTTL)
	return f, nil
}

func splitEndpoints(list string) []string {
	var out []string
	for ep := range strings.SplitSeq(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

// startEtcd starts the single-node etcd of -etcd-embedded, with its data
// in dir, serving clients at listen (a loopback URL; port 0 picks one),
// hardened (package embedded's Config.Hardened): no CORS grant, loopback
// Host names only, mutual TLS on the peer port. Auth is secureEtcd's.
func startEtcd(ctx context.Context, dir, listen string) (*embedded.Etcd, error) {
	e, err := embedded.Start(ctx, embedded.Config{
		Dir: dir, Name: "livereg-mcp", ClientURL: listen, Hardened: true,
		// A single member has no peer to hear from: short ticks cost
		// nothing, and etcd raises a lease TTL below 1.5 election
		// timeouts, which would make -fleet-ttl 1s mean 2s with the
		// default 1 s elections.
		TickMs: 50, ElectionMs: 500,
		// bcrypt's cost slows the guessing of weak passwords; root's is
		// 256 bits from an HMAC, which no cost makes weaker or stronger,
		// so the lowest (bcrypt.MinCost) spares each login the default's
		// tens of milliseconds of CPU, which the etcd that keeps the
		// leases alive shares with the logins of every replica.
		BcryptCost:   4,
		ReadyTimeout: etcdReadyTimeout,
	})
	if errors.Is(err, embedded.ErrLocked) {
		return nil, errors.New("embedded etcd: another process runs an etcd in the -etcd-embedded directory; join it with -etcd, or choose another directory")
	}
	return e, err
}

// leave leaves the fleet: the replica's Close kills its consumers and
// revokes its lease, so that all its names are free fleet-wide in one
// revision. An etcd that does not answer within etcdfleet.DefaultOpTimeout
// leaves the names to the lease's expiry.
func (f *fleet) leave() {
	if f == nil || f.rep == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdfleet.DefaultOpTimeout)
	defer cancel()
	if err := f.rep.Close(ctx); err != nil {
		f.log.Warn("leaving the fleet: its names go when the lease expires", "err", err)
		return
	}
	f.log.Info("left the fleet", "replica", f.rep.Name())
}

// stopEtcd stops the embedded etcd, if any, once the replica has left.
func (f *fleet) stopEtcd() {
	if f == nil || f.etcd == nil {
		return
	}
	f.etcd.Close()
	f.log.Info("embedded etcd stopped")
}

// startReplicaTool starts the tool replica_<name>, which says which
// replica served it: listed on every replica, served by this one alone.
// Its name taken means another replica goes by this one's name, which
// would make each take the other's routes for its own.
func (f *fleet) startReplicaTool(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
	name := f.rep.Name()
	k, err := cat.StartTool(ctx, catalog.Tool{
		Name: replicaToolPrefix + name, Title: "Replica " + name,
		Description: "Says which replica served the call: replica " + name + ". Listed on every replica of the fleet; " +
			"a call on another replica is forwarded to this one.",
	}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.TextResult(fmt.Sprintf("replica %s served this call (pid %d, fleet endpoint %s)", name, os.Getpid(), f.advertise)), nil
	})
	if errors.Is(err, catalog.ErrDuplicate) {
		return nil, fmt.Errorf("another replica of the fleet is named %s, or this replica's previous run has not expired yet (within -fleet-ttl); "+
			"give each replica its own -replica: %w", name, err)
	}
	return k, err
}
