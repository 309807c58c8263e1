package chaos

import (
	"context"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testserver"
)

// The Redis backend on a Redis Cluster (issue 16): three primaries with a replica each;
// contenders connect through go-redis's ClusterClient, and the scenarios of
// scenarios_cluster_test.go fail over the primary of the mutex's slot and move the slot.
func init() {
	register(Kit{
		Name:   "redis-cluster",
		Letter: "C",
		Server: func(dir string) (ServerProcess, error) { return testserver.NewRedisCluster(dir) },
		Backend: func(_ context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
			return redisBackend(goredis.NewClusterClient(clusterOptions(cfg.Addr)))
		},
		Residue: func(ctx context.Context, addr, mutex string, killed []string) error {
			c := goredis.NewClusterClient(clusterOptions(addr))
			defer c.Close()
			return redisResidueOn(ctx, c, mutex, killed, func(pattern string) ([]string, error) {
				var mu sync.Mutex
				var all []string
				err := c.ForEachShard(ctx, func(ctx context.Context, n *goredis.Client) error {
					chans, err := n.PubSubChannels(ctx, pattern).Result()
					mu.Lock()
					all = append(all, chans...)
					mu.Unlock()
					return err
				})
				return all, err
			})
		},
		Owner: func(ctx context.Context, addr, mutex string) (string, error) {
			c := goredis.NewClusterClient(clusterOptions(addr))
			defer c.Close()
			return redisOwnerOn(ctx, c, mutex)
		},
	})
}

// clusterOptions are redisOptions for a ClusterClient that starts from the nodes of addrs
// (separated by commas).
func clusterOptions(addrs string) *goredis.ClusterOptions {
	return &goredis.ClusterOptions{
		Addrs:                    strings.Split(addrs, ","),
		DisableIdentity:          true,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}
