package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Stores, in the order the results list them.
const (
	storeMemory    = "memory"
	storeRedis     = "redis"
	storeSQL       = "sql"
	storePostgres  = "postgres"
	storeZooKeeper = "zookeeper"
	storeEtcd      = "etcd"
)

var allStores = []string{storeMemory, storeRedis, storeSQL, storePostgres, storeZooKeeper, storeEtcd}

// storeTitle names a store in the results.
func storeTitle(store string) string {
	switch store {
	case storeMemory:
		return "memory"
	case storeRedis:
		return "Redis"
	case storeSQL:
		return "MariaDB"
	case storePostgres:
		return "PostgreSQL"
	case storeZooKeeper:
		return "ZooKeeper"
	case storeEtcd:
		return "etcd"
	}
	return store
}

// Timing shared by the libraries.
const (
	// tunedRetry is the retry delay of the "tuned" polling peers: ten times shorter than
	// redsync's shortest default delay, what a user tuning for latency might pick.
	tunedRetry = 5 * time.Millisecond
	// lockTTL is the lock TTL of the peers that have no default (redislock), the same as
	// simba's default TTL.
	lockTTL = 10 * time.Second
	// failoverLease is what a crashed owner costs in the failover figure, the same for
	// every library: simba's TTL + transition, the peers' lock expiry, ZooKeeper's session
	// timeout.
	failoverLease = 3 * time.Second
)

// library is one lock library, configured one way, on one store: the unit every figure
// measures.
type library struct {
	id       string // key for flags and holder processes
	name     string // as the results show it
	store    string
	simba    bool
	settings string // what was configured, for the results
	// poll is how long a waiter of a polling library sleeps between attempts at most
	// (zero: the library is woken by the store). The hand-over figure holds for a
	// random time up to it, so that the release falls at a random phase of the poll.
	poll time.Duration
	// process: the failover figure runs the owner in a process of its own and kills
	// it; false for libraries that cannot live in another process (memory), whose
	// owner's backend is closed instead.
	process bool
	// open returns a new client of the library for mutex.
	open func(ctx context.Context, e *env, mutex string, o openOptions) (client, error)
	// bound is the most a failover may take after the owner dies, by design.
	bound time.Duration
}

// openOptions are the per-figure settings of a client.
type openOptions struct {
	// failover: the client uses the failover figure's lease (failoverLease) instead of
	// its library's default.
	failover bool
}

// client is one participant of a library: its own connection (or backend, session,
// pool), contending for one mutex.
type client interface {
	// acquire blocks until the client holds the mutex or ctx ends and returns the
	// function that releases it. A library that gives up on its own (a limited number
	// of retries) is asked again: acquire returns only on success or when ctx ends.
	acquire(ctx context.Context) (release func(context.Context) error, err error)
	// armWait is called before an acquire that is expected to wait; waiting then
	// reports whether that acquire has reached the library's way of waiting: subscribed
	// to the release message, queued on the server, watching the owner's node, or, for
	// a polling library, done with its first attempt.
	armWait(ctx context.Context) error
	waiting(ctx context.Context) (bool, error)
	// giveUps counts the times the library gave up and acquire asked again.
	giveUps() int64
	close() error
}

// keeper is implemented by clients whose library does not renew a held lock on its own:
// keep renews it until ctx ends, as an application holding it for long would.
type keeper interface {
	keep(ctx context.Context)
}

// libraries returns every library the benchmark knows, in the order of the results.
func libraries() []library {
	return append([]library{
		{
			id: "simba-memory", name: "simba", store: storeMemory, simba: true,
			settings: "Locker on backend/memory, one backend per client on one Store; ttl 10s, transition 6s (defaults)",
			open:     openSimbaMemory,
			bound:    simbaFailoverBound,
		},
		{
			id: "simba-redis", name: "simba", store: storeRedis, simba: true, process: true,
			settings: "Locker on backend/redis, one go-redis client and backend per client; ttl 10s, transition 6s (defaults)",
			open:     openSimbaRedis,
			bound:    simbaFailoverBound,
		},
		{
			id: "redsync", name: "redsync", store: storeRedis, process: true, poll: 250 * time.Millisecond,
			settings: "redsync v4 defaults: expiry 8s, 32 tries, retry delay uniform in [50ms, 250ms); one pool (go-redis client) per client",
			open:     openRedsync(false),
			bound:    failoverLease + 250*time.Millisecond,
		},
		{
			id: "redsync-tuned", name: "redsync (tuned)", store: storeRedis, process: true, poll: tunedRetry,
			settings: "redsync v4 with WithRetryDelay(5ms); otherwise defaults (expiry 8s, 32 tries)",
			open:     openRedsync(true),
			bound:    failoverLease + tunedRetry,
		},
		{
			id: "redislock", name: "redislock", store: storeRedis, process: true, poll: 100 * time.Millisecond,
			settings: "bsm/redislock with its documented retry, LimitRetry(LinearBackoff(100ms), 3); lock TTL 10s",
			open:     openRedislock(false),
			bound:    failoverLease + 100*time.Millisecond,
		},
		{
			id: "redislock-tuned", name: "redislock (tuned)", store: storeRedis, process: true, poll: tunedRetry,
			settings: "bsm/redislock with LinearBackoff(5ms), unlimited until ctx ends; lock TTL 10s",
			open:     openRedislock(true),
			bound:    failoverLease + tunedRetry,
		},
		referenceRedis(),
		referenceRedisJVM(),
		{
			id: "simba-sql", name: "simba", store: storeSQL, simba: true, process: true,
			settings: "Locker on backend/jdbc (named-lock hand-over on), one *sql.DB and backend per client; ttl 10s, transition 6s (defaults)",
			open:     openSimbaSQL,
			bound:    simbaFailoverBound,
		},
		{
			id: "getlock", name: "GET_LOCK", store: storeSQL, process: true,
			settings: "SELECT GET_LOCK(name, 30) (asked again on timeout) and SELECT RELEASE_LOCK(name) on a connection pinned with db.Conn; one *sql.DB per client",
			open:     openGetLock,
			bound:    0, // the server frees the lock when the dead owner's connection closes
		},
		{
			id: "simba-postgres", name: "simba", store: storePostgres, simba: true, process: true,
			settings: "Locker on backend/jdbc with the Postgres dialect (advisory-lock hand-over on), pgx's database/sql driver, one *sql.DB and backend per client; ttl 10s, transition 6s (defaults)",
			open:     openSimbaPostgres,
			bound:    simbaFailoverBound,
		},
		{
			id: "advisory", name: "pg_advisory_lock", store: storePostgres, process: true,
			settings: "SELECT pg_advisory_lock(key) and SELECT pg_advisory_unlock(key) on a connection pinned with db.Conn, pgx's database/sql driver; one *sql.DB per client",
			open:     openAdvisory,
			bound:    0, // the server frees the lock when the dead owner's connection closes
		},
		{
			id: "simba-zookeeper", name: "simba", store: storeZooKeeper, simba: true, process: true,
			settings: "Locker on backend/zookeeper, one backend (session) per client; session timeout 3s",
			open:     openSimbaZooKeeper,
			bound:    zkSession + zkTick,
		},
		{
			id: "zklock", name: "zk.Lock", store: storeZooKeeper, process: true,
			settings: "go-zookeeper v1.0.4 zk.NewLock (its lock recipe), one connection (session) per client; session timeout 3s",
			open:     openZKLock,
			bound:    zkSession + zkTick,
		},
	}, etcdLibraries()...)
}

// simbaFailoverBound is when the next simba owner on a lease store takes over at the
// latest after the owner died: the last renewal's ttl + transition (failoverLease), then
// the waiter's contend period jitter (at most 1s).
const simbaFailoverBound = failoverLease + time.Second

// libraryByID returns the library with id.
func libraryByID(id string) (library, error) {
	for _, l := range libraries() {
		if l.id == id {
			return l, nil
		}
	}
	return library{}, fmt.Errorf("no library %q", id)
}

// giveUpCounter counts the times a library gave up before acquiring.
type giveUpCounter struct{ n atomic.Int64 }

func (g *giveUpCounter) giveUps() int64 { return g.n.Load() }
