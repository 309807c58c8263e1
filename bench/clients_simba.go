package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/memory"
	simbaredis "github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
)

// The ttl and transition of simba's Lockers in the failover and lost-lock figures: their
// sum is failoverLease.
const (
	failoverTTL        = 2 * time.Second
	failoverTransition = failoverLease - failoverTTL
)

// simbaOptions returns the Locker options of a figure: simba's defaults, except in the
// failover and lost-lock figures, whose lease (ttl + transition) is failoverLease.
func simbaOptions(o openOptions) []simba.LockerOption {
	if o.failover {
		return []simba.LockerOption{simba.WithTTL(failoverTTL), simba.WithTransition(failoverTransition)}
	}
	return nil
}

// simbaTTL returns the ttl that simbaOptions gives.
func simbaTTL(o openOptions) time.Duration {
	if o.failover {
		return failoverTTL
	}
	return simba.DefaultTTL
}

// counting wraps a simba.Backend and counts what its lease contentions ask the store:
// every Acquire call (an acquisition attempt or a renewal), the answers that name
// another owner, when the last call that found its contender owning was sent, and, when
// renewals is set, the interval between an owner's renewals. It adds atomic operations
// to each call and nothing else.
type counting struct {
	simba.Backend
	calls     atomic.Int64
	lost      atomic.Int64
	ownedSent atomic.Int64 // instant of the last call that found its contender owning
	renewals  *intervals   // nil unless the scale figure measures renewal intervals
}

var (
	_ backend.Validator      = (*counting)(nil)
	_ backend.RenewalBatcher = (*counting)(nil)
	_ backend.DeadlineKeeper = (*counting)(nil)
)

// StartContend wraps the contention of a lease store; session contentions (ZooKeeper)
// make no Acquire calls and are returned as they are.
func (b *counting) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	if lc, ok := c.(backend.LeaseContention); ok {
		return &countedContention{LeaseContention: lc, b: b, id: p.ContenderID}, nil
	}
	return c, nil
}

// BatchesRenewals passes the backend's answer on (backend.RenewalBatcher): hidden by the
// wrapper, it would have simba renew off its grid, and the backend's batches would
// gather only the renewals that fall together by chance.
func (b *counting) BatchesRenewals() bool {
	r, ok := b.Backend.(backend.RenewalBatcher)
	return ok && r.BatchesRenewals()
}

// KeepsDeadlines passes the backend's answer on (backend.DeadlineKeeper): the wrapper's
// calls go through at once. Hidden by the wrapper, it would have a Locker start up,
// make its first attempt and release on goroutines of its own, as applications do not.
func (b *counting) KeepsDeadlines() bool {
	k, ok := b.Backend.(backend.DeadlineKeeper)
	return ok && k.KeepsDeadlines()
}

// ValidateMutex passes the check on to the backend, so that wrapping changes nothing.
func (b *counting) ValidateMutex(name string) error {
	if v, ok := b.Backend.(backend.Validator); ok {
		return v.ValidateMutex(name)
	}
	return nil
}

// ValidateContenderID passes the check on to the backend.
func (b *counting) ValidateContenderID(id string) error {
	if v, ok := b.Backend.(backend.Validator); ok {
		return v.ValidateContenderID(id)
	}
	return nil
}

// countedContention counts the calls of one contention. simba calls the methods of a
// contention from one goroutine at a time, so last needs no lock.
type countedContention struct {
	backend.LeaseContention
	b    *counting
	id   string
	last time.Time // when the previous call that found this contender owning was sent
}

func (c *countedContention) Acquire(ctx context.Context) (backend.Record, error) {
	sent := time.Now()
	c.b.calls.Add(1)
	if r := c.b.renewals; r != nil && !c.last.IsZero() {
		r.add(sent.Sub(c.last))
	}
	rec, err := c.LeaseContention.Acquire(ctx)
	switch {
	case err != nil:
	case rec.Owner == c.id:
		c.last = sent
		c.b.ownedSent.Store(instant(sent))
	default:
		c.b.lost.Add(1)
		c.last = time.Time{}
	}
	return rec, err
}

// intervals records durations into a fixed histogram of 1ms buckets, allocated once, so
// that recording allocates nothing while the scale figure measures the heap.
type intervals struct {
	mu      sync.Mutex
	buckets []int64 // buckets[i]: intervals in [i ms, i+1 ms); the last one: longer
	n       int64
	sum     time.Duration
	max     time.Duration
}

func newIntervals(longest time.Duration) *intervals {
	return &intervals{buckets: make([]int64, int(longest/time.Millisecond)+1)}
}

func (r *intervals) add(d time.Duration) {
	i := min(int(d/time.Millisecond), len(r.buckets)-1)
	r.mu.Lock()
	r.buckets[max(i, 0)]++
	r.n++
	r.sum += d
	r.max = max(r.max, d)
	r.mu.Unlock()
}

// reset forgets everything recorded so far.
func (r *intervals) reset() {
	r.mu.Lock()
	clear(r.buckets)
	r.n, r.sum, r.max = 0, 0, 0
	r.mu.Unlock()
}

// quantile returns the upper edge of the bucket holding quantile q.
func (r *intervals) quantile(q float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0
	}
	rank := int64(q*float64(r.n-1)) + 1
	var seen int64
	for i, c := range r.buckets {
		seen += c
		if seen >= rank {
			return time.Duration(i+1) * time.Millisecond
		}
	}
	return r.max
}

func (r *intervals) stats() (n int64, mean, longest time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, 0, 0
	}
	return r.n, r.sum / time.Duration(r.n), r.max
}

// simbaClient is a simba Locker with a backend of its own.
type simbaClient struct {
	locker  *simba.Locker
	ttl     time.Duration
	lease   atomic.Pointer[simba.Lease] // the last one acquired
	backend *counting                   // nil for session stores
	lost0   int64                       // backend.lost when the current wait was armed
	// prepare runs before a wait; check tells whether the store shows the waiter
	// waiting. Either may be nil.
	prepare func(ctx context.Context) error
	check   func(ctx context.Context) (bool, error)
	crash   func() // ends the backend as a crash would (memory: no process to kill)
	// closers run last to first: the Locker's Close, which waits for what it still
	// tells the store (a grant its cancelled wait got is released), before the backend's.
	closers []func() error
}

func (c *simbaClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	lease, err := c.locker.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	c.lease.Store(lease)
	return lease.Release, nil
}

// lostAt: the owner stops believing when its lease context ends.
func (c *simbaClient) lostAt(ctx context.Context) (time.Time, error) {
	lease := c.lease.Load()
	if lease == nil {
		return time.Time{}, errors.New("no lease held")
	}
	select {
	case <-lease.Done():
		return time.Now(), nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// localTTLEnd is the send time of the last call that found the client owning, plus the
// ttl; false on a session store.
func (c *simbaClient) localTTLEnd() (time.Time, bool) {
	if c.backend == nil || c.backend.ownedSent.Load() == 0 {
		return time.Time{}, false
	}
	return at(c.backend.ownedSent.Load()).Add(c.ttl), true
}

func (c *simbaClient) armWait(ctx context.Context) error {
	if c.backend != nil {
		c.lost0 = c.backend.lost.Load()
	}
	if c.prepare != nil {
		return c.prepare(ctx)
	}
	return nil
}

// waiting: a lease store's attempt must have found the mutex owned (the memory store has
// then queued the waiter), and the store must show the wait where it can.
func (c *simbaClient) waiting(ctx context.Context) (bool, error) {
	if c.backend != nil && c.backend.lost.Load() <= c.lost0 {
		return false, nil
	}
	if c.check != nil {
		return c.check(ctx)
	}
	return true, nil
}

func (c *simbaClient) giveUps() int64 { return 0 }

func (c *simbaClient) close() error {
	var errs []error
	for _, f := range slices.Backward(c.closers) {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

func openSimbaMemory(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	if e.memory == nil {
		return nil, errors.New("simba memory: no in-process store (a holder process cannot share it)")
	}
	be, err := memory.New(e.memory)
	if err != nil {
		return nil, fmt.Errorf("simba memory: %w", err)
	}
	cb := &counting{Backend: be}
	l, err := simba.NewLocker(cb, mutex, simbaOptions(o)...)
	if err != nil {
		return nil, fmt.Errorf("simba memory: %w", err)
	}
	return &simbaClient{locker: l, ttl: simbaTTL(o), backend: cb, crash: func() { _ = be.Close() }, closers: []func() error{be.Close, l.Close}}, nil
}

func openSimbaRedis(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	rc := newRedisClient(e.Redis)
	rc.AddHook(&commands{}) // as on the peers' clients
	be, err := simbaredis.New(rc)
	if err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("simba redis: %w", err)
	}
	cb := &counting{Backend: be}
	l, err := simba.NewLocker(cb, mutex, simbaOptions(o)...)
	if err != nil {
		_ = be.Close()
		_ = rc.Close()
		return nil, fmt.Errorf("simba redis: %w", err)
	}
	c := &simbaClient{locker: l, ttl: simbaTTL(o), backend: cb, closers: []func() error{rc.Close, be.Close, l.Close}}
	if e.redis != nil {
		// The waiter's inbox: the channel its release message comes on (the format
		// of backend/redis). It is subscribed after an attempt found the mutex owned.
		inbox := "simba:{" + mutex + "}:" + l.ContenderID()
		subscribed := func(ctx context.Context) (bool, error) {
			n, err := e.redis.PubSubNumSub(ctx, inbox).Result()
			return n[inbox] > 0, err
		}
		// The subscription of the client's previous wait is dropped in the background
		// after it acquired; wait until it is gone (for a second at most), so that the
		// subscription waiting() sees is this wait's.
		c.prepare = func(ctx context.Context) error {
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				on, err := subscribed(ctx)
				if err != nil || !on {
					return err
				}
				if err := sleep(ctx, 200*time.Microsecond); err != nil {
					return err
				}
			}
			return nil
		}
		c.check = subscribed
	}
	return c, nil
}

func openSimbaSQL(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	c, err := openJDBC("mysql", e.DSN, mutex, o)
	if err == nil && e.db != nil {
		// A waiter of backend/jdbc waits in GET_LOCK on the server; only one client
		// waits at a time in the figures that ask.
		c.check = func(ctx context.Context) (bool, error) {
			n, err := lockWaiters(ctx, e.db, "")
			return n > 0, err
		}
	}
	return c, err
}

func openSimbaPostgres(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	c, err := openJDBC("pgx", e.PgDSN, mutex, o, jdbc.WithDialect(jdbc.Postgres))
	if err == nil && e.pg != nil {
		// A waiter waits in pg_advisory_lock on the server; only one client waits at a
		// time in the figures that ask.
		c.check = func(ctx context.Context) (bool, error) {
			n, err := advisoryWaiters(ctx, e.pg)
			return n > 0, err
		}
	}
	return c, err
}

// openJDBC opens a Locker of backend/jdbc on a pool of its own.
func openJDBC(driver, dsn, mutex string, o openOptions, opts ...jdbc.Option) (*simbaClient, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("simba %s: %w", driver, err)
	}
	be, err := jdbc.New(db, opts...)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("simba %s: %w", driver, err)
	}
	cb := &counting{Backend: be}
	l, err := simba.NewLocker(cb, mutex, simbaOptions(o)...)
	if err != nil {
		_ = be.Close()
		_ = db.Close()
		return nil, fmt.Errorf("simba %s: %w", driver, err)
	}
	return &simbaClient{locker: l, ttl: simbaTTL(o), backend: cb, closers: []func() error{db.Close, be.Close, l.Close}}, nil
}

// advisoryWaiters counts the sessions of the PostgreSQL server that wait for an advisory
// lock.
func advisoryWaiters(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'").Scan(&n)
	return n, err
}

// lockWaiters counts the sessions of the server that wait in GET_LOCK, for the lock
// named name or, when name is empty, for any.
func lockWaiters(ctx context.Context, db *sql.DB, name string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
		"WHERE STATE = 'User lock' AND INFO LIKE ?", "%GET_LOCK(%"+name+"%").Scan(&n)
	return n, err
}

func openSimbaZooKeeper(_ context.Context, e *env, mutex string, o openOptions) (client, error) {
	var conn *zk.Conn
	be, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		c, ch, err := zkConnect(e.ZooKeeper, events)
		conn = c
		return c, ch, err
	})
	if err != nil {
		return nil, fmt.Errorf("simba zookeeper: %w", err)
	}
	l, err := simba.NewLocker(be, mutex, simbaOptions(o)...)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("simba zookeeper: %w", err)
	}
	c := &simbaClient{locker: l, ttl: simbaTTL(o), closers: []func() error{be.Close, l.Close}}
	if e.zk != nil {
		parent := "/simba/" + mutex
		c.check = func(ctx context.Context) (bool, error) {
			return watchesOwner(ctx, e, parent, "latch-", conn.SessionID())
		}
	}
	return c, nil
}

// watchesOwner reports whether, of two nodes under parent (a holder and a waiter), the
// session watches the owner's: the one whose sequence number, after marker, is lowest; or
// whether it watches parent itself, whose persistent recursive watch (simba's queue
// watch) tells it of every node's deletion.
func watchesOwner(ctx context.Context, e *env, parent, marker string, session int64) (bool, error) {
	kids, _, err := e.zk.Children(parent)
	if errors.Is(err, zk.ErrNoNode) || len(kids) < 2 {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	owner, lowest := "", -1
	for _, k := range kids {
		_, digits, ok := strings.Cut(k, marker)
		if !ok {
			continue
		}
		seq, err := strconv.Atoi(digits)
		if err != nil {
			continue
		}
		if lowest < 0 || seq < lowest {
			owner, lowest = k, seq
		}
	}
	if owner == "" {
		return false, nil
	}
	watched, err := zkWatches(ctx, e.ZooKeeper, session)
	if err != nil {
		return false, err
	}
	return slices.Contains(watched, parent+"/"+owner) || slices.Contains(watched, parent), nil
}
