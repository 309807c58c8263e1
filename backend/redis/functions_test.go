package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// libraries returns the names of the function libraries the server holds.
func libraries(t *testing.T, admin *goredis.Client) []string {
	t.Helper()
	libs, err := admin.FunctionList(t.Context(), goredis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// cycle acquires and releases l once.
func cycle(t *testing.T, l *simba.Locker) {
	t.Helper()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
}

// On a Redis 7 server the scripts are functions of one library, loaded once: a contended
// section's calls are FCALLs, which do not create the prelude's closures again, and none
// is an EVALSHA.
func TestContendedSectionRunsFunctions(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	acquires := eightLockers(t, srv.Addr())
	takeTurns(t, 50, acquires)
	const sections = 200
	before := commandStats(t, admin)
	takeTurns(t, sections, acquires)
	after := commandStats(t, admin)
	assert.GreaterOrEqual(t, after["fcall"]-before["fcall"], int64(2*sections), "an attempt and a release per section")
	assert.Zero(t, after["evalsha"]-before["evalsha"], "EVALSHA")
	assert.Zero(t, after["eval"]-before["eval"], "EVAL")
	libs := libraries(t, admin)
	require.Len(t, libs, 1)
	assert.True(t, strings.HasPrefix(libs[0], "simba_"), libs[0])
}

// A server that lost the library (FUNCTION FLUSH here; a restart without persistence, a
// failover to a node without it) gets it again at the next call, which succeeds.
func TestFunctionsLostAreLoadedAgain(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	l, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), uniqueName(t, "m"))
	require.NoError(t, err)
	cycle(t, l)
	for range 2 {
		require.NoError(t, admin.FunctionFlush(t.Context()).Err())
		before := commandStats(t, admin)
		cycle(t, l)
		after := commandStats(t, admin)
		assert.Positive(t, after["fcall"]-before["fcall"])
		assert.Zero(t, after["evalsha"]-before["evalsha"]+after["eval"]-before["eval"], "no script by EVALSHA or EVAL")
		assert.Len(t, libraries(t, admin), 1)
	}
}

// A server that cannot run the library (Redis before 7, where FCALL is an unknown
// command, as it is here when renamed away; an ACL user that may not FCALL, or may not
// load the library) runs the scripts by EVALSHA, as before functions, and the backend
// says so once, at its start-up check.
func TestFunctionsRefusedFallBackToScripts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string // the server's
		rules []any    // the ACL user's, beyond everything
	}{
		{name: "no FCALL nor FUNCTION", args: []string{"--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""}},
		{name: "ACL user without FCALL", rules: []any{"-fcall", "-function"}},
		{name: "ACL user without FUNCTION", rules: []any{"-function"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, false, tc.args...)
			s.acl(t, tc.rules...)
			h := &logRecorder{}
			b := newBackend(t, s.client, redis.WithLogger(slog.New(h)))
			l, err := simba.NewLocker(b, uniqueName(t, "m"))
			require.NoError(t, err)
			cycle(t, l)
			// Said once, by the start-up check, before any acquisition.
			h.await(t, "the fallback logged", func(r loggedError) bool { return strings.Contains(r.msg, "EVALSHA") })
			before := commandStats(t, s.admin)
			for range 3 {
				cycle(t, l)
			}
			after := commandStats(t, s.admin)
			assert.Zero(t, after["fcall"]-before["fcall"], "FCALL")
			assert.Positive(t, after["evalsha"]-before["evalsha"], "EVALSHA")
			h.mu.Lock()
			defer h.mu.Unlock()
			assert.Len(t, h.list, 1, "one record: %v", h.list)
		})
	}
}

// A function that writes nothing is registered as such (no-writes): a server out of
// memory, which refuses a function that may write before it runs, still answers a lookup,
// as it answered the script by EVALSHA.
func TestLookupRunsOutOfMemory(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	b := newBackend(t, newClient(t, srv.Addr()))
	mutex := uniqueName(t, "m")
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("owner"))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "1").Err())
	t.Cleanup(func() { _ = admin.ConfigSet(context.Background(), "maxmemory", "0").Err() })
	other, err := simba.NewLocker(b, mutex, simba.WithContenderID("other"))
	require.NoError(t, err)
	_, err = other.TryAcquire(t.Context())
	require.ErrorContains(t, err, "OOM", "a function that may write is refused")
	owner, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	assert.Equal(t, "owner", owner.ID)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "0").Err())
	require.NoError(t, lease.Release(t.Context()))
}
