package redis_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testserver"
)

// pings counts the PING commands a client sends.
type pings struct{ n atomic.Int64 }

func (h *pings) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *pings) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "ping" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *pings) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// startService starts a contender service of a new mutex on b, under a context of its
// own with timeout, and returns Start's error and how long it took. The service is
// stopped when t ends.
func startService(t *testing.T, b simba.Backend, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	s, err := simba.NewService(b, simba.ContenderFuncs{MutexName: uniqueName(t, "m"), ID: "c"}, simba.WithTTL(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	began := time.Now()
	err = s.Start(ctx)
	took := time.Since(began)
	if err == nil {
		_ = s.Stop(t.Context())
	}
	return took, err
}

// oneLine fails t unless err is a single line that says what happened once.
func oneLine(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	assert.NotContains(t, msg, "\n", "one line")
	assert.Equal(t, 1, strings.Count(msg, "simba/redis: "), "the backend's prefix once: %s", msg)
	t.Log(msg)
}

// A misconfigured client is no longer silent (issue 12, item 4): Start fails with a clear
// error when the server cannot be reached or refuses the client, within the context's
// deadline; it succeeds once the configuration is right, and a backend checks its server
// once, at its first successful start.
func TestStartChecksTheServer(t *testing.T) {
	t.Run("closed port", func(t *testing.T) {
		b := newBackend(t, unreachable(t))
		_, err := startService(t, b, eventDeadline)
		require.Error(t, err)
		assert.ErrorIs(t, err, redis.ErrUnreachable)
		var op *net.OpError
		assert.ErrorAs(t, err, &op, "the dial error is kept")
		oneLine(t, err)
	})
	t.Run("nothing answers", func(t *testing.T) {
		p, err := faultproxy.New(server(t).Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		p.Blackhole(faultproxy.Both)
		b := newBackend(t, newClient(t, p.Addr()))
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err = b.StartContend(ctx, backend.Participant{Mutex: uniqueName(t, "m"), ContenderID: "c", TTL: testTTL})
		took := time.Since(began)
		require.Error(t, err)
		assert.ErrorIs(t, err, redis.ErrUnreachable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 500*time.Millisecond+2*time.Second, "bounded by the context's deadline")
		oneLine(t, err)

		// Through a service, whose Start may end on the deadline before the backend does.
		took, err = startService(t, b, 500*time.Millisecond)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 500*time.Millisecond+2*time.Second, "bounded by the context's deadline")
	})
	t.Run("password", func(t *testing.T) {
		srv := ownServer(t)
		admin := newClient(t, srv.Addr())
		require.NoError(t, admin.ConfigSet(t.Context(), "requirepass", "secret").Err())
		withPassword := func(password string) (*goredis.Client, *pings) {
			opt := clientOptions(srv.Addr())
			opt.Password = password
			c := goredis.NewClient(opt)
			t.Cleanup(func() { _ = c.Close() })
			h := &pings{}
			c.AddHook(h)
			return c, h
		}
		for _, password := range []string{"", "wrong"} {
			c, _ := withPassword(password)
			_, err := startService(t, newBackend(t, c), eventDeadline)
			require.Error(t, err, "password %q", password)
			assert.ErrorIs(t, err, redis.ErrRefused)
			var rerr goredis.Error
			assert.ErrorAs(t, err, &rerr, "the server's answer is kept")
			oneLine(t, err)
		}

		c, h := withPassword("right")
		b := newBackend(t, c)
		_, err := startService(t, b, eventDeadline)
		require.ErrorIs(t, err, redis.ErrRefused)
		require.NoError(t, admin.ConfigSet(t.Context(), "requirepass", "right").Err())
		_, err = startService(t, b, eventDeadline)
		require.NoError(t, err, "a failed check is not remembered")
		n := h.n.Load()
		_, err = startService(t, b, eventDeadline)
		require.NoError(t, err)
		assert.Equal(t, n, h.n.Load(), "a successful check is remembered")
	})
	// Servers that answer PING but would refuse every acquisition (adversarial review,
	// stop 32): Start passed, and a Locker found out only at its deadline. Where the user
	// may write but not publish, the acquire script also left an owner key behind (scripts
	// do not roll back), naming a contender that never believed.
	t.Run("read-only replica", func(t *testing.T) {
		primary, replica := ownServer(t), ownServer(t)
		admin := newClient(t, replica.Addr())
		host, port, err := net.SplitHostPort(primary.Addr())
		require.NoError(t, err)
		require.NoError(t, admin.Do(t.Context(), "REPLICAOF", host, port).Err())
		_, err = startService(t, newBackend(t, newClient(t, replica.Addr())), eventDeadline)
		require.ErrorIs(t, err, redis.ErrRefused)
		assert.Contains(t, err.Error(), "READONLY")
		oneLine(t, err)
	})
	for _, tc := range []struct {
		name, says string
		rules      []any
	}{
		{"user that may not run scripts", "NOPERM", []any{"~*", "&*", "+@all", "-@scripting"}},
		{"user that may not publish", "publish", []any{"~*", "resetchannels", "+@all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ownServer(t)
			admin := newClient(t, srv.Addr())
			require.NoError(t, admin.Do(t.Context(), append([]any{"ACL", "SETUSER", "limited", "reset", "on", ">pw"}, tc.rules...)...).Err())
			opt := clientOptions(srv.Addr())
			opt.Username, opt.Password = "limited", "pw"
			c := goredis.NewClient(opt)
			t.Cleanup(func() { _ = c.Close() })
			_, err := startService(t, newBackend(t, c), eventDeadline)
			require.ErrorIs(t, err, redis.ErrRefused)
			assert.Contains(t, err.Error(), tc.says)
			oneLine(t, err)
			keys, err := admin.Keys(t.Context(), "simba:*").Result()
			require.NoError(t, err)
			assert.Empty(t, keys, "nothing written")
		})
	}
}

// A Quorum starts while enough of its instances answer: those that do not are left out,
// as after a failed call, and with too few the start fails.
func TestQuorumStartChecksTheInstances(t *testing.T) {
	servers := []*testserver.Server{ownServer(t), ownServer(t)}
	clients := []goredis.UniversalClient{newClient(t, servers[0].Addr()), newClient(t, servers[1].Addr()), unreachable(t)}
	q, err := redis.NewQuorum(clients)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = startService(t, q, eventDeadline)
	require.NoError(t, err, "two of three")
	assert.Equal(t, 2, q.Available())

	clients[1] = unreachable(t)
	q, err = redis.NewQuorum(clients)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = startService(t, q, eventDeadline)
	require.Error(t, err)
	assert.ErrorIs(t, err, redis.ErrTooFewInstances)
	assert.ErrorIs(t, err, redis.ErrUnreachable)
	oneLine(t, err)
}
