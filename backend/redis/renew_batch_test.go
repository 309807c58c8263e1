package redis_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// scriptCalls returns the scripts the server has run so far.
func scriptCalls(t testing.TB, admin *goredis.Client) int64 {
	t.Helper()
	return scripts(commandStats(t, admin))
}

// connectedClients returns the client connections the server counts open (INFO clients).
func connectedClients(t testing.TB, admin *goredis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "clients").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no connected_clients in %q", info)
	return 0
}

// holdMany has n Lockers on b acquire a mutex each and returns their leases, released
// when t ends.
func holdMany(t *testing.T, b *redis.Backend, n int, opts ...simba.LockerOption) []*simba.Lease {
	t.Helper()
	leases := make([]*simba.Lease, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() {
			l, err := simba.NewLocker(b, uniqueName(t, "m"), opts...)
			if !assert.NoError(t, err) {
				return
			}
			leases[i], err = l.Acquire(t.Context())
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range leases {
			if l != nil {
				_ = l.Release(context.Background())
			}
		}
	})
	require.False(t, t.Failed())
	return leases
}

// Mutexes held by one process renew together: the server runs at most 1.1 scripts per
// renewal period for each connection the backend keeps open (issue 35's goal), not one
// per mutex, and every owner keeps its lease.
func TestHeldMutexesRenewInBatches(t *testing.T) {
	srv := ownServer(t) // no other test's scripts
	admin := newClient(t, srv.Addr())
	b := newBackend(t, newClient(t, srv.Addr()))
	const (
		n       = 200
		ttl     = 3 * time.Second
		period  = ttl - ttl/3 // simba's default renewal lead
		periods = 3
	)
	leases := holdMany(t, b, n, simba.WithTTL(ttl))
	// Every owner has renewed once after the first period; count over whole periods from
	// there. The windows only count: how long they last decides no outcome.
	time.Sleep(period + period/2)
	before := scriptCalls(t, admin)
	time.Sleep(periods * period)
	scripts := float64(scriptCalls(t, admin)-before) / periods
	conns := connectedClients(t, admin) - 1 // the admin client's own
	t.Logf("%d held mutexes: %.1f scripts per renewal period on %d connections", n, scripts, conns)
	assert.LessOrEqual(t, scripts, 1.1*float64(conns))
	for i, l := range leases {
		assert.NoError(t, context.Cause(l.Context()), "lease %d", i)
	}
}
