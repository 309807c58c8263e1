package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	_ "github.com/go-sql-driver/mysql" // the MariaDB driver
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver
	goredis "github.com/redis/go-redis/v9"
)

// commands is a go-redis hook that counts the commands a client has completed: a polling
// waiter has made its first attempt once the count has moved. Every Redis client of the
// benchmark carries it, simba's included, so that it costs all the same.
type commands struct{ n atomic.Int64 }

func (h *commands) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *commands) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.n.Add(1)
		return err
	}
}

func (h *commands) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		h.n.Add(int64(len(cmds)))
		return err
	}
}

// polled is the waiting check of a polling library: the client has completed a command
// since the wait was armed, that is, its first attempt, which found the lock taken.
type polled struct {
	counter *commands
	n0      int64
}

func (p *polled) armWait(context.Context) error {
	p.n0 = p.counter.n.Load()
	return nil
}

func (p *polled) waiting(context.Context) (bool, error) { return p.counter.n.Load() > p.n0, nil }

// redsyncClient is a redsync Mutex on a pool of its own.
type redsyncClient struct {
	polled
	giveUpCounter
	rc    *goredis.Client
	m     *redsync.Mutex
	until atomic.Int64 // instant of m.Until() after the last lock or extension
}

func openRedsync(tuned bool) func(context.Context, *env, string, openOptions) (client, error) {
	return func(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
		rc := newRedisClient(e.Redis)
		counter := &commands{}
		rc.AddHook(counter)
		var opts []redsync.Option
		if tuned {
			opts = append(opts, redsync.WithRetryDelay(tunedRetry))
		}
		if o.failover {
			opts = append(opts, redsync.WithExpiry(failoverLease))
		}
		m := redsync.New(redsyncgoredis.NewPool(rc)).NewMutex("redsync:"+mutex, opts...)
		return &redsyncClient{polled: polled{counter: counter}, rc: rc, m: m}, nil
	}
}

func (c *redsyncClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	for {
		err := c.m.LockContext(ctx)
		if err == nil {
			c.until.Store(instant(c.m.Until()))
			return c.unlock, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return nil, fmt.Errorf("redsync: %w", err)
		}
		c.n.Add(1) // out of tries: ask again, as an application would
	}
}

func (c *redsyncClient) unlock(ctx context.Context) error {
	ok, err := c.m.UnlockContext(ctx)
	if err != nil {
		return fmt.Errorf("redsync: unlock: %w", err)
	}
	if !ok {
		return errors.New("redsync: unlock: lock was not held")
	}
	return nil
}

// keep extends the lock every third of its expiry.
func (c *redsyncClient) keep(ctx context.Context) {
	t := time.NewTicker(failoverLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ok, _ := c.m.ExtendContext(ctx); ok {
				c.until.Store(instant(c.m.Until()))
			}
		}
	}
}

// lostAt: redsync's owner knows its lock valid until Until(), which redsync sets at
// the lock and at every extension from the call's start, the expiry and a drift.
func (c *redsyncClient) lostAt(ctx context.Context) (time.Time, error) {
	return lostByDeadline(ctx, c.until.Load)
}

func (c *redsyncClient) close() error { return c.rc.Close() }

// redislockClient is a redislock Client on a go-redis client of its own.
type redislockClient struct {
	polled
	giveUpCounter
	rc    *goredis.Client
	lc    *redislock.Client
	key   string
	ttl   time.Duration
	tuned bool
	held  atomic.Pointer[redislock.Lock]
	until atomic.Int64 // instant: the last Obtain or Refresh that succeeded was sent, plus ttl
}

func openRedislock(tuned bool) func(context.Context, *env, string, openOptions) (client, error) {
	return func(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
		rc := newRedisClient(e.Redis)
		counter := &commands{}
		rc.AddHook(counter)
		ttl := lockTTL
		if o.failover {
			ttl = failoverLease
		}
		return &redislockClient{polled: polled{counter: counter}, rc: rc, lc: redislock.New(rc),
			key: "redislock:" + mutex, ttl: ttl, tuned: tuned}, nil
	}
}

// retry returns a new retry strategy for one Obtain call (LimitRetry keeps a count).
func (c *redislockClient) retry() redislock.RetryStrategy {
	if c.tuned {
		return redislock.LinearBackoff(tunedRetry)
	}
	return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
}

func (c *redislockClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	for {
		sent := time.Now()
		lock, err := c.lc.Obtain(ctx, c.key, c.ttl, &redislock.Options{RetryStrategy: c.retry()})
		if err == nil {
			c.held.Store(lock)
			c.until.Store(instant(sent.Add(c.ttl))) // at the latest: a retry was sent later
			return lock.Release, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		// Out of retries, or, without a deadline of ctx, past redislock's own deadline
		// (the lock TTL): ask again, as an application would.
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("redislock: %w", err)
		}
		c.n.Add(1)
	}
}

// keep refreshes the lock every third of its TTL.
func (c *redislockClient) keep(ctx context.Context) {
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if l := c.held.Load(); l != nil {
				sent := time.Now()
				if l.Refresh(ctx, c.ttl, nil) == nil {
					c.until.Store(instant(sent.Add(c.ttl)))
				}
			}
		}
	}
}

// lostAt: redislock's lock keeps no local deadline (its TTL method asks the server); an
// owner that knows its TTL counts it from when it sent its last successful Obtain or
// Refresh.
func (c *redislockClient) lostAt(ctx context.Context) (time.Time, error) {
	return lostByDeadline(ctx, c.until.Load)
}

func (c *redislockClient) close() error { return c.rc.Close() }

// getLockClient takes MariaDB's named lock on a connection pinned from a pool of its own:
// GET_LOCK belongs to the server session.
type getLockClient struct {
	giveUpCounter
	db   *sql.DB
	conn *sql.Conn
	name string
	e    *env
}

func openGetLock(ctx context.Context, e *env, mutex string, _ openOptions) (client, error) {
	db, err := sql.Open("mysql", e.DSN)
	if err != nil {
		return nil, fmt.Errorf("GET_LOCK: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("GET_LOCK: pin a connection: %w", err)
	}
	return &getLockClient{db: db, conn: conn, name: mutex, e: e}, nil
}

func (c *getLockClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	for {
		var got sql.NullInt64
		if err := c.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", c.name).Scan(&got); err != nil {
			return nil, fmt.Errorf("GET_LOCK: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			return c.release, nil
		}
		c.n.Add(1) // timed out after 30s: ask again
	}
}

func (c *getLockClient) release(ctx context.Context) error {
	var ok sql.NullInt64
	if err := c.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", c.name).Scan(&ok); err != nil {
		return fmt.Errorf("RELEASE_LOCK: %w", err)
	}
	if !ok.Valid || ok.Int64 != 1 {
		return errors.New("RELEASE_LOCK: lock was not held")
	}
	return nil
}

func (c *getLockClient) armWait(context.Context) error { return nil }

func (c *getLockClient) waiting(ctx context.Context) (bool, error) {
	if c.e.db == nil {
		return true, nil
	}
	n, err := lockWaiters(ctx, c.e.db, c.name)
	return n > 0, err
}

func (c *getLockClient) close() error { return errors.Join(c.conn.Close(), c.db.Close()) }

// advisoryClient takes a PostgreSQL session-level advisory lock on a connection pinned from
// a pool of its own: the lock belongs to the server session. It waits in
// pg_advisory_lock, which the server queues and grants in turn.
type advisoryClient struct {
	giveUpCounter
	db   *sql.DB
	conn *sql.Conn
	key  int64
	e    *env
}

func openAdvisory(ctx context.Context, e *env, mutex string, _ openOptions) (client, error) {
	db, err := sql.Open("pgx", e.PgDSN)
	if err != nil {
		return nil, fmt.Errorf("pg_advisory_lock: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("pg_advisory_lock: pin a connection: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(mutex))
	return &advisoryClient{db: db, conn: conn, key: int64(h.Sum64()), e: e}, nil
}

func (c *advisoryClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	if _, err := c.conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", c.key); err != nil {
		return nil, fmt.Errorf("pg_advisory_lock: %w", err)
	}
	return c.release, nil
}

func (c *advisoryClient) release(ctx context.Context) error {
	var ok bool
	if err := c.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", c.key).Scan(&ok); err != nil {
		return fmt.Errorf("pg_advisory_unlock: %w", err)
	}
	if !ok {
		return errors.New("pg_advisory_unlock: lock was not held")
	}
	return nil
}

func (c *advisoryClient) armWait(context.Context) error { return nil }

func (c *advisoryClient) waiting(ctx context.Context) (bool, error) {
	if c.e.pg == nil {
		return true, nil
	}
	n, err := advisoryWaiters(ctx, c.e.pg)
	return n > 0, err
}

func (c *advisoryClient) close() error { return errors.Join(c.conn.Close(), c.db.Close()) }

// zkLockClient is go-zookeeper's lock recipe on a connection (session) of its own.
type zkLockClient struct {
	giveUpCounter
	conn *zk.Conn
	lock *zk.Lock
	path string
	e    *env
}

func openZKLock(_ context.Context, e *env, mutex string, _ openOptions) (client, error) {
	conn, _, err := zkConnect(e.ZooKeeper, nil)
	if err != nil {
		return nil, fmt.Errorf("zk.Lock: %w", err)
	}
	path := "/bench-zklock/" + mutex
	return &zkLockClient{conn: conn, lock: zk.NewLock(conn, path, zk.WorldACL(zk.PermAll)), path: path, e: e}, nil
}

// acquire calls Lock, which takes no context: it returns when the lock is taken or the
// connection closes.
func (c *zkLockClient) acquire(context.Context) (func(context.Context) error, error) {
	if err := c.lock.Lock(); err != nil {
		return nil, fmt.Errorf("zk.Lock: %w", err)
	}
	return func(context.Context) error { return c.lock.Unlock() }, nil
}

func (c *zkLockClient) armWait(context.Context) error { return nil }

func (c *zkLockClient) waiting(ctx context.Context) (bool, error) {
	if c.e.zk == nil {
		return true, nil
	}
	return watchesOwner(ctx, c.e, c.path, "lock-", c.conn.SessionID())
}

func (c *zkLockClient) close() error {
	c.conn.Close()
	return nil
}
