package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.uber.org/zap"

	"github.com/simba-go/simba"
	simbaetcd "github.com/simba-go/simba/backend/etcd"
)

// etcdLease is the lease TTL of every etcd client of the benchmark outside the failover
// figure, simba's backend's and concurrency's session's alike: simba's default.
const etcdLease = 10 * time.Second

// etcdFailoverBound is when a waiter on etcd takes over at the latest after the owner
// died: the lease's TTL after its last keep-alive (failoverLease), then the server's
// expiry check (every 500ms) and the revoke it proposes, then the waiter's watch and read.
const etcdFailoverBound = failoverLease + time.Second

// etcdLibraries are the etcd libraries: simba's Locker on backend/etcd, and etcd's own
// concurrency.Mutex, the recipe simba's backend follows.
func etcdLibraries() []library {
	return []library{
		{
			id: "simba-etcd", name: "simba", store: storeEtcd, simba: true, process: true,
			settings: "Locker on backend/etcd, one clientv3 client and backend (lease) per client; lease TTL 10s (the backend's default), 3s in the failover figure; a keep-alive every third of the TTL (1s at 3s)",
			open:     openSimbaEtcd,
			bound:    etcdFailoverBound,
		},
		{
			id: "etcd-mutex", name: "concurrency.Mutex", store: storeEtcd, process: true,
			settings: "etcd client/v3 concurrency.NewMutex on a session (lease) of its own per client, one clientv3 client each; session TTL 10s, 3s in the failover figure; clientv3's keep-alive a third of the TTL after each answer, sent by a loop that wakes every 500ms (1-1.5s apart at 3s)",
			open:     openEtcdMutex,
			bound:    etcdFailoverBound,
		},
	}
}

// newEtcdClient returns a clientv3 client of addr with its logging off.
func newEtcdClient(addr string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdLeaseTTL is the lease a client of o asks for.
func etcdLeaseTTL(o openOptions) time.Duration {
	if o.failover {
		return failoverLease
	}
	return etcdLease
}

func openSimbaEtcd(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	ec, err := newEtcdClient(e.Etcd)
	if err != nil {
		return nil, fmt.Errorf("simba etcd: %w", err)
	}
	be, err := simbaetcd.New(ec, simbaetcd.WithLeaseTTL(etcdLeaseTTL(o)))
	if err != nil {
		_ = ec.Close()
		return nil, fmt.Errorf("simba etcd: %w", err)
	}
	l, err := simba.NewLocker(be, mutex, simbaOptions(o)...)
	if err != nil {
		_ = be.Close()
		_ = ec.Close()
		return nil, fmt.Errorf("simba etcd: %w", err)
	}
	c := &simbaClient{locker: l, ttl: etcdLeaseTTL(o), closers: []func() error{ec.Close, be.Close, l.Close}}
	if e.etcd != nil {
		c.prepare, c.check = etcdWaiting(e, be.MutexPrefix(mutex), 2)
	}
	return c, nil
}

// etcdMutexClient is a concurrency.Mutex on a session and client of its own.
type etcdMutexClient struct {
	giveUpCounter
	ec      *clientv3.Client
	session *concurrency.Session
	m       *concurrency.Mutex
	arm     func(context.Context) error
	check   func(context.Context) (bool, error)
}

func openEtcdMutex(ctx context.Context, e *env, mutex string, o openOptions) (client, error) {
	ec, err := newEtcdClient(e.Etcd)
	if err != nil {
		return nil, fmt.Errorf("concurrency.Mutex: %w", err)
	}
	s, err := concurrency.NewSession(ec, concurrency.WithTTL(int(etcdLeaseTTL(o)/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		_ = ec.Close()
		return nil, fmt.Errorf("concurrency.Mutex: %w", err)
	}
	prefix := "bench-mutex/" + mutex
	c := &etcdMutexClient{ec: ec, session: s, m: concurrency.NewMutex(s, prefix)}
	if e.etcd != nil {
		c.arm, c.check = etcdWaiting(e, prefix+"/", 2)
	}
	return c, nil
}

func (c *etcdMutexClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	if err := c.m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("concurrency.Mutex: %w", err)
	}
	return c.m.Unlock, nil
}

func (c *etcdMutexClient) armWait(ctx context.Context) error {
	if c.arm == nil {
		return nil
	}
	return c.arm(ctx)
}

func (c *etcdMutexClient) waiting(ctx context.Context) (bool, error) {
	if c.check == nil {
		return true, nil
	}
	return c.check(ctx)
}

// lostAt: the session's Done channel is concurrency's only signal that the owner lost
// its lock.
func (c *etcdMutexClient) lostAt(ctx context.Context) (time.Time, error) {
	select {
	case <-c.session.Done():
		return time.Now(), nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

func (c *etcdMutexClient) close() error {
	err := c.session.Close()
	return errors.Join(err, c.ec.Close())
}

// etcdRWMutexClient is etcd's recipe RWMutex (client/v3/experimental/recipes) on a
// session and client of its own, reading or writing.
type etcdRWMutexClient struct {
	giveUpCounter
	ec      *clientv3.Client
	session *concurrency.Session
	m       *recipe.RWMutex
	write   bool
}

func openEtcdRWMutex(ctx context.Context, e *env, name, mode string, _ int, _ *simbaBackend) (client, error) {
	if mode != modeRead && mode != modeWrite {
		return nil, fmt.Errorf("recipe.RWMutex: no hold mode %q", mode)
	}
	ec, err := newEtcdClient(e.Etcd)
	if err != nil {
		return nil, fmt.Errorf("recipe.RWMutex: %w", err)
	}
	s, err := concurrency.NewSession(ec, concurrency.WithTTL(int(etcdLease/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		_ = ec.Close()
		return nil, fmt.Errorf("recipe.RWMutex: %w", err)
	}
	return &etcdRWMutexClient{ec: ec, session: s, m: recipe.NewRWMutex(s, "bench-rwmutex/"+name), write: mode == modeWrite}, nil
}

// acquire: the recipe's RLock and Lock take no context; they return once the hold is
// taken, which comes in a contended run as the others release, so ctx is asked only
// before.
func (c *etcdRWMutexClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lock, unlock := c.m.RLock, c.m.RUnlock
	if c.write {
		lock, unlock = c.m.Lock, c.m.Unlock
	}
	if err := lock(); err != nil {
		return nil, fmt.Errorf("recipe.RWMutex: %w", err)
	}
	return func(context.Context) error { return unlock() }, nil
}

// armWait and waiting: the holds figure times no hand-over of a read-write lock.
func (c *etcdRWMutexClient) armWait(context.Context) error { return nil }

func (c *etcdRWMutexClient) waiting(context.Context) (bool, error) { return true, nil }

func (c *etcdRWMutexClient) close() error {
	err := c.session.Close()
	return errors.Join(err, c.ec.Close())
}

// etcdWaiting returns the arming and the waiting check of an etcd library whose keys lie
// under dir: since the wait was armed, the holders' keys and the waiter's, keys in all,
// have been there for etcdCatchUp, and the server has no watch behind. A watch from a
// revision already written (concurrency.Mutex's always is: it starts at its read's
// revision; simba's when a write came between its read and its watch) waits for the
// server's catch-up loop, every 100ms; a release before that would time the loop, not
// the library. etcd does not tell whose watches it has, so the check
// gives the waiter's watch etcdCatchUp to be made and caught up, and then sees none behind.
func etcdWaiting(e *env, dir string, keys int64) (arm func(context.Context) error, check func(context.Context) (bool, error)) {
	// since is when all keys were first seen since the wait was armed; zero: not all
	// there. The arming forgets the last wait's: the same count of keys stands again once
	// a hand-over is done and the releaser waits.
	var since time.Time
	arm = func(context.Context) error {
		since = time.Time{}
		return nil
	}
	return arm, func(ctx context.Context) (bool, error) {
		resp, err := e.etcd.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != keys {
			since = time.Time{}
			return false, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < etcdCatchUp {
			return false, nil
		}
		m, err := etcdMetrics(ctx, e.Etcd, slowWatchers)
		if err != nil {
			return false, err
		}
		return m[slowWatchers] == 0, nil
	}
}

// etcdCatchUp is how long the hand-over figure's waiter has to make its watch and have the
// server catch it up: past etcd's catch-up loop (100ms).
const etcdCatchUp = 150 * time.Millisecond

// slowWatchers is the etcd metric of the watches that the server has not caught up yet.
const slowWatchers = "etcd_debugging_mvcc_slow_watcher_total"

// etcdMetrics reads the named metrics, summed over their labels, from the /metrics page
// of the member at addr.
func etcdMetrics(ctx context.Context, addr string, names ...string) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	out := make(map[string]int64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		for _, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return nil, fmt.Errorf("etcd metrics: %s: %w", line, err)
				}
				out[n] += int64(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	return out, nil
}

// etcdFloor returns a stepper for one linearizable Get of a key on a client of its own:
// a round trip through the leader's read index.
func etcdFloor(ctx context.Context, e *env) (stepper, error) {
	ec, err := newEtcdClient(e.Etcd)
	if err != nil {
		return nil, err
	}
	op := func() error {
		_, err := ec.Get(ctx, "bench-floor")
		return err
	}
	return &opStepper{op: op, closeFn: func() { _ = ec.Close() }}, nil
}

// etcdVersion returns the member's server version.
func etcdVersion(ctx context.Context, addr string) (string, error) {
	ec, err := newEtcdClient(addr)
	if err != nil {
		return "", err
	}
	defer ec.Close()
	st, err := ec.Status(ctx, addr)
	if err != nil {
		return "", err
	}
	return st.Version, nil
}

// The etcd metrics the store work counts: the gRPC calls and streams the member began
// (keep-alive and watch streams count once each, not per message), and the raft entries
// it committed.
const (
	etcdRequests = "grpc_server_started_total"
	etcdCommits  = "etcd_server_proposals_committed_total"
)
