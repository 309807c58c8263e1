package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// eventHold is how long, at most, a holder of an event-driven library holds the mutex
// after its waiter was seen waiting; the exact time is random in [0, eventHold).
const eventHold = 2 * time.Millisecond

// cycleResult is the uncontended figure of one library (or a store's floor).
type cycleResult struct {
	Store     string        `json:"store"`
	Library   string        `json:"library"`
	ID        string        `json:"id"`
	Samples   int           `json:"samples"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	PerSecond float64       `json:"per_second"`
	// Store work per cycle, from the server's counters over cycles of their own after the
	// timed ones (countCycles); absent when not counted.
	Counted  int                `json:"counted,omitempty"`
	PerCycle map[string]float64 `json:"per_cycle,omitempty"`
}

// cycler times uncontended acquire + release cycles of one client.
type cycler struct{ c client }

func newCycler(ctx context.Context, e *env, lib library) (*cycler, error) {
	c, err := lib.open(ctx, e, e.mutex("u", lib.id), openOptions{})
	if err != nil {
		return nil, err
	}
	return &cycler{c}, nil
}

func (y *cycler) step(ctx context.Context) (time.Duration, error) {
	t := time.Now()
	release, err := y.c.acquire(ctx)
	if err != nil {
		return 0, err
	}
	if err := release(ctx); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}

func (y *cycler) close() { _ = y.c.close() }

// countCycles makes n more cycles and returns the store's counters per cycle (nil when
// the store has none).
func (y *cycler) countCycles(ctx context.Context, e *env, store string, n int) (map[string]float64, error) {
	before, err := readCounts(ctx, e, store)
	if err != nil || len(before) == 0 {
		return nil, err
	}
	for range n {
		if _, err := y.step(ctx); err != nil {
			return nil, err
		}
	}
	after, err := readCounts(ctx, e, store)
	if err != nil {
		return nil, err
	}
	d := after.since(before)
	out := map[string]float64{}
	for k := range d {
		out[k], _ = d.per(k, float64(n))
	}
	return out, nil
}

// opStepper times an operation.
type opStepper struct {
	op      func() error
	closeFn func()
}

func (o *opStepper) step(context.Context) (time.Duration, error) {
	t := time.Now()
	err := o.op()
	return time.Since(t), err
}

func (o *opStepper) close() { o.closeFn() }

// cycleResultOf summarises timed cycles.
func cycleResultOf(store, name, id string, times sample) cycleResult {
	var total time.Duration
	for _, t := range times {
		total += t
	}
	r := cycleResult{Store: store, Library: name, ID: id, Samples: len(times), P50: times.quantile(0.5), P99: times.quantile(0.99)}
	if total > 0 {
		r.PerSecond = float64(len(times)) / total.Seconds()
	}
	return r
}

// newFloor returns a stepper for one raw round trip to a store on a connection of its
// own: PING, SELECT 1 on a pinned connection, exists("/").
func newFloor(ctx context.Context, e *env, store string) (name string, _ stepper, _ error) {
	switch store {
	case storeRedis:
		rc := newRedisClient(e.Redis)
		rc.AddHook(&commands{})
		return "PING", &opStepper{op: func() error { return rc.Ping(ctx).Err() }, closeFn: func() { _ = rc.Close() }}, nil
	case storeSQL, storePostgres:
		db, err := openSQL(e, store)
		if err != nil {
			return "", nil, err
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			_ = db.Close()
			return "", nil, err
		}
		op := func() error {
			var one int
			return conn.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}
		return "SELECT 1", &opStepper{op: op, closeFn: func() { _ = conn.Close(); _ = db.Close() }}, nil
	case storeZooKeeper:
		conn, _, err := zkConnect(e.ZooKeeper, nil)
		if err != nil {
			return "", nil, err
		}
		op := func() error {
			_, _, err := conn.Exists("/")
			return err
		}
		return "exists", &opStepper{op: op, closeFn: conn.Close}, nil
	case storeEtcd:
		f, err := etcdFloor(ctx, e)
		return "Get", f, err
	}
	return "", nil, fmt.Errorf("no floor for store %q", store)
}

// newWriteFloor returns a stepper for one autocommitted UPDATE of a one-row table (InnoDB
// on MariaDB) on a pinned connection: a round trip plus a transaction commit, the least a
// lease kept in a table costs per change.
func newWriteFloor(ctx context.Context, e *env, store string) (stepper, error) {
	db, err := openSQL(e, store)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	closeFn := func() { _ = conn.Close(); _ = db.Close() }
	setup := []string{
		"CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL) ENGINE = InnoDB",
		"INSERT IGNORE INTO bench_floor VALUES (1, 0)",
	}
	update := "UPDATE bench_floor SET v = v + 1 WHERE id = ?"
	if store == storePostgres {
		setup = []string{
			"CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL)",
			"INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING",
		}
		update = "UPDATE bench_floor SET v = v + 1 WHERE id = $1"
	}
	for _, stmt := range setup {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			closeFn()
			return nil, fmt.Errorf("write floor: %w", err)
		}
	}
	op := func() error {
		_, err := conn.ExecContext(ctx, update, 1)
		return err
	}
	return &opStepper{op: op, closeFn: closeFn}, nil
}

// openSQL opens a pool of its own on an SQL store: MariaDB or PostgreSQL.
func openSQL(e *env, store string) (*sql.DB, error) {
	if store == storePostgres {
		return sql.Open("pgx", e.PgDSN)
	}
	return sql.Open("mysql", e.DSN)
}

// handOverResult is the hand-over figure of one library.
type handOverResult struct {
	Store   string        `json:"store"`
	Library string        `json:"library"`
	ID      string        `json:"id"`
	Samples int           `json:"samples"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
	Hold    time.Duration `json:"hold_window_ns"` // the holder held for a random time below it
	GiveUps int64         `json:"give_ups"`
	Times   sample        `json:"times_ns"`
}

type acquired struct {
	release func(context.Context) error
	at      time.Time
	err     error
}

// handOver times hand-overs between two clients with connections of their own. They
// take turns: the waiter starts acquiring, the figure waits until the store (or, for a
// polling library, the client's first attempt) shows it waiting, the holder holds on for
// a random time below the hold window, and the time runs from the holder's release call
// to the waiter's acquire returning.
type handOver struct {
	lib     library
	clients [2]client
	holder  int
	release func(context.Context) error // the holder's
	since   time.Time                   // when the holder acquired
	hold    time.Duration
}

// retakeAfter is how long a hand-over's holder may have held before a step: the peers do
// not renew their locks (redsync's expiry is 8s), and the other libraries' turns between
// two of this one's can take longer than that (simba's waiter waits for its stale
// subscription of the previous wait to go, up to a second a step): a peer's waiter then
// acquired at once, and the figure failed with "the waiter acquired while the holder
// held". An older hold is released and taken again, untimed, so that no step begins on
// a lock that has lapsed.
const retakeAfter = 2 * time.Second

func newHandOver(ctx context.Context, e *env, lib library) (*handOver, error) {
	h := &handOver{lib: lib, hold: lib.poll}
	if h.hold == 0 {
		h.hold = eventHold
	}
	mutex := e.mutex("h", lib.id)
	for i := range h.clients {
		c, err := lib.open(ctx, e, mutex, openOptions{})
		if err != nil {
			h.close()
			return nil, err
		}
		h.clients[i] = c
	}
	release, err := h.clients[0].acquire(ctx)
	if err != nil {
		h.close()
		return nil, err
	}
	h.release, h.since = release, time.Now()
	return h, nil
}

// retake releases the holder's lock (or what is left of it) and acquires it again when
// it was taken more than retakeAfter ago.
func (h *handOver) retake(ctx context.Context) error {
	if time.Since(h.since) < retakeAfter {
		return nil
	}
	_ = h.release(ctx) // a peer's lock may have lapsed already, and its release fails
	h.release = nil
	release, err := h.clients[h.holder].acquire(ctx)
	if err != nil {
		return fmt.Errorf("take again: %w", err)
	}
	h.release, h.since = release, time.Now()
	return nil
}

func (h *handOver) close() {
	if h.release != nil {
		_ = h.release(context.Background())
		h.release = nil
	}
	for _, c := range h.clients {
		if c != nil {
			_ = c.close()
		}
	}
}

func (h *handOver) giveUps() int64 { return h.clients[0].giveUps() + h.clients[1].giveUps() }

// step makes one hand-over and returns its latency. After an error the hand-over is
// broken: close it.
func (h *handOver) step(ctx context.Context) (time.Duration, error) {
	if err := h.retake(ctx); err != nil {
		return 0, err
	}
	d, release, at, err := handOverOnce(ctx, h.clients[1-h.holder], h.release, h.hold)
	h.release = nil
	if err != nil {
		return 0, err
	}
	h.release, h.holder, h.since = release, 1-h.holder, at
	return d, nil
}

// handOverOnce makes one hand-over to w: w starts acquiring, and once it is seen waiting
// and a random time below hold has passed, release is called. It returns the time from
// that call to w's acquire returning, w's release, and when it acquired. On an error
// release has been called (a waiter that takes no context, zk.Lock, then returns too) and
// whatever w got is released.
func handOverOnce(ctx context.Context, w client, release func(context.Context) error, hold time.Duration) (time.Duration, func(context.Context) error, time.Time, error) {
	if err := w.armWait(ctx); err != nil {
		_ = release(context.WithoutCancel(ctx))
		return 0, nil, time.Time{}, fmt.Errorf("arm the waiter: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got := make(chan acquired, 1)
	go func() {
		r, err := w.acquire(wctx)
		got <- acquired{r, time.Now(), err}
	}()
	released := false
	abandon := func(err error) (time.Duration, func(context.Context) error, time.Time, error) {
		cancel()
		if !released {
			_ = release(context.WithoutCancel(ctx))
		}
		select {
		case a := <-got:
			if a.err == nil {
				_ = a.release(context.WithoutCancel(ctx))
			}
		case <-time.After(time.Minute):
		}
		return 0, nil, time.Time{}, err
	}
	if err := waitFor(ctx, 10*time.Second, 100*time.Microsecond, "waiter waiting", w.waiting); err != nil {
		return abandon(err)
	}
	if err := sleep(ctx, rand.N(hold)); err != nil {
		return abandon(err)
	}
	select {
	case a := <-got:
		got <- a
		if a.err != nil {
			return abandon(fmt.Errorf("the waiter gave up while the holder held: %w", a.err))
		}
		return abandon(errors.New("the waiter acquired while the holder held"))
	default:
	}
	began := time.Now()
	err := release(ctx)
	released = true
	if err != nil {
		return abandon(fmt.Errorf("release: %w", err))
	}
	a := <-got
	if a.err != nil {
		return 0, nil, time.Time{}, fmt.Errorf("waiter: %w", a.err)
	}
	return a.at.Sub(began), a.release, a.at, nil
}

// contendedResult is the contended figure of one library.
type contendedResult struct {
	Store     string        `json:"store"`
	Library   string        `json:"library"`
	ID        string        `json:"id"`
	Clients   int           `json:"clients"`
	Window    time.Duration `json:"window_ns"`
	Sections  int64         `json:"sections"`
	PerSecond float64       `json:"per_second"`
	PerClient []int64       `json:"per_client"`
	Fairness  float64       `json:"fairness"` // min / max sections per client
	Overlaps  int64         `json:"overlaps"`
	GiveUps   int64         `json:"give_ups"`
	Errors    int64         `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	// Store work per critical section, from the server's counters (countRequests, and
	// Redis's CPU in µs); and, for simba on a lease store, acquire calls that found the
	// mutex owned by another client.
	ServerOpsPerSection float64 `json:"server_ops_per_section,omitempty"`
	ServerCPUPerSection float64 `json:"server_cpu_us_per_section,omitempty"`
	LostPerSection      float64 `json:"lost_attempts_per_section,omitempty"`
}

// measureContended runs clients that each loop acquire, an empty critical section,
// release, on one mutex, each with a connection of its own. After warm, it counts the
// critical sections of each client for window. A client is in its section from its
// acquire's return to its release call; a second client entering meanwhile is an
// overlap.
func measureContended(ctx context.Context, e *env, lib library, n int, warm, window time.Duration) (contendedResult, error) {
	mutex := e.mutex("c", lib.id)
	clients := make([]client, n)
	for i := range clients {
		c, err := lib.open(ctx, e, mutex, openOptions{})
		if err != nil {
			return contendedResult{}, err
		}
		defer c.close()
		clients[i] = c
	}
	var (
		inSection atomic.Int32
		overlaps  atomic.Int64
		lost      []int64
	)
	enter := func(int) func() {
		if inSection.Add(1) != 1 {
			overlaps.Add(1)
		}
		return func() { inSection.Add(-1) }
	}
	run, err := runLoops(ctx, e, lib.store, clients, enter, warm, window, func() { lost = append(lost, lostAttempts(clients)) })
	if err != nil {
		return contendedResult{}, err
	}
	res := contendedResult{
		Store: lib.store, Library: lib.name, ID: lib.id, Clients: n, Window: run.elapsed,
		Overlaps: overlaps.Load(), Errors: run.failures, FirstErr: run.firstErr, PerClient: run.counts,
	}
	lo, hi := int64(-1), int64(0)
	for i, v := range run.counts {
		res.Sections += v
		hi = max(hi, v)
		if lo < 0 || v < lo {
			lo = v
		}
		res.GiveUps += clients[i].giveUps()
	}
	res.PerSecond = float64(res.Sections) / run.elapsed.Seconds()
	if res.Sections > 0 {
		if run.work != nil {
			res.ServerOpsPerSection, _ = run.work.per(countRequests, float64(res.Sections))
			res.ServerCPUPerSection, _ = run.work.per(countCPU, float64(res.Sections))
		}
		res.LostPerSection = float64(lost[1]-lost[0]) / float64(res.Sections)
	}
	if hi > 0 {
		res.Fairness = float64(lo) / float64(hi)
	}
	return res, nil
}

// loopRun is what clients looping acquire, a section, release did in a window.
type loopRun struct {
	counts   []int64 // sections of each client
	elapsed  time.Duration
	failures int64
	firstErr string
	work     storeCounts // the store's counters over the window; nil when not read
}

// runLoops runs clients that each loop acquire, a section, release until it returns. A
// client's section is enter(i) on acquire's return and the exit it returns, before its
// release call. After warm it counts each client's sections for window; edge runs as the
// window begins and as it ends, after the store's counters are read.
func runLoops(ctx context.Context, e *env, store string, clients []client, enter func(i int) func(), warm, window time.Duration, edge func()) (loopRun, error) {
	var (
		failures atomic.Int64
		firstErr atomic.Value
		counting atomic.Bool
		counts   = make([]atomic.Int64, len(clients))
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	for i, c := range clients {
		wg.Go(func() {
			for run.Err() == nil {
				release, err := c.acquire(run)
				if err != nil {
					if run.Err() == nil {
						fail(err)
						_ = sleep(run, 10*time.Millisecond)
					}
					continue
				}
				exit := enter(i)
				if counting.Load() {
					counts[i].Add(1)
				}
				exit()
				if err := release(context.WithoutCancel(run)); err != nil {
					fail(fmt.Errorf("release: %w", err))
				}
			}
		})
	}
	if err := sleep(ctx, warm); err != nil {
		return loopRun{}, err
	}
	counts0, countsErr := readCounts(ctx, e, store)
	edge()
	counting.Store(true)
	began := time.Now()
	_ = sleep(ctx, window)
	counting.Store(false)
	res := loopRun{elapsed: time.Since(began)}
	counts1, countsErr1 := readCounts(ctx, e, store)
	edge()
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		return loopRun{}, errors.New("clients did not stop within a minute")
	}
	if err := ctx.Err(); err != nil {
		return loopRun{}, err
	}
	res.failures = failures.Load()
	if s, ok := firstErr.Load().(string); ok {
		res.firstErr = s
	}
	for i := range counts {
		res.counts = append(res.counts, counts[i].Load())
	}
	if countsErr == nil && countsErr1 == nil {
		res.work = counts1.since(counts0)
	}
	return res, nil
}

// lostAttempts sums the acquire calls of simba clients that found the mutex owned.
func lostAttempts(clients []client) int64 {
	var n int64
	for _, c := range clients {
		if sc, ok := c.(*simbaClient); ok && sc.backend != nil {
			n += sc.backend.lost.Load()
		}
	}
	return n
}
