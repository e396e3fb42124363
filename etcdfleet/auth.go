package etcdfleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrAuthFailed: the cluster refused Config.Username and Password (an
// unknown user or a wrong password). Retrying with the same credentials
// cannot succeed.
var ErrAuthFailed = errors.New("etcdfleet: etcd refused the credentials")

// TLSFiles returns a client TLS configuration for Config.TLS read from PEM
// files: ca, the certificates that sign the cluster's server certificates
// (empty: the system's roots), and cert and key, this client's own
// certificate and key for a cluster that asks for one (both or neither).
// It reads every file once, so that a missing or bad one is an error now;
// the certificate and key are read again at each TLS handshake (the etcd
// transport package's TLSInfo does this), so renewed files take effect at
// the next connection without a restart. Errors wrap ErrInvalidConfig and
// name the files, never their contents.
func TLSFiles(ca, cert, key string) (*tls.Config, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%w: a client certificate and its key go together: both files or neither", ErrInvalidConfig)
	}
	info := transport.TLSInfo{TrustedCAFile: ca, CertFile: cert, KeyFile: key}
	c, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: TLS files: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// checkAuth validates the connection security fields of cfg. Its errors
// never quote the password, nor the user name (a misplaced argument may
// be a password).
func (cfg *Config) checkAuth() error {
	switch {
	case cfg.Username == "" && cfg.Password != "":
		return fmt.Errorf("%w: a Password without a Username", ErrInvalidConfig)
	case cfg.Username != "" && cfg.Password == "":
		return fmt.Errorf("%w: a Username without a Password: etcd users log in with both", ErrInvalidConfig)
	case cfg.Username != "" && !printable(cfg.Username):
		return fmt.Errorf("%w: the Username is not printable UTF-8", ErrInvalidConfig)
	}
	if cfg.TLS == nil {
		return nil
	}
	// The etcd client picks one transport for all endpoints from the
	// first one's scheme: an http endpoint first would silently drop TLS
	// for every other, and one later would be dialled with TLS anyway.
	for _, ep := range cfg.Endpoints {
		if u, err := url.Parse(ep); err == nil && u.Scheme != "https" && u.Scheme != "unixs" {
			return fmt.Errorf("%w: TLS is set but endpoint %q is %s: with TLS every endpoint must be https:// or unixs://", ErrInvalidConfig, ep, u.Scheme)
		}
	}
	return nil
}

// dial opens the etcd client of cfg, which check has accepted. Without
// credentials it connects in the background and returns at once; with
// them it logs in before it returns (one round trip, and a bcrypt check
// on the server: tens of milliseconds), bounded by ctx and by
// cfg.OpTimeout. Errors wrap ErrAuthFailed (credentials refused),
// ErrUnavailable (no answer in time) or ErrInvalidConfig.
func dial(ctx context.Context, cfg Config) (*clientv3.Client, error) {
	// The client lives under a context of its own, which must outlive
	// ctx: ctx bounds the dial and login only, by cancelling that
	// context if it ends before the client is returned.
	life, end := context.WithCancel(context.Background())
	unbind := context.AfterFunc(ctx, end)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.OpTimeout,
		Logger:      cfg.Logger,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Context:     life,
	})
	if !unbind() { // ctx ended during the dial: the client is dead
		if err == nil {
			_ = cli.Close()
		}
		return nil, unavailable(context.Cause(ctx))
	}
	switch {
	case err == nil:
		return cli, nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		end()
		return nil, fmt.Errorf("%w: user %q: %w", ErrAuthFailed, cfg.Username, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		end()
		return nil, unavailable(err)
	default:
		end()
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
}
