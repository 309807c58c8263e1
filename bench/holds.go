package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	simbaetcd "github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/memory"
	simbaredis "github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
)

// The holds figure: simba's semaphores and read-write locks, and the peers that keep
// them, on every store.
const figHolds = "holds"

const (
	// holdPermits is the permit count of every semaphore of the holds figure.
	holdPermits = 3
	// rwWriters is how many of the contending clients of the read-write figure write;
	// the others read.
	rwWriters = 2
)

// Hold modes of a client.
const (
	modePermit = "permit"
	modeRead   = "read"
	modeWrite  = "write"
)

// holdLib is one way of taking semaphore permits or read-write holds on a store.
type holdLib struct {
	id, name, store, settings string
	simba                     bool
	modes                     []string // the modes it keeps
	// oneBackend: the clients of a measurement share one simba backend, as the goroutines
	// of one process would; otherwise each has a backend (and connection) of its own.
	oneBackend bool
	// open returns a client that takes holds of mode on name (a semaphore of permits);
	// shared is the measurement's backend when oneBackend, nil otherwise.
	open func(ctx context.Context, e *env, name, mode string, permits int, shared *simbaBackend) (client, error)
}

// holdLibs returns every library of the holds figure, in the order of the results.
// None of the mutex peers keeps a semaphore (redsync, redislock, go-zookeeper's
// recipes, GET_LOCK, pg_advisory_lock, concurrency.Mutex); PostgreSQL's shared advisory
// locks and etcd's recipes' RWMutex are read-write locks.
func holdLibs() []holdLib {
	all := []string{modePermit, modeRead, modeWrite}
	simbaOn := func(store, settings string) holdLib {
		return holdLib{id: "simba-" + store + "-holds", name: "simba", store: store, simba: true, modes: all,
			settings: settings, open: openSimbaHold(store)}
	}
	return []holdLib{
		simbaOn(storeMemory, "Semaphore and RWMutex on backend/memory, one backend per client on one Store; ttl 10s, transition 6s (defaults)"),
		simbaOn(storeRedis, "Semaphore and RWMutex on backend/redis, one go-redis client and backend per client; defaults"),
		simbaOn(storeSQL, "Semaphore and RWMutex on backend/jdbc (hold table), one *sql.DB and backend per client, as separate processes would have; defaults"),
		{
			id: "simba-sql-holds-1b", name: "simba (one backend)", store: storeSQL, simba: true, modes: all, oneBackend: true,
			settings: "as simba on MariaDB, but every client on one *sql.DB and backend, as the goroutines of one process: a release wakes the backend's waiters at once",
			open:     openSimbaHold(storeSQL),
		},
		simbaOn(storePostgres, "Semaphore and RWMutex on backend/jdbc with the Postgres dialect (hold table), one *sql.DB and backend per client; defaults"),
		{
			id: "simba-postgres-holds-1b", name: "simba (one backend)", store: storePostgres, simba: true, modes: all, oneBackend: true,
			settings: "as simba on PostgreSQL, but every client on one *sql.DB and backend, as the goroutines of one process",
			open:     openSimbaHold(storePostgres),
		},
		{
			id: "advisory-shared", name: "pg_advisory_lock_shared", store: storePostgres, modes: []string{modeRead, modeWrite},
			settings: "SELECT pg_advisory_lock_shared(key) / pg_advisory_unlock_shared(key) to read, pg_advisory_lock(key) / pg_advisory_unlock(key) to write, on a connection pinned with db.Conn; one *sql.DB per client",
			open:     openAdvisoryHold,
		},
		simbaOn(storeZooKeeper, "Semaphore and RWMutex on backend/zookeeper (Curator's InterProcessSemaphoreV2 and InterProcessReadWriteLock nodes), one backend (session) per client; session timeout 3s"),
		simbaOn(storeEtcd, "Semaphore and RWMutex on backend/etcd, one clientv3 client and backend (lease) per client; lease TTL 10s (the backend's default)"),
		{
			id: "etcd-recipes-rwmutex", name: "recipe.RWMutex", store: storeEtcd, modes: []string{modeRead, modeWrite},
			settings: "etcd client/v3/experimental/recipes NewRWMutex on a concurrency session (lease) of its own per client, one clientv3 client each; session TTL 10s. Its RLock and Lock take no context",
			open:     openEtcdRWMutex,
		},
	}
}

// holdLibByID returns the holds library with id.
func holdLibByID(id string) (holdLib, bool) {
	for _, l := range holdLibs() {
		if l.id == id {
			return l, true
		}
	}
	return holdLib{}, false
}

// simbaBackend is a simba backend on one store, for one client or for the clients of a
// measurement; counted is nil on ZooKeeper and etcd, whose waiters make no attempts.
type simbaBackend struct {
	b       simba.Backend
	counted *counting
	zk      *zk.Conn
	etcd    *simbaetcd.Backend
	closers []func() error // last to first
}

func (s *simbaBackend) close() error {
	var errs []error
	for _, f := range slices.Backward(s.closers) {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// Holds passes the question on to the counted backend, so that counting keeps holds
// where its backend does.
func (b *counting) Holds(k backend.Kind) bool {
	h, ok := b.Backend.(backend.Holder)
	return ok && h.Holds(k)
}

// newSimbaBackend opens a simba backend on store with a connection (or pool, session) of
// its own; on a lease store it is counted, so that its clients can tell when a waiter's
// attempt found no room.
func newSimbaBackend(e *env, store string) (*simbaBackend, error) {
	s, err := dialSimbaBackend(e, store)
	if err != nil || s.zk != nil || s.etcd != nil {
		return s, err
	}
	s.counted = &counting{Backend: s.b}
	s.b = s.counted
	return s, nil
}

func dialSimbaBackend(e *env, store string) (*simbaBackend, error) {
	switch store {
	case storeMemory:
		be, err := memory.New(e.memory)
		if err != nil {
			return nil, err
		}
		return &simbaBackend{b: be, closers: []func() error{be.Close}}, nil
	case storeRedis:
		rc := newRedisClient(e.Redis)
		rc.AddHook(&commands{})
		be, err := simbaredis.New(rc)
		if err != nil {
			_ = rc.Close()
			return nil, err
		}
		return &simbaBackend{b: be, closers: []func() error{rc.Close, be.Close}}, nil
	case storeSQL, storePostgres:
		db, err := openSQL(e, store)
		if err != nil {
			return nil, err
		}
		var opts []jdbc.Option
		if store == storePostgres {
			opts = append(opts, jdbc.WithDialect(jdbc.Postgres))
		}
		be, err := jdbc.New(db, opts...)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		return &simbaBackend{b: be, closers: []func() error{db.Close, be.Close}}, nil
	case storeZooKeeper:
		s := &simbaBackend{}
		be, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
			c, ch, err := zkConnect(e.ZooKeeper, events)
			s.zk = c
			return c, ch, err
		})
		if err != nil {
			return nil, err
		}
		s.b, s.closers = be, []func() error{be.Close}
		return s, nil
	case storeEtcd:
		ec, err := newEtcdClient(e.Etcd)
		if err != nil {
			return nil, err
		}
		be, err := simbaetcd.New(ec, simbaetcd.WithLeaseTTL(etcdLease))
		if err != nil {
			_ = ec.Close()
			return nil, err
		}
		return &simbaBackend{b: be, etcd: be, closers: []func() error{ec.Close, be.Close}}, nil
	}
	return nil, fmt.Errorf("no simba backend for store %q", store)
}

// holdClient takes semaphore permits or read-write holds with simba; it waits as a
// simbaClient does (simbaClient.waiting).
type holdClient struct {
	*simbaClient
	take func(ctx context.Context) (*simba.Lease, error)
}

func (c *holdClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	lease, err := c.take(ctx)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// openSimbaHold returns the open func of simba's holds on store.
func openSimbaHold(store string) func(ctx context.Context, e *env, name, mode string, permits int, shared *simbaBackend) (client, error) {
	return func(_ context.Context, e *env, name, mode string, permits int, shared *simbaBackend) (client, error) {
		sb := shared
		if sb == nil {
			var err error
			if sb, err = newSimbaBackend(e, store); err != nil {
				return nil, fmt.Errorf("simba %s: %w", store, err)
			}
		}
		c := &holdClient{simbaClient: &simbaClient{backend: sb.counted}}
		if shared == nil {
			c.closers = append(c.closers, sb.close)
		}
		path := zookeeper.RWMutexPath(name)
		switch mode {
		case modePermit:
			sem, err := simba.NewSemaphore(sb.b, name, permits)
			if err != nil {
				_ = c.close()
				return nil, fmt.Errorf("simba %s: %w", store, err)
			}
			c.take, c.closers, path = sem.Acquire, append(c.closers, sem.Close), zookeeper.SemaphorePath(name)
		case modeRead, modeWrite:
			m, err := simba.NewRWMutex(sb.b, name)
			if err != nil {
				_ = c.close()
				return nil, fmt.Errorf("simba %s: %w", store, err)
			}
			c.take, c.closers = m.RLock, append(c.closers, m.Close)
			if mode == modeWrite {
				c.take = func(ctx context.Context) (*simba.Lease, error) {
					w, err := m.Lock(ctx)
					if err != nil {
						return nil, err
					}
					return w.Lease, nil
				}
			}
		default:
			_ = c.close()
			return nil, fmt.Errorf("no hold mode %q", mode)
		}
		if sb.zk != nil && e.zk != nil {
			// A waiter of a ZooKeeper hold watches a node of the name (Curator's recipes: the
			// leases, or the hold before its own); its watches are used up once admitted.
			conn := sb.zk
			c.check = func(ctx context.Context) (bool, error) {
				watched, err := zkWatches(ctx, e.ZooKeeper, conn.SessionID())
				return slices.ContainsFunc(watched, func(p string) bool { return strings.HasPrefix(p, path+"/") }), err
			}
		}
		if sb.etcd != nil && e.etcd != nil && mode == modePermit {
			// A permit's waiter has put its place, permits+1 places in all, and watches the
			// place before it (see backend/etcd's package doc for the keys).
			c.prepare, c.check = etcdWaiting(e, sb.etcd.SemaphorePrefix(name)+strconv.Itoa(permits)+"/q/", int64(permits+1))
		}
		return c, nil
	}
}

// advisoryHoldClient is PostgreSQL's advisory lock taken shared (to read) or exclusive
// (to write) on a pinned connection.
type advisoryHoldClient struct {
	*advisoryClient
	shared bool
}

func openAdvisoryHold(ctx context.Context, e *env, name, mode string, _ int, _ *simbaBackend) (client, error) {
	if mode != modeRead && mode != modeWrite {
		return nil, fmt.Errorf("pg_advisory_lock_shared: no hold mode %q", mode)
	}
	c, err := openAdvisory(ctx, e, name, openOptions{})
	if err != nil {
		return nil, err
	}
	return &advisoryHoldClient{advisoryClient: c.(*advisoryClient), shared: mode == modeRead}, nil
}

func (c *advisoryHoldClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	if !c.shared {
		return c.advisoryClient.acquire(ctx)
	}
	if _, err := c.conn.ExecContext(ctx, "SELECT pg_advisory_lock_shared($1)", c.key); err != nil {
		return nil, fmt.Errorf("pg_advisory_lock_shared: %w", err)
	}
	return func(ctx context.Context) error {
		var ok bool
		if err := c.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock_shared($1)", c.key).Scan(&ok); err != nil {
			return fmt.Errorf("pg_advisory_unlock_shared: %w", err)
		}
		if !ok {
			return errors.New("pg_advisory_unlock_shared: lock was not held")
		}
		return nil
	}, nil
}

// holdResults is what the holds figure measured.
type holdResults struct {
	Cycles   []cycleResult     `json:"cycles"` // ID: library id + "/" + mode; the simba mutex's too
	HandOver []handOverResult  `json:"hand_over"`
	Permits  []holdLoopResult  `json:"permits"`
	RW       []holdLoopResult  `json:"rw"`
	Settings holdsSettingsNote `json:"settings"`
}

// holdsSettingsNote records the sizes particular to the holds figure.
type holdsSettingsNote struct {
	Permits int `json:"permits"`
	Writers int `json:"writers"`
}

// holdLoopResult is one library's contended run on a semaphore or a read-write lock.
type holdLoopResult struct {
	Store     string        `json:"store"`
	Library   string        `json:"library"`
	ID        string        `json:"id"`
	Clients   int           `json:"clients"`
	Writers   int           `json:"writers,omitempty"`
	Permits   int           `json:"permits,omitempty"`
	Window    time.Duration `json:"window_ns"`
	Sections  int64         `json:"sections"` // permits held, or reads + writes
	Reads     int64         `json:"reads,omitempty"`
	Writes    int64         `json:"writes,omitempty"`
	PerSecond float64       `json:"per_second"`
	PerClient []int64       `json:"per_client"`
	Fairness  float64       `json:"fairness"` // min / max sections per client (of the readers, for a read-write lock)
	// MostInside is the most holders seen inside at once: permits, or readers.
	MostInside int64 `json:"most_inside"`
	// Breaches counts entries that broke the hold's rule: a holder beyond the permits, a
	// reader beside a writer, a writer beside anyone.
	Breaches            int64   `json:"breaches"`
	Errors              int64   `json:"errors"`
	FirstErr            string  `json:"first_error,omitempty"`
	ServerOpsPerSection float64 `json:"server_ops_per_section,omitempty"`
}

// holds measures the holds figure on the stores, into res.Holds.
func (m *measurer) holds(ctx context.Context, e *env, res *results, stores []string, s runSettings) {
	h := &holdResults{Settings: holdsSettingsNote{Permits: holdPermits, Writers: rwWriters}}
	res.Holds = h
	var libs []holdLib
	for _, l := range holdLibs() {
		if slices.Contains(stores, l.store) && (len(m.o.libs) == 0 || slices.Contains(m.o.libs, l.id)) {
			libs = append(libs, l)
		}
	}
	for _, st := range stores {
		m.do(figHolds, st+"-cycles", func() error { return holdCyclesOn(ctx, e, h, st, libsOfStore(libs, st), s) })
	}
	for _, l := range libs {
		if !slices.Contains(l.modes, modePermit) {
			continue
		}
		m.do(figHolds, l.id+"-handover", func() error {
			r, err := measureHoldHandOver(ctx, e, l, holdPermits, s.HandOverWarm, s.HandOvers)
			if err == nil {
				h.HandOver = append(h.HandOver, r)
				logf("  %-24s p50 %s p99 %s", l.id, ms(r.P50), ms(r.P99))
			}
			return err
		})
	}
	for _, l := range libs {
		for _, rw := range []bool{false, true} {
			if !slices.Contains(l.modes, modeWrite) && rw || !slices.Contains(l.modes, modePermit) && !rw {
				continue
			}
			name := l.id + "-permits"
			if rw {
				name = l.id + "-rw"
			}
			m.do(figHolds, name, func() error {
				r, err := measureHoldLoop(ctx, e, l, s.Clients, rw, s.ContendWarm, s.ContendWindow)
				if err != nil {
					return err
				}
				if rw {
					h.RW = append(h.RW, r)
				} else {
					h.Permits = append(h.Permits, r)
				}
				logf("  %-24s %.0f/s fairness %.2f most inside %d breaches %d errors %d", name, r.PerSecond, r.Fairness, r.MostInside, r.Breaches, r.Errors)
				return nil
			})
		}
	}
}

func libsOfStore(libs []holdLib, store string) []holdLib {
	return slices.DeleteFunc(slices.Clone(libs), func(l holdLib) bool { return l.store != store })
}

// holdCyclesOn measures one client's acquire + release cycles on store: a permit, a read
// hold and a write hold of each library, and simba's mutex (Locker) to compare, taking
// turns in blocks of 100.
func holdCyclesOn(ctx context.Context, e *env, h *holdResults, store string, libs []holdLib, s runSettings) error {
	type entry struct{ id, name string }
	var (
		turns   []*turn
		entries []entry
		errs    []error
	)
	defer func() {
		for _, t := range turns {
			t.s.close()
		}
	}()
	if mutex, err := libraryByID("simba-" + store); err == nil {
		c, err := newCycler(ctx, e, mutex)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", mutex.id, err))
		} else {
			turns, entries = append(turns, &turn{name: mutex.id, s: c}), append(entries, entry{mutex.id + "/mutex", "simba, mutex (Locker)"})
		}
	}
	for _, l := range libs {
		if l.oneBackend {
			continue // one client: as the backend-per-client library
		}
		for _, mode := range l.modes {
			c, err := l.open(ctx, e, e.mutex("hc", l.id), mode, holdPermits, nil)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", l.id, mode, err))
				continue
			}
			turns = append(turns, &turn{name: l.id + "/" + mode, s: &cycler{c}})
			entries = append(entries, entry{l.id + "/" + mode, l.name + ", " + modeTitle(mode)})
		}
	}
	interleave(ctx, turns, s.CycleWarm, s.Cycles, 100)
	for i, t := range turns {
		if t.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, t.err))
			continue
		}
		r, err := cycleTurnResult(ctx, e, store, entries[i].name, entries[i].id, t, s.CountCycles)
		if err != nil {
			errs = append(errs, err)
		}
		h.Cycles = append(h.Cycles, r)
		logf("  %-28s p50 %s p99 %s %.0f/s", t.name, ms(r.P50), ms(r.P99), r.PerSecond)
	}
	return errors.Join(errs...)
}

func modeTitle(mode string) string {
	switch mode {
	case modePermit:
		return fmt.Sprintf("permit of %d", holdPermits)
	case modeRead:
		return "read (RLock)"
	case modeWrite:
		return "write (Lock)"
	}
	return mode
}

// openHoldClients opens n clients of l on name, and returns them with the function that
// closes them (and the shared backend).
func openHoldClients(ctx context.Context, e *env, l holdLib, name string, modes []string, permits int) ([]client, func(), error) {
	var shared *simbaBackend
	var clients []client
	closeAll := func() {
		for _, c := range clients {
			_ = c.close()
		}
		if shared != nil {
			_ = shared.close()
		}
	}
	if l.oneBackend {
		sb, err := newSimbaBackend(e, l.store)
		if err != nil {
			return nil, nil, err
		}
		shared = sb
	}
	for _, mode := range modes {
		c, err := l.open(ctx, e, name, mode, permits, shared)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, c)
	}
	return clients, closeAll, nil
}

// measureHoldHandOver times hand-overs of a semaphore's permit: permits clients hold one
// each and one more waits; once the store shows it waiting, a holder (each in turn)
// releases after a random time below eventHold, and the time runs from that release call
// to the waiter's acquire returning. The waiter then holds, and the releaser waits next.
func measureHoldHandOver(ctx context.Context, e *env, l holdLib, permits, warm, n int) (handOverResult, error) {
	modes := slices.Repeat([]string{modePermit}, permits+1)
	clients, closeAll, err := openHoldClients(ctx, e, l, e.mutex("hh", l.id), modes, permits)
	if err != nil {
		return handOverResult{}, err
	}
	defer closeAll()
	releases := make([]func(context.Context) error, len(clients))
	defer func() {
		for _, r := range releases {
			if r != nil {
				_ = r(context.WithoutCancel(ctx))
			}
		}
	}()
	for i := range permits {
		if releases[i], err = clients[i].acquire(ctx); err != nil {
			return handOverResult{}, fmt.Errorf("take permit %d: %w", i, err)
		}
	}
	waiter, next := permits, 0
	var times sample
	for i := range warm + n {
		d, release, _, err := handOverOnce(ctx, clients[waiter], releases[next], eventHold)
		releases[next], releases[waiter] = nil, release
		if err != nil {
			return handOverResult{}, fmt.Errorf("hand-over %d: %w", i, err)
		}
		if i >= warm {
			times = append(times, d)
		}
		// The releaser waits next; the next holder to release is the one after it.
		released := next
		waiter, next = released, (released+1)%len(clients)
		if next == waiter {
			next = (next + 1) % len(clients)
		}
	}
	return handOverResult{
		Store: l.store, Library: l.name, ID: l.id, Samples: len(times),
		P50: times.quantile(0.5), P99: times.quantile(0.99), Max: times.max(),
		Hold: eventHold, Times: times,
	}, nil
}

// measureHoldLoop runs n clients that loop acquire, an empty section, release: on a
// semaphore of holdPermits (rw false), or on a read-write lock, rwWriters of them writing
// and the others reading. After warm it counts each client's sections for window. A
// client is inside from its acquire's return to its release call; an entry that breaks
// the hold's rule is a breach.
func measureHoldLoop(ctx context.Context, e *env, l holdLib, n int, rw bool, warm, window time.Duration) (holdLoopResult, error) {
	modes := slices.Repeat([]string{modePermit}, n)
	if rw {
		modes = slices.Repeat([]string{modeRead}, n)
		for i := range min(rwWriters, n) {
			modes[n-1-i] = modeWrite
		}
	}
	clients, closeAll, err := openHoldClients(ctx, e, l, e.mutex("hl", l.id), modes, holdPermits)
	if err != nil {
		return holdLoopResult{}, err
	}
	defer closeAll()
	var inside, writing, most, breaches atomic.Int64
	// enter records a client's entry by its mode and returns its exit.
	enter := func(i int) func() {
		if modes[i] == modeWrite {
			if writing.Add(1) != 1 || inside.Load() != 0 {
				breaches.Add(1)
			}
			return func() { writing.Add(-1) }
		}
		in := inside.Add(1)
		if modes[i] == modePermit && in > holdPermits || modes[i] == modeRead && writing.Load() != 0 {
			breaches.Add(1)
		}
		for m := most.Load(); in > m && !most.CompareAndSwap(m, in); m = most.Load() {
		}
		return func() { inside.Add(-1) }
	}
	run, err := runLoops(ctx, e, l.store, clients, enter, warm, window, func() {})
	if err != nil {
		return holdLoopResult{}, err
	}
	res := holdLoopResult{Store: l.store, Library: l.name, ID: l.id, Clients: n, Window: run.elapsed, PerClient: run.counts,
		MostInside: most.Load(), Breaches: breaches.Load(), Errors: run.failures, FirstErr: run.firstErr}
	if rw {
		res.Writers = min(rwWriters, n)
	} else {
		res.Permits = holdPermits
	}
	lo, hi := int64(-1), int64(0)
	for i, v := range run.counts {
		res.Sections += v
		switch modes[i] {
		case modeWrite:
			res.Writes += v
			continue // fairness: among the readers (or the permits' holders)
		case modeRead:
			res.Reads += v
		}
		hi = max(hi, v)
		if lo < 0 || v < lo {
			lo = v
		}
	}
	res.PerSecond = float64(res.Sections) / run.elapsed.Seconds()
	if hi > 0 {
		res.Fairness = float64(lo) / float64(hi)
	}
	if res.Sections > 0 && run.work != nil {
		res.ServerOpsPerSection, _ = run.work.per(countRequests, float64(res.Sections))
	}
	return res, nil
}
