package main

// How a replica authenticates to etcd, and how -etcd-embedded keeps its
// etcd to the fleet.
//
// -etcd-embedded turns etcd's auth on, with one user, root, whose password
// is derived from the fleet token (etcdRootPassword). A replica joining
// with -etcd and no -etcd-user logs in as that root, so the replicas of a
// fleet that share the token need no other flag. The cost: such a replica
// sends the derived password (never the token) to whatever etcd -etcd
// names, which is the point of deriving it. With -etcd-user the replica
// logs in as that user instead, with the password from
// $LIVEREG_ETCD_PASSWORD or -etcd-password-file: never a flag, which ps
// would show. The rest of what keeps the embedded etcd to the fleet (no
// CORS grant, loopback Host names, the peer port's mutual TLS, the sweep
// when auth goes on) is package embedded's, which startEtcd asks for.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/etcdfleet/embedded"
)

// etcdPasswordEnv holds the password of -etcd-user.
const etcdPasswordEnv = "LIVEREG_ETCD_PASSWORD"

// etcdRoot is the embedded etcd's only user, and its role (package
// embedded's Root).
const etcdRoot = embedded.Root

// etcdRootLabel separates the root password's derivation from any other
// use of the fleet token; v1 leaves room for another derivation.
const etcdRootLabel = "livereg etcd root v1"

// maxPasswordFile bounds -etcd-password-file.
const maxPasswordFile = 4096

// etcdAuthFlagNames are the flags of an etcd of one's own.
var etcdAuthFlagNames = []string{"etcd-ca", "etcd-cert", "etcd-key", "etcd-user", "etcd-password-file"}

// checkEtcdAuth validates the etcd authentication flags of cfg, whose
// fleet flags checkFleet has accepted, reads the password and the TLS
// files, and notes the previous fleet tokens. Its errors quote no
// password and no token.
func checkEtcdAuth(cfg *config, set map[string]bool, getenv func(string) string) error {
	a := &cfg.etcdAuth
	envPassword := getenv(etcdPasswordEnv)
	switch {
	case !cfg.joins():
		for _, name := range etcdAuthFlagNames {
			if set[name] {
				return fmt.Errorf("-%s needs -etcd", name)
			}
		}
		return nil
	case cfg.etcdEmbedded != "":
		for _, name := range etcdAuthFlagNames {
			if set[name] {
				return fmt.Errorf("-%s is for an etcd of your own (-etcd): -etcd-embedded serves plain HTTP on loopback, "+
					"and its one user is root, with a password derived from the fleet token", name)
			}
		}
		if envPassword != "" {
			return fmt.Errorf("$%s is set, but -etcd-embedded derives its etcd password from the fleet token: unset it", etcdPasswordEnv)
		}
		return nil
	}
	switch {
	case (a.cert == "") != (a.key == ""):
		return errors.New("-etcd-cert and -etcd-key go together: a client certificate and its key")
	case a.passwordFile != "" && envPassword != "":
		return fmt.Errorf("-etcd-password-file and $%s are mutually exclusive", etcdPasswordEnv)
	case set["etcd-user"] && a.user == "":
		return errors.New("-etcd-user must not be empty")
	case a.user == "" && (a.passwordFile != "" || envPassword != ""):
		return fmt.Errorf("an etcd password ($%s or -etcd-password-file) needs -etcd-user", etcdPasswordEnv)
	case a.user != "" && strings.ContainsFunc(a.user, isSpaceOrControl):
		return errors.New("-etcd-user must hold no spaces or control characters")
	case a.user != "" && a.passwordFile == "" && envPassword == "":
		return fmt.Errorf("-etcd-user needs its password, in $%s or -etcd-password-file (never a flag: ps shows command lines)", etcdPasswordEnv)
	}
	if a.ca != "" || a.cert != "" {
		for ep := range strings.SplitSeq(cfg.etcd, ",") {
			if u, err := url.Parse(strings.TrimSpace(ep)); err != nil || u.Scheme != "https" && u.Scheme != "unixs" {
				return errors.New("-etcd-ca, -etcd-cert and -etcd-key need -etcd endpoints that are all https:// or unixs://")
			}
		}
		c, err := etcdfleet.TLSFiles(a.ca, a.cert, a.key)
		if err != nil {
			return fmt.Errorf("-etcd-ca, -etcd-cert, -etcd-key: %w", err)
		}
		a.tls = c
	}
	switch {
	case a.passwordFile != "":
		pw, err := readPasswordFile(a.passwordFile)
		if err != nil {
			return err
		}
		a.password = pw
	default:
		a.password = envPassword
	}
	return nil
}

// readPasswordFile reads a password from a file that only its owner may
// read or write, without its trailing line end.
func readPasswordFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("-etcd-password-file: %w", pathless(err))
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return "", fmt.Errorf("-etcd-password-file: %w", pathless(err))
	case !st.Mode().IsRegular():
		return "", errors.New("-etcd-password-file is not a regular file")
	case st.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("-etcd-password-file has mode %04o: group or others may access it; chmod 600 it", st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("-etcd-password-file: %w", pathless(err))
	case len(b) > maxPasswordFile:
		return "", fmt.Errorf("-etcd-password-file is larger than %d bytes", maxPasswordFile)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", errors.New("-etcd-password-file is empty")
	}
	return pw, nil
}

// etcdRootPassword derives the embedded etcd's root password from a fleet
// token: base64url(HMAC-SHA256(token, etcdRootLabel)). Whoever has the
// token can derive it; the password does not give the token back.
func etcdRootPassword(fleetToken string) string {
	m := hmac.New(sha256.New, []byte(fleetToken))
	m.Write([]byte(etcdRootLabel))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// etcdCredentials returns the etcd user and password the replica logs in
// with: -etcd-user's, or else root with the derived password (sent to the
// -etcd cluster too, which ignores it if its auth is off).
func (cfg config) etcdCredentials() (user, password string) {
	if cfg.etcdAuth.user != "" {
		return cfg.etcdAuth.user, cfg.etcdAuth.password
	}
	return etcdRoot, etcdRootPassword(cfg.fleetToken)
}

// explainAuthFailure adds what to do to an ErrAuthFailed from joining
// with the derived root credential.
func explainAuthFailure(cfg config, err error) error {
	if !errors.Is(err, etcdfleet.ErrAuthFailed) || cfg.etcdAuth.user != "" {
		return err
	}
	return fmt.Errorf("%w (without -etcd-user a replica logs in as root with a password derived from the fleet token: "+
		"is this etcd the one a replica with -etcd-embedded runs, with this fleet token? For an etcd of your own, give -etcd-user)", err)
}

// secureEtcd turns the auth of the embedded etcd e on, or
// checks it: on the first start it creates root with the derived password
// and enables auth; on a later start it logs in with it, and if the fleet
// token changed, logs in with a previous token's password and sets the
// current one's. Cost: a few round trips and bcrypt checks, tens of ms.
func secureEtcd(ctx context.Context, e *embedded.Etcd, cfg joinConfig, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	password := etcdRootPassword(cfg.fleetToken)
	if !e.AuthEnabled() {
		// The sweep of what a stranger planted before auth was on is
		// EnableAuth's; the embedded etcd holds only the fleet's claims,
		// whose replicas are not running yet when it starts.
		if err := e.EnableAuth(ctx, password); err != nil {
			return fmt.Errorf("embedded etcd: turning its auth on: %w", err)
		}
		log.Info("embedded etcd: auth turned on; replicas log in as root, with a password derived from the fleet token")
		return nil
	}
	cli, err := e.Client(ctx, "", "")
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	defer cli.Close()
	_, err = cli.Authenticate(ctx, etcdRoot, password)
	if !errors.Is(err, rpctypes.ErrAuthFailed) {
		if err != nil {
			return fmt.Errorf("embedded etcd: logging in as root: %w", err)
		}
		return nil
	}
	for _, old := range cfg.fleetPrevious {
		if _, err := cli.Authenticate(ctx, etcdRoot, etcdRootPassword(old)); errors.Is(err, rpctypes.ErrAuthFailed) {
			continue
		} else if err != nil {
			return fmt.Errorf("embedded etcd: logging in as root: %w", err)
		}
		prev, err := e.Client(ctx, etcdRoot, etcdRootPassword(old))
		if err == nil {
			_, err = prev.UserChangePassword(ctx, etcdRoot, password)
			_ = prev.Close()
		}
		if err != nil {
			return fmt.Errorf("embedded etcd: changing root's password to the current fleet token's: %w", err)
		}
		log.Info("embedded etcd: root's password changed from a previous fleet token's to the current one's")
		return nil
	}
	return fmt.Errorf("embedded etcd: auth is on, and root's password derives neither from the fleet token nor from one in $%s: "+
		"put the token it last ran with there", fleetTokenPreviousEnv)
}
