package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/memory"
	simbaredis "github.com/simba-go/simba/backend/redis"
)

// heldPool is the connection pool of the SQL stores' held-mutex runs.
const heldPool = 10

// scaleResult is one run of the scale figure: n Lockers of one process, each holding a
// mutex of its own, on one backend.
type scaleResult struct {
	Store      string        `json:"store"`
	Contenders int           `json:"contenders"`
	TTL        time.Duration `json:"ttl_ns"`
	Lead       time.Duration `json:"renewal_lead_ns"`
	LeadLabel  string        `json:"renewal_lead"`
	Ramp       time.Duration `json:"ramp_ns"` // acquiring all of them
	// Per contender, at steady state (every owner has renewed at least once).
	HeapBytes      float64 `json:"heap_bytes"`       // live heap (HeapAlloc after GC), goroutine descriptors left out
	PeakGoroutines float64 `json:"peak_goroutines"`  // the most goroutines at once, sampled every ms; 0: not sampled
	HeapInuseBytes float64 `json:"heap_inuse_bytes"` // heap spans in use
	StackBytes     float64 `json:"stack_bytes"`
	Goroutines     float64 `json:"goroutines"`
	// Store load over a whole number of renewal periods.
	Window       time.Duration `json:"window_ns"`
	Periods      int           `json:"periods"`        // renewal periods in the window
	Calls        int64         `json:"calls"`          // acquire/renew calls, counted by the wrapper
	OpsPerSecond float64       `json:"ops_per_second"` // Calls / Window
	ServerOps    float64       `json:"server_ops"`     // Redis: scripts (EVALSHA, EVAL, FCALL) per second from INFO commandstats
	Ideal        float64       `json:"ideal"`          // N / ttl
	// The store's own counts per renewal period over the window (storeCounts names),
	// and the most client connections it had open meanwhile beyond those open before the
	// backend was made (absent on memory).
	PerPeriod   map[string]float64 `json:"store_per_period,omitempty"`
	Connections int64              `json:"connections,omitempty"`
	// Renewals: the interval between two renewals of one owner, against ttl - lead.
	Period       time.Duration `json:"period_ns"`
	Renewals     int64         `json:"renewals"`
	IntervalMean time.Duration `json:"interval_mean_ns"`
	IntervalP99  time.Duration `json:"interval_p99_ns"`
	IntervalMax  time.Duration `json:"interval_max_ns"`
	Late         int           `json:"late"` // owners whose lease context ended: belief lost
	// LateCauses counts the late owners by their lease context's cause, the mutex's name
	// taken out.
	LateCauses map[string]int `json:"late_causes,omitempty"`
}

// durations matches the durations in an error's text.
var durations = regexp.MustCompile(`[0-9.]+(ns|µs|ms|s|m)\b`)

// scalePlan is what one scale run does.
type scalePlan struct {
	store   string
	n       int
	ttl     time.Duration
	lead    time.Duration // zero: simba's default (ttl/3)
	periods int           // renewal periods to measure the load over; 0: none (a warm-up)
	profile string        // file for a heap profile at steady state, or ""
}

// measureScale makes n Lockers on one backend acquire a mutex each, waits for whole
// renewal periods, and reports memory per contender, store calls per second against
// N/ttl, and whether any owner lost its lease.
func measureScale(ctx context.Context, e *env, p scalePlan) (scaleResult, error) {
	lead, label := p.lead, "ttl/20"
	if lead == 0 {
		lead, label = p.ttl/3, "ttl/3 (default)"
	} else if lead != p.ttl/20 {
		label = lead.String()
	}
	period := p.ttl - lead
	res := scaleResult{
		Store: p.store, Contenders: p.n, TTL: p.ttl, Lead: lead, LeadLabel: label,
		Ideal: float64(p.n) / p.ttl.Seconds(), Period: period,
	}
	// What the figure itself keeps is allocated before the baseline.
	renewals := newIntervals(2 * p.ttl)
	lockers := make([]*simba.Locker, p.n)
	leases := make([]*simba.Lease, p.n)
	names := make([]string, p.n)
	var (
		be      simba.Backend
		pool    *sql.DB // the SQL stores' pool
		closeBe func()
		warm    func(context.Context) error
	)
	conns0, countsConns, err := storeConnections(ctx, e, p.store) // before the client is made
	if err != nil {
		return res, err
	}
	switch p.store {
	case storeMemory:
		mb, err := memory.New(memory.NewStore())
		if err != nil {
			return res, err
		}
		be, closeBe = mb, func() { _ = mb.Close() }
	case storeRedis:
		rc := newRedisClient(e.Redis)
		rb, err := simbaredis.New(rc)
		if err != nil {
			_ = rc.Close()
			return res, err
		}
		be, closeBe = rb, func() { _ = rb.Close(); _ = rc.Close() }
		warm = func(ctx context.Context) error { return rc.Ping(ctx).Err() }
	case storeSQL, storePostgres:
		db, err := openSQL(e, p.store)
		if err != nil {
			return res, err
		}
		// A pool of 10, the size the backend's documentation takes as an example.
		db.SetMaxOpenConns(heldPool)
		db.SetMaxIdleConns(heldPool)
		var opts []jdbc.Option
		if p.store == storePostgres {
			opts = append(opts, jdbc.WithDialect(jdbc.Postgres))
		}
		jb, err := jdbc.New(db, opts...)
		if err != nil {
			_ = db.Close()
			return res, err
		}
		be, closeBe, pool = jb, func() { _ = jb.Close(); _ = db.Close() }, db
		warm = db.PingContext
	default:
		return res, fmt.Errorf("no scale figure on %s", p.store)
	}
	defer closeBe()
	cb := &counting{Backend: be, renewals: renewals}
	opts := []simba.LockerOption{simba.WithTTL(p.ttl)}
	if p.lead != 0 {
		opts = append(opts, simba.WithRenewalLead(p.lead))
	}

	if warm != nil {
		// Dial the client's pool, as wide as the parallel acquisitions will make it,
		// before the baseline: its buffers are a fixed cost, not one per contender.
		if err := parallel(ctx, 64*4, 64, func(int) error { return warm(ctx) }); err != nil {
			return res, err
		}
	}
	m0, g0 := heapBaseline(p.n)
	stalls := watchStalls(ctx, e, p.store, pool)
	defer stalls.end()
	began := time.Now()
	err = parallel(ctx, p.n, 64, func(i int) error {
		names[i] = fmt.Sprintf("b%s-s-%s-%d-%d", e.run, p.store, e.names.Add(1), i)
		l, err := simba.NewLocker(cb, names[i], opts...)
		if err != nil {
			return err
		}
		lease, err := l.Acquire(ctx)
		if err != nil {
			return err
		}
		lockers[i], leases[i] = l, lease
		return nil
	})
	defer releaseAll(leases)
	if err != nil {
		return res, fmt.Errorf("acquire: %w", err)
	}
	res.Ramp = time.Since(began)

	// Renewals come in waves, one per period, each as wide as the ramp. Count over whole
	// periods from the quiet middle between the first wave (after which every owner
	// has renewed once and, on Redis, subscribed) and the second: every owner then
	// renews exactly as many times within the window, and calls / window is the steady
	// rate.
	if p.periods == 0 { // a warm-up: no load window, memory right after acquiring
		m1, g1 := heapNow()
		res.HeapBytes = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(p.n)
		res.Goroutines = float64(g1-g0) / float64(p.n)
		return res, nil
	}
	peak := sampleGoroutines() // over the renewal waves from the first on
	defer peak()
	settle := period + res.Ramp
	if res.Ramp < period {
		settle += (period - res.Ramp) / 2
	}
	if err := sleep(ctx, time.Until(began.Add(settle))); err != nil {
		return res, err
	}
	renewals.reset()
	cb.calls.Store(0)
	counts0, err := readCounts(ctx, e, p.store)
	if err != nil {
		return res, err
	}
	window := time.Duration(p.periods) * period
	start := time.Now()
	// Sample the store's connections every second meanwhile.
	for end := start.Add(window); ; {
		if countsConns {
			n, _, err := storeConnections(ctx, e, p.store)
			if err != nil {
				return res, err
			}
			res.Connections = max(res.Connections, n-conns0)
		}
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if err := sleep(ctx, min(left, time.Second)); err != nil {
			return res, err
		}
	}
	res.Window = time.Since(start)
	res.Calls = cb.calls.Load()
	counts1, err := readCounts(ctx, e, p.store)
	if err != nil {
		return res, err
	}
	res.OpsPerSecond = float64(res.Calls) / res.Window.Seconds()
	if d := counts1.since(counts0); len(d) > 0 {
		res.PerPeriod = map[string]float64{}
		for k := range d {
			res.PerPeriod[k], _ = d.per(k, float64(p.periods))
		}
		if scripts, ok := d[countScripts]; ok {
			res.ServerOps = float64(scripts) / res.Window.Seconds()
		}
	}
	res.Periods = p.periods
	res.Renewals, res.IntervalMean, res.IntervalMax = renewals.stats()
	res.IntervalP99 = renewals.quantile(0.99)
	for i, l := range leases {
		if l.Context().Err() != nil {
			res.Late++
			if res.LateCauses == nil {
				res.LateCauses = map[string]int{}
			}
			cause := strings.ReplaceAll(context.Cause(l.Context()).Error(), names[i], "<mutex>")
			res.LateCauses[durations.ReplaceAllString(cause, "<d>")]++
		}
	}
	stalls.stop(ctx, e, res.Late)

	m1, g1 := heapNow()
	n := float64(p.n)
	res.HeapBytes = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / n
	res.HeapInuseBytes = (float64(m1.HeapInuse) - float64(m0.HeapInuse)) / n
	res.StackBytes = (float64(m1.StackInuse) - float64(m0.StackInuse)) / n
	res.Goroutines = float64(g1-g0) / n
	res.PeakGoroutines = float64(peak()-g0) / n
	if p.profile != "" {
		if err := writeHeapProfile(p.profile); err != nil {
			return res, err
		}
	}
	return res, nil
}

// goroutines formats the goroutines per contender at the end and the most at once.
func (s scaleResult) goroutines() string {
	if s.PeakGoroutines == 0 {
		return fmt.Sprintf("%.2f", s.Goroutines) // not sampled
	}
	return fmt.Sprintf("%.2f (%.2f)", s.Goroutines, s.PeakGoroutines)
}

// heapBaseline returns heapNow once the runtime keeps a descriptor for n goroutines more
// than run now. The runtime never frees a goroutine's descriptor (about 450 bytes in Go
// 1.26) and reuses it for later goroutines, so the heap keeps one for the most goroutines
// that ever ran at once: when every owner renews at the same instant (the renewal grid),
// one per owner. Made here, they are in the baseline of every run alike, whether or not
// an earlier run of the process had as many goroutines at once; the most a run has is
// measured apart (sampleGoroutines).
func heapBaseline(n int) (runtime.MemStats, int) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range runtime.NumGoroutine() + n {
		wg.Go(func() { <-gate })
	}
	close(gate)
	wg.Wait()
	return heapNow()
}

// sampleGoroutines samples runtime.NumGoroutine every millisecond until stop is first
// called, which returns the most it saw (as do later calls).
func sampleGoroutines() (stop func() int) {
	var (
		peak = runtime.NumGoroutine()
		done = make(chan struct{})
		over = make(chan struct{})
	)
	go func() {
		defer close(over)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, runtime.NumGoroutine())
			}
		}
	}()
	return sync.OnceValue(func() int {
		close(done)
		<-over
		return peak
	})
}

// heapNow collects garbage and returns the memory statistics and goroutine count.
func heapNow() (runtime.MemStats, int) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m, runtime.NumGoroutine()
}

func writeHeapProfile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

// releaseAll releases every lease that was acquired.
func releaseAll(leases []*simba.Lease) {
	_ = parallel(context.Background(), len(leases), 64, func(i int) error {
		if l := leases[i]; l != nil {
			_ = l.Release(context.Background())
		}
		return nil
	})
}

// parallel runs f(0) .. f(n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// writeHeld writes the store's requests per renewal period of the many-held-mutex runs.
func (r *results) writeHeld(b *bytes.Buffer) {
	fmt.Fprintf(b, "The scale figure's %s Lockers, each holding a mutex of its own, on one backend of one process, ttl %v, simba's default renewal lead (a renewal every 2/3 ttl): the requests the store served per renewal period, over the whole periods of the load window, next to N (one request per mutex and period: renewals not batched) and issue 35's goal, at most 1.1 × the connections the backend kept open (one batched request per connection and period). Requests are the store's own counts: on Redis the scripts run (INFO commandstats; simba renews with one script, whose inner commands are counted apart), on MariaDB the UPDATE statements (Com_update and Com_update_multi; all statements: Questions), on PostgreSQL the statements (pg_stat_statements; transactions committed: xact_commit of pg_stat_database). \"Backend calls\" are the renewals the Lockers asked for, counted around the backend. Connections: the most the store counted open (Redis connected_clients, MariaDB Threads_connected, PostgreSQL's client backends), sampled every second of the window, less those open before the backend was made; the SQL backends get a pool of %d (SetMaxOpenConns), the Redis one go-redis's default. ZooKeeper is not in it: its owners renew nothing, the session's heartbeat (one ping per connection every third of the session timeout) keeps every node of the session.\n\n",
		thousands(r.Settings.ScaleN), r.Settings.ScaleTTL, heldPool)
	b.WriteString("| store | mutexes | renewal period | periods | backend calls / period | store requests / period | store's other counts / period | N | connections | goal ≤ 1.1 × connections | late |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, h := range r.heldRuns() {
		req, ok := heldRequests(h)
		reqCell, goalCell := "not counted", "–"
		if ok {
			reqCell = fmt.Sprintf("%.0f", req)
			goalCell = fmt.Sprintf("%.0f: %s", 1.1*float64(h.Connections), map[bool]string{true: "✅", false: "❌"}[h.Connections > 0 && req <= 1.1*float64(h.Connections)])
		}
		var other string
		p := h.PerPeriod
		switch h.Store {
		case storeRedis:
			other = fmt.Sprintf("%.0f commands, %.0f ms CPU", p[countRequests], p[countCPU]/1000)
		case storeSQL:
			other = fmt.Sprintf("%.0f statements, %.0f fsyncs", p[countRequests], p[countFsyncs])
		case storePostgres:
			other = fmt.Sprintf("%.0f transactions committed", p[countCommits])
		}
		perPeriod := 0.0
		if h.Periods > 0 {
			perPeriod = float64(h.Calls) / float64(h.Periods)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %.0f | %s | %s | %s | %d | %s | %d |\n",
			storeTitle(h.Store), thousands(h.Contenders), ms(h.Period), h.Periods, perPeriod, reqCell, other, thousands(h.Contenders), h.Connections, goalCell, h.Late)
	}
}

// heldRuns returns the runs of many held mutexes on a store with connections: Redis's at
// the default lead, and the SQL stores'.
func (r *results) heldRuns() []scaleResult {
	var out []scaleResult
	for _, s := range r.Scale {
		if s.Store == storeRedis && s.Lead == s.TTL/3 {
			out = append(out, s)
		}
	}
	return append(out, r.Held...)
}

// heldRequests returns a held-mutex run's store requests per renewal period: Redis
// scripts (simba renews with one), MariaDB UPDATEs, PostgreSQL statements.
func heldRequests(s scaleResult) (float64, bool) {
	k, ok := map[string]string{storeRedis: countScripts, storeSQL: countUpdates, storePostgres: countRequests}[s.Store]
	if !ok {
		return 0, false
	}
	v, ok := s.PerPeriod[k]
	return v, ok
}

// wholePeriodsIn returns the renewal periods that fit in window, at least one. A period
// of a ttl that 3 does not divide is a little longer than ttl × 2/3, hence the
// millisecond's slack: 20s holds 3 periods of 6.667s, not 2.
func wholePeriodsIn(window, period time.Duration) int {
	return max(int((window+time.Millisecond)/period), 1)
}
