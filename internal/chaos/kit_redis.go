package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
)

func init() {
	register(Kit{
		Name:   "redis",
		Letter: "R",
		Server: func(dir string) (ServerProcess, error) { return testserver.Redis(dir) },
		Backend: func(_ context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
			return redisBackend(goredis.NewClient(redisOptions(cfg.Addr)))
		},
		Residue: redisResidue,
		Owner:   redisOwner,
	})
}

// redisBackend opens the Redis backend on client; close closes both.
func redisBackend(client goredis.UniversalClient) (simba.Backend, func(), error) {
	b, err := redis.New(client, redis.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return b, func() { _ = b.Close(); _ = client.Close() }, nil
}

// redisOwner returns what the owner key of mutex on the server at addr names.
func redisOwner(ctx context.Context, addr, mutex string) (string, error) {
	c := goredis.NewClient(redisOptions(addr))
	defer c.Close()
	return redisOwnerOn(ctx, c, mutex)
}

// redisOwnerOn is redisOwner through client c.
func redisOwnerOn(ctx context.Context, c goredis.UniversalClient, mutex string) (string, error) {
	owner, err := c.Get(ctx, "simba:{"+mutex+"}").Result()
	if err == goredis.Nil {
		return "", nil
	}
	return owner, err
}

// redisOptions are the client options of the fault suite: context deadlines bound socket
// calls (the service's call timeout), and no handshake commands Redis 7.0 does not know.
func redisOptions(addr string) *goredis.Options {
	return &goredis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// redisResidue reports an owner key, waiting-set entries, grant registrations or
// subscribed channels left for mutex. An excused waiter's entry and registration stay until
// they expire or a release passes them by (backend/redis/doc.go): they are no residue.
func redisResidue(ctx context.Context, addr, mutex string, excused []string) error {
	c := goredis.NewClient(redisOptions(addr))
	defer c.Close()
	return redisResidueOn(ctx, c, mutex, excused, func(pattern string) ([]string, error) {
		return c.PubSubChannels(ctx, pattern).Result()
	})
}

// redisResidueOn is redisResidue through client c; channels lists the subscribed channels
// that match a pattern, on every server that may hold subscriptions.
func redisResidueOn(ctx context.Context, c goredis.UniversalClient, mutex string, excused []string,
	channels func(pattern string) ([]string, error)) error {
	key := "simba:{" + mutex + "}"
	owner, err := c.Get(ctx, key).Result()
	switch {
	case err == nil && !slices.Contains(excused, owner): // an excused owner's key lapses by itself
		return fmt.Errorf("redis: the owner key of %q still names %q", mutex, owner)
	case err != nil && err != goredis.Nil:
		return err
	}
	waiting, err := c.ZRange(ctx, key+":contender", 0, -1).Result()
	if err != nil {
		return err
	}
	for _, w := range waiting {
		if !slices.Contains(excused, w) {
			return fmt.Errorf("redis: %q, which was neither killed nor stopped with an error, is still in the waiting set of %q", w, mutex)
		}
	}
	registered, err := c.HKeys(ctx, key+":grant").Result()
	if err != nil {
		return err
	}
	for _, w := range registered {
		if !slices.Contains(excused, w) {
			return fmt.Errorf("redis: %q, which was neither killed nor stopped with an error, is still registered for a grant of %q", w, mutex)
		}
	}
	chans, err := channels(key + "*")
	if err != nil {
		return err
	}
	if len(chans) != 0 {
		return fmt.Errorf("redis: channels still subscribed: %v", chans)
	}
	return nil
}
