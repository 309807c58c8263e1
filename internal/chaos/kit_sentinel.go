package chaos

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testserver"
)

// The Redis backend on a Sentinel deployment (issue 16): a primary, an asynchronous
// replica and three sentinels; contenders connect through go-redis's FailoverClient, as
// an application would, and the scenarios of scenarios_sentinel_test.go fail the primary
// over.
func init() {
	register(Kit{
		Name:   "redis-sentinel",
		Letter: "S",
		Server: func(dir string) (ServerProcess, error) { return testserver.NewRedisSentinel(dir) },
		Backend: func(_ context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
			return redisBackend(goredis.NewFailoverClient(failoverOptions(cfg.Addr)))
		},
		Residue: func(ctx context.Context, addr, mutex string, killed []string) error {
			master, err := sentinelMaster(ctx, addr)
			if err != nil {
				return err
			}
			return redisResidue(ctx, master, mutex, killed)
		},
		Owner: func(ctx context.Context, addr, mutex string) (string, error) {
			master, err := sentinelMaster(ctx, addr)
			if err != nil {
				return "", err
			}
			return redisOwner(ctx, master, mutex)
		},
	})
}

// failoverOptions are redisOptions for a FailoverClient that asks the sentinels of addrs
// (separated by commas) for the master.
func failoverOptions(addrs string) *goredis.FailoverOptions {
	return &goredis.FailoverOptions{
		MasterName:            testserver.SentinelMaster,
		SentinelAddrs:         strings.Split(addrs, ","),
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
	}
}

// sentinelMaster asks the sentinels of addrs where the master is.
func sentinelMaster(ctx context.Context, addrs string) (string, error) {
	var err error
	for _, a := range strings.Split(addrs, ",") {
		c := goredis.NewSentinelClient(redisOptions(a))
		var addr []string
		addr, err = c.GetMasterAddrByName(ctx, testserver.SentinelMaster).Result()
		_ = c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
	}
	return "", err
}
