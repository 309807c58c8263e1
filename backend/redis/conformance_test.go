package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// The conformance suite against one redis-server; every backend has a client of its own,
// as separate processes would.
func TestConformance(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	t.Cleanup(func() {
		for _, pattern := range residuePatterns {
			assertNoResidue(t, admin, pattern)
		}
	})
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newBackend(t, newClient(t, srv.Addr()))
	})
}

// residuePatterns match the keys and channels of the suite's mutexes, semaphores and
// read-write locks.
var residuePatterns = []string{"simba:{tck-*", "simba:sem:{tck-*", "simba:rw:{tck-*"}

// assertNoResidue checks, once every check has stopped and closed its backends, that the
// store keeps nothing but expiring token keys and that no channel is subscribed.
func assertNoResidue(t *testing.T, admin goredis.UniversalClient, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := admin.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	for _, k := range keys {
		if strings.HasSuffix(k, ":token") {
			ttl, err := admin.PTTL(ctx, k).Result()
			require.NoError(t, err)
			assert.Positive(t, ttl, "token key %s must expire", k)
			continue
		}
		assert.Failf(t, "residue", "key %s left on the store", k)
	}
	channels, err := admin.PubSubChannels(ctx, pattern).Result()
	require.NoError(t, err)
	assert.Empty(t, channels, "channels still subscribed")
}
