package embedded

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootPasswordFile, in the data directory, holds root's password.
const rootPasswordFile = "root.password"

// RootPassword returns root's password, kept in the data directory (mode
// 0600, in a 0700 directory): 256 random bits, drawn and written on the
// first call over a directory, read back on every later one. created says
// it was drawn now. Root's password derives from nothing else, so nothing
// that crosses the network or sits in etcd gives it away; only whoever
// can read the data directory, which holds the whole database anyway,
// has it. It is for setting up auth (EnableAuth, GrantPrefix), never for
// the fleet's replicas, which log in as a user of their own.
func (e *Etcd) RootPassword() (password string, created bool, err error) {
	name := filepath.Join(e.dir, rootPasswordFile)
	f, err := os.Open(name)
	if err == nil {
		defer f.Close()
		st, err := f.Stat()
		switch {
		case err != nil:
			return "", false, fmt.Errorf("embedded etcd: %s: %w", rootPasswordFile, err)
		case st.Mode().Perm()&0o077 != 0:
			return "", false, fmt.Errorf("embedded etcd: %s has mode %04o: group or others may read root's password; chmod 600 it",
				rootPasswordFile, st.Mode().Perm())
		}
		b, err := io.ReadAll(io.LimitReader(f, 1024))
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return "", false, fmt.Errorf("embedded etcd: %s is unreadable or empty: %v", rootPasswordFile, err)
		}
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("embedded etcd: %s: %w", rootPasswordFile, err)
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's doc)
	password = base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.WriteFile(name, []byte(password+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("embedded etcd: %s: %w", rootPasswordFile, err)
	}
	return password, true, nil
}

// GrantPrefix makes user, with password, the holder of a role of the same
// name whose one permission is to read and write the keys under prefix
// ("<prefix>/" and below): what a fleet's replicas need (package
// etcdfleet's Config.Username), and nothing more; no user management, no
// key outside the prefix. It logs in as root with rootPassword, creates
// the user and role if missing, sets the password and replaces the role's
// permissions. Idempotent. Cost: a few round trips and a bcrypt hash.
func (e *Etcd) GrantPrefix(ctx context.Context, rootPassword, user, password, prefix string) error {
	if user == "" || user == Root || prefix == "" {
		return errors.New("embedded etcd: grant: a user other than root and a prefix are required")
	}
	root, err := e.Client(ctx, Root, rootPassword)
	if err != nil {
		return fmt.Errorf("embedded etcd: grant: logging in as root: %w", err)
	}
	defer root.Close()
	if _, err := root.UserAdd(ctx, user, password); errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		if _, err := root.UserChangePassword(ctx, user, password); err != nil {
			return fmt.Errorf("embedded etcd: grant: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	if _, err := root.RoleAdd(ctx, user); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	// The role holds this one permission alone: any other, granted by
	// hand or by an older start, goes.
	role, err := root.RoleGet(ctx, user)
	if err != nil {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	from, end := prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/")
	for _, p := range role.Perm {
		if string(p.Key) == from && string(p.RangeEnd) == end && p.PermType == authpb.READWRITE {
			continue
		}
		if _, err := root.RoleRevokePermission(ctx, user, string(p.Key), string(p.RangeEnd)); err != nil {
			return fmt.Errorf("embedded etcd: grant: %w", err)
		}
	}
	if _, err := root.RoleGrantPermission(ctx, user, from, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	if _, err := root.UserGrantRole(ctx, user, user); err != nil {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	// And the user holds this role alone: root's, say, would undo it.
	u, err := root.UserGet(ctx, user)
	if err != nil {
		return fmt.Errorf("embedded etcd: grant: %w", err)
	}
	for _, r := range u.Roles {
		if r == user {
			continue
		}
		if _, err := root.UserRevokeRole(ctx, user, r); err != nil {
			return fmt.Errorf("embedded etcd: grant: %w", err)
		}
	}
	return nil
}
