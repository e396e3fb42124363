package embedded

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Root is the user and the role EnableAuth creates: etcd's superuser, the
// one user its AuthEnable requires.
const Root = "root"

// AuthEnabled reports whether the etcd's auth is on, as a previous start
// over the same directory may have left it.
func (e *Etcd) AuthEnabled() bool { return e.e.Server.AuthStore().IsAuthEnabled() }

// EnableAuth creates Root with password and turns auth on. The etcd
// serves while it does, without auth until the last step: every user,
// role and key that another client added before is removed once auth is
// on, so the etcd holds Root alone and no data. Call it on a first start,
// before any replica joins. Cost: a few round trips and bcrypt hashes at
// Config.BcryptCost.
func (e *Etcd) EnableAuth(ctx context.Context, password string) error {
	cli, err := e.Client(ctx, "", "")
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.UserAdd(ctx, Root, password); errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		// A start that stopped between these steps left root behind.
		if _, err := cli.UserChangePassword(ctx, Root, password); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if _, err := cli.RoleAdd(ctx, Root); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, Root, Root); err != nil {
		return err
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return err
	}
	root, err := e.Client(ctx, Root, password)
	if err != nil {
		return err
	}
	defer root.Close()
	return sweep(ctx, root)
}

// sweep removes, as root, every user and role but Root's, and every key.
func sweep(ctx context.Context, root *clientv3.Client) error {
	users, err := root.UserList(ctx)
	if err != nil {
		return err
	}
	if err := allButRoot(users.Users, func(u string) error { _, err := root.UserDelete(ctx, u); return err }); err != nil {
		return err
	}
	roles, err := root.RoleList(ctx)
	if err != nil {
		return err
	}
	if err := allButRoot(roles.Roles, func(r string) error { _, err := root.RoleDelete(ctx, r); return err }); err != nil {
		return err
	}
	_, err = root.Delete(ctx, "", clientv3.WithFromKey())
	return err
}

// allButRoot calls del on each name but Root, stopping at its first error.
func allButRoot(names []string, del func(string) error) error {
	for _, n := range names {
		if n == Root {
			continue
		}
		if err := del(n); err != nil {
			return err
		}
	}
	return nil
}
