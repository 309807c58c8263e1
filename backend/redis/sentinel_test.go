package redis_test

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/tck"
)

// The whole conformance suite, semaphores and read-write locks included, through
// Sentinel (failover) clients on a primary, its replica and three sentinels.
func TestSentinelConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment; skipped with -short")
	}
	dir, err := os.MkdirTemp("", "simba-redis-sentinel-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d, err := testserver.NewRedisSentinel(dir)
	need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = d.Stop() })
	need(t, d.Start(ctx))
	var sentinels []string
	for _, s := range d.Sentinels {
		sentinels = append(sentinels, s.Addr())
	}
	failoverClient := func(t *testing.T) *goredis.Client {
		c := goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName:            testserver.SentinelMaster,
			SentinelAddrs:         sentinels,
			DisableIdentity:       true,
			ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	admin := failoverClient(t)
	t.Cleanup(func() {
		for _, pattern := range residuePatterns {
			assertNoResidue(t, admin, pattern)
		}
	})
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newBackend(t, failoverClient(t))
	}, tck.WithTimeScale(deploymentScale))
}
