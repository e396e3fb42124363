package main

// How a replica authenticates to etcd, and how -etcd-embedded keeps its
// etcd to the fleet.
//
// -etcd-embedded turns etcd's auth on. Root's password is random, kept
// mode 0600 in the data directory (package embedded's RootPassword), and
// used only there, to set auth up: it derives from nothing that crosses
// the network or sits in etcd. The replicas log in as etcdFleetUser,
// whose role may read and write the fleet's prefix alone (package
// embedded's GrantPrefix), with a password derived from the fleet token
// (etcdFleetPassword, HKDF with a label of its own), set at each start of
// the embedded etcd: so the replicas of a fleet that share the token need
// no other flag. The cost: a replica joining with -etcd and no -etcd-user
// sends that derived password (never the token) to whatever etcd -etcd
// names, which is the point of deriving it, and whoever learns it can
// read and write the fleet's prefix, never root. With -etcd-user the replica
// logs in as that user instead, with the password from
// $LIVEREG_ETCD_PASSWORD or -etcd-password-file: never a flag, which ps
// would show. The rest of what keeps the embedded etcd to the fleet (no
// CORS grant, loopback Host names, the peer port's mutual TLS, the sweep
// when auth goes on) is package embedded's, which startEtcd asks for.

import (
	"context"
	"crypto/hkdf"
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

// etcdRoot is the embedded etcd's superuser, and its role (package
// embedded's Root).
const etcdRoot = embedded.Root

// etcdFleetUser is the embedded etcd's user for the replicas, and its
// role: read and write on the fleet's prefix alone.
const etcdFleetUser = "livereg-fleet"

// etcdFleetUserLabel is the HKDF info that derives etcdFleetUser's
// password from the fleet token, apart from every other use of it; v1
// leaves room for another derivation.
const etcdFleetUserLabel = "livereg etcd fleet user v1"

// legacyRootLabel is how root's password was derived from the fleet token
// by earlier versions: secureEtcd uses it once, to take such an etcd
// over, and never sets it.
const legacyRootLabel = "livereg etcd root v1"

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
					"and its replicas' user has a password derived from the fleet token", name)
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

// etcdFleetPassword derives etcdFleetUser's password from a fleet token:
// base64url(HKDF-SHA256(token, etcdFleetUserLabel)). Whoever has the token
// can derive it; the password does not give the token back, and it grants
// the fleet's prefix alone.
func etcdFleetPassword(fleetToken string) string {
	k, err := hkdf.Key(sha256.New, []byte(fleetToken), nil, etcdFleetUserLabel, sha256.Size)
	if err != nil {
		panic(err) // only for a length over 255 hashes
	}
	return base64.RawURLEncoding.EncodeToString(k)
}

// legacyRootPassword is root's password as earlier versions derived it
// from a fleet token: base64url(HMAC-SHA256(token, legacyRootLabel)).
func legacyRootPassword(fleetToken string) string {
	m := hmac.New(sha256.New, []byte(fleetToken))
	m.Write([]byte(legacyRootLabel))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// etcdCredentials returns the etcd user and password the replica logs in
// with: -etcd-user's, or else etcdFleetUser with the derived password
// (sent to the -etcd cluster too, which ignores it if its auth is off).
func (cfg config) etcdCredentials() (user, password string) {
	if cfg.etcdAuth.user != "" {
		return cfg.etcdAuth.user, cfg.etcdAuth.password
	}
	return etcdFleetUser, etcdFleetPassword(cfg.fleetToken)
}

// explainAuthFailure adds what to do to an ErrAuthFailed from joining
// with the derived credential.
func explainAuthFailure(cfg config, err error) error {
	if !errors.Is(err, etcdfleet.ErrAuthFailed) || cfg.etcdAuth.user != "" {
		return err
	}
	return fmt.Errorf("%w (without -etcd-user a replica logs in as %s with a password derived from the fleet token: "+
		"is this etcd the one a replica with -etcd-embedded runs, started with this fleet token? For an etcd of your own, give -etcd-user)", err, etcdFleetUser)
}

// secureEtcd turns the auth of the embedded etcd e on, or checks it, and
// grants the replicas their user. On the first start it draws root's
// password, keeps it in the data directory and enables auth; on a later
// start it logs in as root with it. An etcd that an earlier version
// secured, with root's password derived from the fleet token (or a
// previous one), is taken over: root's password becomes the kept one.
// Then etcdFleetUser gets the current token's password and read and write
// on the fleet's prefix alone. Cost: a few round trips and bcrypt checks,
// tens of ms.
func secureEtcd(ctx context.Context, e *embedded.Etcd, cfg joinConfig, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	rootPassword, _, err := e.RootPassword()
	if err != nil {
		return err
	}
	switch {
	case !e.AuthEnabled():
		// The sweep of what a stranger planted before auth was on is
		// EnableAuth's; the embedded etcd holds only the fleet's claims,
		// whose replicas are not running yet when it starts.
		if err := e.EnableAuth(ctx, rootPassword); err != nil {
			return fmt.Errorf("embedded etcd: turning its auth on: %w", err)
		}
		log.Info("embedded etcd: auth turned on; root's password is kept in the data directory, replicas log in as " + etcdFleetUser)
	default:
		if err := adoptRoot(ctx, e, cfg, rootPassword, log); err != nil {
			return err
		}
	}
	if err := e.GrantPrefix(ctx, rootPassword, etcdFleetUser, etcdFleetPassword(cfg.fleetToken), cfg.fleetPrefix); err != nil {
		return err
	}
	return nil
}

// adoptRoot logs in as root with the kept password, or, for an etcd whose
// root password an earlier version derived from the fleet token or a
// previous one, changes it to the kept one.
func adoptRoot(ctx context.Context, e *embedded.Etcd, cfg joinConfig, rootPassword string, log *slog.Logger) error {
	cli, err := e.Client(ctx, "", "")
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	defer cli.Close()
	_, err = cli.Authenticate(ctx, etcdRoot, rootPassword)
	if !errors.Is(err, rpctypes.ErrAuthFailed) {
		if err != nil {
			return fmt.Errorf("embedded etcd: logging in as root: %w", err)
		}
		return nil
	}
	for _, tok := range append([]string{cfg.fleetToken}, cfg.fleetPrevious...) {
		old := legacyRootPassword(tok)
		if _, err := cli.Authenticate(ctx, etcdRoot, old); errors.Is(err, rpctypes.ErrAuthFailed) {
			continue
		} else if err != nil {
			return fmt.Errorf("embedded etcd: logging in as root: %w", err)
		}
		prev, err := e.Client(ctx, etcdRoot, old)
		if err == nil {
			_, err = prev.UserChangePassword(ctx, etcdRoot, rootPassword)
			_ = prev.Close()
		}
		if err != nil {
			return fmt.Errorf("embedded etcd: changing root's password to the one kept in the data directory: %w", err)
		}
		log.Info("embedded etcd: root's password, derived from a fleet token by an earlier version, is now the one kept in the data directory")
		return nil
	}
	return fmt.Errorf("embedded etcd: auth is on, and root's password is neither the one kept in the data directory "+
		"nor one an earlier version derived from the fleet token or one in $%s", fleetTokenPreviousEnv)
}
