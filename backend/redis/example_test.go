package redis_test

import (
	"context"
	"fmt"
	"log"
	"os"
	ossignal "os/signal"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// A critical section on a standalone Redis. The backend uses the client it is given and
// never closes it; ContextTimeoutEnabled lets the service's call timeout bound every call.
func Example() {
	client := goredis.NewClient(&goredis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	backend, err := redis.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	locker, err := simba.NewLocker(backend, "nightly-export")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx) // waits; woken at once when the holder releases
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())

	// Work under lease.Context(), which ends if ownership could have lapsed, and pass the
	// fencing token to the resource the lock protects.
	fmt.Println("exporting with fencing token", lease.Token())
}

// Leader election on a Redis Cluster: all keys of a mutex share one slot, and the
// release messages reach waiters whichever node they are connected to. A Sentinel setup
// works the same with goredis.NewFailoverClient, or goredis.NewUniversalClient for any of
// the three.
func Example_cluster() {
	client := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	backend, err := redis.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	leader, err := simba.NewService(backend, simba.ContenderFuncs{
		MutexName: "billing-leader",
		ID:        simba.UUIDContenderID(),
		Acquired: func(ctx context.Context, s simba.State) {
			// ctx ends as soon as this instance may no longer lead.
			fmt.Println("leading with token", s.After.Token)
		},
		Released: func(simba.State) { fmt.Println("no longer leading") },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := ossignal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := leader.Run(ctx); err != nil { // contends until interrupted, then releases
		log.Fatal(err)
	}
}

// A lock over five independent Redis instances: a contender owns the mutex on a majority
// of them, so it stays exclusive and available while two fail.
func ExampleNewQuorum() {
	var clients []goredis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379", "redis-d:6379", "redis-e:6379"} {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer c.Close()
		clients = append(clients, c)
	}
	backend, err := redis.NewQuorum(clients, redis.WithRecheckAfter(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	locker, err := simba.NewLocker(backend, "ledger-close")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Acquire(context.Background())
	if err != nil {
		log.Fatal(err) // wraps redis.ErrTooFewInstances when fewer than three are available
	}
	defer lease.Release(context.Background())
	fmt.Println("closing the ledger with fencing token", lease.Token())
}
