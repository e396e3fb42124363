package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ErrLocked is Start's error when another etcd of this package runs in
// the same data directory, in this process or another.
var ErrLocked = errors.New("embedded etcd: another etcd runs in this data directory")

// DefaultReadyTimeout bounds the wait for a start when
// Config.ReadyTimeout is zero.
const DefaultReadyTimeout = 30 * time.Second

// lockFile, in the data directory, is locked while an etcd runs there.
const lockFile = "embedded.lock"

// Config says what etcd Start runs. Only Dir is required.
type Config struct {
	// Dir holds the member's data, the lock and, if Hardened, the peer
	// certificate. It is created with mode 0700 if missing.
	Dir string
	// Name is the member's name (default "etcd"). A later start over the
	// same Dir must use the same name.
	Name string
	// ClientURL is where clients connect: http://IP:PORT, or https:// with
	// ClientTLS, on a loopback IP; port 0 picks a free one. Default
	// http://127.0.0.1:0. etcd's HTTP gateway dials this address, so a
	// caller that uses the gateway gives a fixed port.
	ClientURL string
	// ClientTLS, if set, is the certificate clients are served with, over
	// an https ClientURL.
	ClientTLS *transport.TLSInfo
	// TickMs and ElectionMs are etcd's heartbeat and election timeouts
	// (default 50 and 500). A single member hears from no peer, so short
	// ones cost nothing; etcd raises a lease TTL below 1.5 elections, so a
	// fleet with 1 s leases needs ElectionMs under 667.
	TickMs, ElectionMs uint
	// NoFsync skips fsync: faster, and losing the data on a crash of the
	// machine. For tests and load runs, whose data dies with them.
	NoFsync bool
	// Hardened refuses browsers (no CORS origin, only requests whose Host
	// is a loopback name) and serves the peer port over mutual TLS with a
	// certificate made for this start (harden.go).
	Hardened bool
	// BcryptCost is the cost of the users' password hashes (0: etcd's
	// default). Low costs suit passwords of full entropy, such as derived
	// ones, and tests under the race detector.
	BcryptCost uint
	// ReadyTimeout bounds the wait until the member serves (0:
	// DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// Logger receives etcd's own log (nil: none). It is JSON, with benign
	// errors on a first start; what stops the etcd comes on Etcd.Err.
	Logger *zap.Logger
}

// Etcd is a running member. Its methods are safe for concurrent use.
type Etcd struct {
	e        *embed.Etcd
	lock     *fileutil.LockedFile
	dir      string
	scheme   string
	hardened bool
	once     sync.Once
}

// Start runs the etcd cfg describes and returns once it serves, or with
// an error, leaving nothing running; ctx bounds the wait. Cost: etcd's
// start, tens of milliseconds on a fresh directory, plus an ECDSA key
// if Hardened.
func Start(ctx context.Context, cfg Config) (*Etcd, error) {
	ecfg, client, err := etcdConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	lock, err := fileutil.TryLockFile(filepath.Join(cfg.Dir, lockFile), os.O_WRONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	if cfg.Hardened {
		// After the lock: the certificate files are this start's.
		if err := harden(ecfg, client); err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("embedded etcd: %w", err)
		}
	}
	e, err := embed.StartEtcd(ecfg)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return &Etcd{e: e, lock: lock, dir: cfg.Dir, scheme: client.Scheme, hardened: cfg.Hardened}, nil
	case err = <-e.Err():
		err = fmt.Errorf("embedded etcd: %w", err)
	case <-ctx.Done():
		err = fmt.Errorf("embedded etcd: %w", context.Cause(ctx))
	case <-timer.C:
		err = fmt.Errorf("embedded etcd: not ready after %v", timeout)
	}
	e.Close()
	_ = lock.Close()
	return nil, err
}

// etcdConfig is etcd's config for cfg, and the client URL it serves.
func etcdConfig(cfg Config) (*embed.Config, *url.URL, error) {
	if cfg.Dir == "" {
		return nil, nil, errors.New("no data directory")
	}
	client, err := clientURL(cfg)
	if err != nil {
		return nil, nil, err
	}
	ecfg := embed.NewConfig()
	ecfg.Name = cfg.Name
	if ecfg.Name == "" {
		ecfg.Name = "etcd"
	}
	ecfg.Dir = cfg.Dir
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	ecfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	ecfg.TickMs, ecfg.ElectionMs = 50, 500
	if cfg.TickMs != 0 {
		ecfg.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		ecfg.ElectionMs = cfg.ElectionMs
	}
	ecfg.UnsafeNoFsync = cfg.NoFsync
	if cfg.BcryptCost != 0 {
		ecfg.BcryptCost = cfg.BcryptCost
	}
	if cfg.ClientTLS != nil {
		ecfg.ClientTLSInfo = *cfg.ClientTLS
	}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort(client.Hostname(), "0")}
	ecfg.ListenClientUrls, ecfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	ecfg.ListenPeerUrls, ecfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ecfg.InitialCluster = ecfg.InitialClusterFromName(ecfg.Name)
	return ecfg, client, nil
}

// clientURL is cfg's client URL, checked, without a path.
func clientURL(cfg Config) (*url.URL, error) {
	raw := cfg.ClientURL
	if raw == "" {
		raw = "http://127.0.0.1:0"
	}
	client, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("the client URL does not parse")
	}
	client.Path = ""
	ip := net.ParseIP(client.Hostname())
	switch {
	case client.Scheme != "http" && client.Scheme != "https":
		return nil, errors.New("the client URL is neither http:// nor https://")
	case (client.Scheme == "https") != (cfg.ClientTLS != nil):
		return nil, errors.New("an https client URL goes with ClientTLS, and http without")
	case ip == nil || !ip.IsLoopback():
		return nil, errors.New("the client URL's host is not a loopback IP")
	}
	return client, nil
}

// Endpoint is the client URL, with the port the kernel picked.
func (e *Etcd) Endpoint() string { return e.scheme + "://" + e.e.Clients[0].Addr().String() }

// PeerAddr is the host:port of the peer listener.
func (e *Etcd) PeerAddr() string { return e.e.Peers[0].Addr().String() }

// Err receives what stops the etcd on its own, and is closed once it has
// stopped.
func (e *Etcd) Err() <-chan error { return e.e.Err() }

// Client returns a new client of the etcd, logged in as user if user is
// not empty, that ends with ctx; the caller closes it.
func (e *Etcd) Client(ctx context.Context, user, password string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Context: ctx,
		Username: user, Password: password, Logger: zap.NewNop(),
	})
}

// Close stops the etcd, waiting for it, and then releases the data
// directory. Later calls do nothing.
func (e *Etcd) Close() {
	e.once.Do(func() {
		e.e.Close()
		_ = e.lock.Close()
	})
}
