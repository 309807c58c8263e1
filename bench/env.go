package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backend/memory"
)

// env is what the clients of a run share: the endpoints, an in-process memory store,
// and admin connections through which the figures check that a waiter waits (nil in a
// holder process, which checks nothing).
type env struct {
	endpoints
	memory *memory.Store
	redis  *goredis.Client
	db     *sql.DB // MariaDB
	pg     *sql.DB // PostgreSQL
	zk     *zk.Conn
	etcd   *clientv3.Client
	run    string        // random prefix of this run's mutex names
	names  *atomic.Int64 // numbers the mutex names
}

// newEnv opens the admin connections to the stores in need.
func newEnv(ep endpoints, need map[string]bool) (*env, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e := &env{endpoints: ep, memory: memory.NewStore(), run: hex.EncodeToString(b), names: new(atomic.Int64)}
	if need[storeRedis] {
		e.redis = newRedisClient(ep.Redis)
	}
	if need[storeSQL] {
		db, err := sql.Open("mysql", ep.DSN)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("admin connection: %w", err)
		}
		e.db = db
	}
	if need[storePostgres] {
		db, err := sql.Open("pgx", ep.PgDSN)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("admin connection: %w", err)
		}
		e.pg = db
	}
	if need[storeZooKeeper] {
		conn, _, err := zkConnect(ep.ZooKeeper, nil)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("admin connection: %w", err)
		}
		e.zk = conn
	}
	if need[storeEtcd] {
		c, err := newEtcdClient(ep.Etcd)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("admin connection: %w", err)
		}
		e.etcd = c
	}
	return e, nil
}

// via returns an env whose clients reach the stores at ep (proxies in front of them) and
// that shares everything else with e: the admin connections, the memory store, the names.
func (e *env) via(ep endpoints) *env {
	return &env{endpoints: ep, memory: e.memory, redis: e.redis, db: e.db, pg: e.pg, zk: e.zk, etcd: e.etcd, run: e.run, names: e.names}
}

func (e *env) close() {
	if e.redis != nil {
		_ = e.redis.Close()
	}
	if e.db != nil {
		_ = e.db.Close()
	}
	if e.pg != nil {
		_ = e.pg.Close()
	}
	if e.zk != nil {
		e.zk.Close()
	}
	if e.etcd != nil {
		_ = e.etcd.Close()
	}
}

// mutex returns a mutex name no other measurement of the run uses, short enough for
// every store (MariaDB's table and named locks take 64 characters).
func (e *env) mutex(figure, lib string) string {
	return fmt.Sprintf("b%s-%s-%s-%d", e.run, figure, lib, e.names.Add(1))
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitFor polls cond every interval until it holds, fails, or within passes.
func waitFor(ctx context.Context, within, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, within)
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
	}
}

// sample is a set of measured durations.
type sample []time.Duration

// quantile returns the nearest-rank quantile q of s (0 for an empty sample).
func (s sample) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

func (s sample) min() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

func (s sample) max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

// ms formats a duration in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case d == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.0f ms", v)
	}
}
