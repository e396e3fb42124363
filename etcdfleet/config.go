package etcdfleet

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
)

// DefaultTTL is the lease TTL of a zero Config: how long a crashed
// replica's names stay claimed.
const DefaultTTL = 5 * time.Second

// DefaultOpTimeout bounds one release, and the grant of a new session, when
// Config.OpTimeout is zero.
const DefaultOpTimeout = 5 * time.Second

// MaxKeyBytes is the longest key a claim may write, prefix included. A name
// whose escaped key is longer is refused with catalog.ErrInvalidName: etcd
// would take it, but every watcher of the prefix would carry it.
const MaxKeyBytes = 8192

// maxPrefixBytes and maxReplicaBytes keep the per-key overhead small.
const (
	maxPrefixBytes  = 512
	maxReplicaBytes = 256
)

// Config configures a Replica. Endpoints, Prefix and Token are required.
type Config struct {
	// Endpoints are the etcd client URLs: http://host:port,
	// https://host:port, unix://path or unixs://path.
	Endpoints []string
	// Prefix is the fleet's root key, shared by every replica of one
	// catalog: it begins with "/", does not end with one, and holds
	// printable UTF-8 only.
	Prefix string
	// TTL is the lease TTL, in whole seconds, at least one: how long a
	// crashed or partitioned replica's names stay claimed. The server may
	// raise it (to at least 1.5 election timeouts). 0 means DefaultTTL.
	TTL time.Duration
	// OpTimeout bounds each release and each attempt to open a session
	// after a loss. 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// Cap, if positive, caps the fleet's claims per kind: at most Cap
	// tools and at most Cap resources, over every replica (the package
	// doc's "The fleet cap" says how a slot is counted and when it is
	// freed). Every replica of one prefix must use the same Cap: each
	// enforces its own. 0 means no cap.
	Cap int
	// Replica names this replica in the claims it writes; empty means the
	// host name, the process id and a random suffix.
	Replica string
	// Advertise is this replica's internal endpoint, recorded in every
	// claim it writes: the URL (http or https, with a path) at which the
	// other replicas forward calls for its routes, such as package
	// mcpserve's Server.FleetHandler mounted at /fleet. Empty means its
	// routes are listed fleet-wide but not forwarded to ([Replica.Peer]
	// does not locate them). A plain http URL must name a loopback host
	// (127.0.0.0/8, ::1 or localhost) unless InsecureNetwork is set: the
	// hop would otherwise cross a network in clear text by accident.
	Advertise string
	// InsecureNetwork allows an http Advertise URL on a host other than
	// loopback: set it only where the network between the replicas is
	// trusted, as a sniffer on it reads every forwarded call.
	InsecureNetwork bool
	// Logger receives the etcd client's logs; nil discards them.
	Logger *zap.Logger

	// TLS, if set, is the client's TLS configuration for a cluster served
	// over https:// or unixs:// (every endpoint must then be one): the
	// CAs it trusts, and its own certificate if the cluster asks for one.
	// [TLSFiles] builds one from PEM files. Nil with https endpoints means
	// the system's roots and no client certificate.
	TLS *tls.Config
	// Username and Password are an etcd user's credentials, both or
	// neither. With them Join logs in before it lists anything (one more
	// round trip, and a bcrypt check on the server), the client logs in
	// again when its token expires, and a refusal is ErrAuthFailed. The
	// user needs a role with readwrite permission on the keys under
	// Prefix. No error or log of this package quotes the password.
	Username, Password string

	// Token is the fleet token, the same on every replica (package
	// mcpserve's Fleet.Token): at least MinTokenBytes. It never leaves the
	// process: the fleet authority's Ed25519 key is derived from it, which
	// enrolls this replica's own key (Key) at Join, and the follower
	// believes only records signed by an enrolled key (the package doc's
	// "Who a replica is"). Required.
	Token string
	// PreviousTokens are other fleet tokens whose authorities' enrollments
	// and revocations are accepted, never used to sign one: the package
	// doc's "Rotation" says how a fleet rotates its token without
	// downtime with them. Each is at least MinTokenBytes.
	PreviousTokens []string

	// Key is this replica's own Ed25519 private key, which signs its
	// records and (Replica.Sign) its forwarded requests; nil means a fresh
	// key drawn at Join, for this process alone. A key of the wrong size,
	// or whose public half is not its seed's, fails Join with
	// ErrInvalidConfig. No error or log of this package quotes it.
	Key ed25519.PrivateKey

	// PeerPath is the path every record's endpoint must end in; empty
	// means DefaultPeerPath. Advertise must end in it too.
	PeerPath string
	// Peers are the hosts a record's endpoint may name, each a CIDR
	// ("10.0.0.0/8"), an IP address or a host name (matched exactly,
	// ignoring case; never resolved). Empty means any host. Advertise's
	// host must be one of them.
	Peers []string
}

// Validate reports what Join would refuse in cfg, without connecting to
// anything: an error wrapping ErrInvalidConfig that says which field is
// wrong, or nil. A program can check its flags with it before it starts
// what Join needs (an embedded etcd, say).
func (cfg Config) Validate() error { return cfg.check() }

// check validates cfg and fills in its defaults.
func (cfg *Config) check() error {
	if len(cfg.Endpoints) == 0 {
		return fmt.Errorf("%w: no endpoints", ErrInvalidConfig)
	}
	for _, ep := range cfg.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return fmt.Errorf("%w: endpoint %q: %w", ErrInvalidConfig, ep, err)
		}
	}
	if err := cfg.checkAuth(); err != nil {
		return err
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return fmt.Errorf("%w: prefix %q: %w", ErrInvalidConfig, cfg.Prefix, err)
	}
	switch {
	case cfg.TTL == 0:
		cfg.TTL = DefaultTTL
	case cfg.TTL < time.Second || cfg.TTL%time.Second != 0:
		return fmt.Errorf("%w: TTL %v is not a whole number of seconds, at least one", ErrInvalidConfig, cfg.TTL)
	}
	switch {
	case cfg.OpTimeout == 0:
		cfg.OpTimeout = DefaultOpTimeout
	case cfg.OpTimeout < 0:
		return fmt.Errorf("%w: negative OpTimeout", ErrInvalidConfig)
	}
	if cfg.Cap < 0 {
		return fmt.Errorf("%w: negative Cap %d", ErrInvalidConfig, cfg.Cap)
	}
	if cfg.Replica == "" {
		cfg.Replica = defaultReplica()
	}
	if !printable(cfg.Replica) || len(cfg.Replica) > maxReplicaBytes {
		return fmt.Errorf("%w: replica name %q: not printable UTF-8 of at most %d bytes", ErrInvalidConfig, cfg.Replica, maxReplicaBytes)
	}
	if err := checkAdvertise(cfg.Advertise, cfg.InsecureNetwork); err != nil {
		return fmt.Errorf("%w: advertised endpoint %q: %w", ErrInvalidConfig, cfg.Advertise, err)
	}
	if err := cfg.checkTrust(); err != nil {
		return err
	}
	if err := checkKey(cfg.Key); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return nil
}

// checkAdvertise accepts an empty endpoint, or an absolute http(s) URL
// with a host and without user info, query or fragment: the URL another
// replica posts forwarded requests to. An http URL must name a loopback
// host unless insecure says the network is trusted.
func checkAdvertise(ep string, insecure bool) error {
	if ep == "" {
		return nil
	}
	if len(ep) > maxPrefixBytes || !printable(ep) {
		return fmt.Errorf("not printable UTF-8 of at most %d bytes", maxPrefixBytes)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("want http://host[:port]/path or https://")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("user info, a query or a fragment is not an endpoint")
	}
	if u.Scheme == "http" && !insecure && !LoopbackHost(u.Hostname()) {
		return ErrPlainHTTP
	}
	return nil
}

// ErrPlainHTTP is the refusal of an http Advertise URL beyond loopback
// without Config.InsecureNetwork.
var ErrPlainHTTP = errors.New("etcdfleet: http:// beyond loopback sends every forwarded call in clear text: " +
	"advertise https://, or set InsecureNetwork where the network is trusted")

// LoopbackHost reports whether host, as url.URL.Hostname returns it,
// names this machine without a lookup: an IP address in 127.0.0.0/8 or
// ::1, or localhost (RFC 6761 keeps it on loopback).
func LoopbackHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

// checkEndpoint accepts what the etcd client dials: a URL with a scheme it
// knows and a host (or, for unix sockets, a path).
func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" || u.Port() == "" {
			return fmt.Errorf("want %s://host:port", u.Scheme)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("a path, query or user info is not an endpoint")
		}
	case "unix", "unixs":
		if u.Host == "" && u.Path == "" {
			return fmt.Errorf("want %s://path", u.Scheme)
		}
	default:
		return fmt.Errorf("scheme %q: want http, https, unix or unixs", u.Scheme)
	}
	return nil
}

func checkPrefix(p string) error {
	switch {
	case p == "" || p[0] != '/':
		return fmt.Errorf("must begin with /")
	case len(p) > 1 && p[len(p)-1] == '/' || p == "/":
		return fmt.Errorf("must not end with /")
	case len(p) > maxPrefixBytes:
		return fmt.Errorf("longer than %d bytes", maxPrefixBytes)
	case !printable(p):
		return fmt.Errorf("not printable UTF-8")
	case strings.Contains(p, "//"):
		return fmt.Errorf("empty path segment")
	}
	return nil
}

func printable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func defaultReplica() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
