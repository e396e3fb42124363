package embedded_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/etcdfleet/embedded"
)

// Root's password is random, kept 0600 in the data directory and the
// same on every later call; GrantPrefix gives a user read and write on the
// prefix's keys alone, and takes away whatever else it held (root's role,
// another permission), so that the user can do nothing outside the prefix
// and nothing to etcd's users.
func TestGrantPrefixLeastPrivilege(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	e := start(t, embedded.Config{Dir: dir, BcryptCost: 4})
	pw, created, err := e.RootPassword()
	require.NoError(t, err)
	assert.True(t, created)
	assert.GreaterOrEqual(t, len(pw), 43, "256 bits")
	st, err := os.Stat(filepath.Join(dir, "root.password"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, created, err := e.RootPassword()
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, pw, again)

	require.NoError(t, e.EnableAuth(ctx, pw))
	const user, userPW = "fleet", "fleet-password-0123456789"
	require.NoError(t, e.GrantPrefix(ctx, pw, user, userPW, "/fleet"))
	root, err := e.Client(ctx, embedded.Root, pw)
	require.NoError(t, err)
	defer root.Close()
	// More than the prefix, granted by hand: the next GrantPrefix takes it.
	_, err = root.UserGrantRole(ctx, user, embedded.Root)
	require.NoError(t, err)
	_, err = root.RoleGrantPermission(ctx, user, "/other", "", clientv3.PermissionType(clientv3.PermReadWrite))
	require.NoError(t, err)
	require.NoError(t, e.GrantPrefix(ctx, pw, user, userPW, "/fleet"))

	cli, err := e.Client(ctx, user, userPW)
	require.NoError(t, err)
	defer cli.Close()
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/fleet/tools/x", "v", clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	resp, err := cli.Get(ctx, "/fleet/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1)
	_, err = cli.Revoke(ctx, lease.ID)
	assert.NoError(t, err, "revoking a lease whose keys are in the prefix")
	for what, op := range map[string]func() error{
		"a put outside the prefix":   func() error { _, err := cli.Put(ctx, "/other", "v"); return err },
		"a put of the prefix itself": func() error { _, err := cli.Put(ctx, "/fleet", "v"); return err },
		"a get of every key": func() error {
			_, err := cli.Get(ctx, "", clientv3.WithFromKey())
			return err
		},
		"adding a user":        func() error { _, err := cli.UserAdd(ctx, "intruder", "x"); return err },
		"granting itself root": func() error { _, err := cli.UserGrantRole(ctx, user, embedded.Root); return err },
	} {
		assert.Error(t, op(), what)
	}
	// The user's password is not root's.
	_, err = e.Client(ctx, embedded.Root, userPW)
	assert.Error(t, err)
}
