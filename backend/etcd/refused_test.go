package etcd_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/testserver"
)

// An etcd with authentication refuses a client without credentials a lease, and a user
// without permission on simba's prefix a key: the start fails at once, with an error
// matching simba.ErrRefused, not by its deadline.
func TestRefused(t *testing.T) {
	needServer(t)
	dir, err := os.MkdirTemp("", "simba-etcd-auth-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := testserver.Etcd(dir, testserver.EtcdOptions{})
	testserver.Need(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { _ = srv.Stop() })

	root := newClient(t, srv.Addr())
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.RoleAdd(ctx, "root"); return ignore(err, rpctypes.ErrRoleAlreadyExist) },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "elsewhere", "pw"); return err },
		func() error { _, err := root.RoleAdd(ctx, "elsewhere"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "elsewhere", "other/", clientv3.GetPrefixRangeEnd("other/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserGrantRole(ctx, "elsewhere", "elsewhere"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}

	for name, user := range map[string]string{"no credentials": "", "no permission on the prefix": "elsewhere"} {
		t.Run(name, func(t *testing.T) {
			cfg := clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
			if user != "" {
				cfg.Username, cfg.Password = user, "pw"
			}
			cli, err := clientv3.New(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cli.Close() })
			b, err := etcd.New(cli, etcd.WithLeaseTTL(testLeaseTTL))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			l, err := simba.NewLocker(b, "refused", simba.WithContenderID("c"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			actx, cancel := context.WithTimeout(t.Context(), eventBound)
			defer cancel()
			started := time.Now()
			_, err = l.Acquire(actx)
			assert.ErrorIs(t, err, simba.ErrRefused)
			assert.Less(t, time.Since(started), eventBound/2, "failed at once, not by its deadline")
			t.Logf("refused after %v: %v", time.Since(started), err)
		})
	}
}

func ignore(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return err
}
