package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// The backend promises to keep its calls' deadlines (backend.DeadlineKeeper) only on a
// standalone or Sentinel client with ContextTimeoutEnabled: without it go-redis bounds a
// socket read by ReadTimeout, not by the context.
func TestKeepsDeadlinesOnlyWithContextTimeouts(t *testing.T) {
	addr := server(t).Addr()
	without := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = without.Close() })
	cluster := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cluster.Close() })
	for _, c := range []struct {
		name   string
		client goredis.UniversalClient
		keeps  bool
	}{
		{"ContextTimeoutEnabled", newClient(t, addr), true},
		{"without ContextTimeoutEnabled", without, false},
		{"ClusterClient", cluster, false},
	} {
		var b backend.DeadlineKeeper = newBackend(t, c.client)
		assert.Equal(t, c.keeps, b.KeepsDeadlines(), c.name)
	}
}

// On a client with ContextTimeoutEnabled, the Locker's calls are made on the caller's
// goroutine; against a stalled server (SIGSTOP) Acquire and Release still return by their
// deadline, and what was left undone is done once the server answers, joined by Close.
func TestLockerKeepsDeadlineOnAStalledServer(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	b := newBackend(t, newClient(t, srv.Addr()))
	mutex := uniqueName(t, "m")
	// A call timeout far beyond the callers' deadlines: only the deadline ends their calls.
	opts := []simba.LockerOption{simba.WithTTL(time.Minute), simba.WithCallTimeout(20 * time.Second)}
	l, err := simba.NewLocker(b, mutex, opts...)
	require.NoError(t, err)
	other, err := simba.NewLocker(b, mutex, opts...) // its Acquire does not wait for l's release
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context()) // checks the server and opens a connection
	require.NoError(t, err)

	require.NoError(t, srv.Pause())
	t.Cleanup(func() { _ = srv.Resume() })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = lease.Release(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 10*time.Second, "Release waited for the call timeout")

	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began = time.Now()
	_, err = other.Acquire(ctx)
	assert.ErrorIs(t, err, simba.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 10*time.Second, "Acquire waited for the call timeout")

	require.NoError(t, srv.Resume())
	require.NoError(t, l.Close(), "Close waits for the release left in the background")
	require.NoError(t, other.Close(), "Close waits for the release of what the acquisition may have done")
	assert.Zero(t, admin.Exists(t.Context(), "simba:{"+mutex+"}").Val(), "the release reached the server")
}
