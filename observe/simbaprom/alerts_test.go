package simbaprom_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
	"github.com/simba-go/simba/observe/simbaprom"
)

// The README's alerts, by the title of the comment above each expression.
const (
	noLeader        = "No leader"
	noContender     = "No contender"
	lostLeases      = "Lost leases"
	leaderFlapping  = "Leader flapping"
	acquisitionWait = "Acquisition wait"
	renewalsSlow    = "Renewals slow"
	renewalsFailing = "Renewals failing"
)

// The leader mutex the README's "No contender" alert names.
const reportMutex = "nightly-report"

// readmeAlerts returns the alert expressions of the README's "Metrics and tracing"
// section: each follows a comment "# <title>: <what it catches>".
func readmeAlerts(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section := string(readme)
	begin, end := strings.Index(section, "### Metrics and tracing"), strings.Index(section, "### Health checks")
	require.True(t, begin >= 0 && end > begin, "the README has no section Metrics and tracing")
	section = section[begin:end]
	alerts := map[string]string{}
	for _, block := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(section, -1) {
		title := ""
		for _, line := range strings.Split(block[1], "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "":
			case strings.HasPrefix(line, "#"):
				title, _, _ = strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ":")
			default:
				require.NotEmpty(t, title, "README alert %q has no title", line)
				_, dup := alerts[title]
				require.False(t, dup, "README alert %q has two expressions", title)
				alerts[title] = line
			}
		}
	}
	titles := []string{noLeader, noContender, lostLeases, leaderFlapping, acquisitionWait, renewalsSlow, renewalsFailing}
	for title := range alerts {
		assert.Contains(t, titles, title, "README alert without a test")
	}
	for _, title := range titles {
		require.Contains(t, alerts, title, "README alert missing")
	}
	return alerts
}

// TestReadmeAlerts runs the README's alert expressions, as written there, on scrapes of
// real services and Lockers in each state an alert is meant to catch, and in the healthy
// state: every process's registry is scraped through its HTTP handler every simulated
// minute into a Prometheus TSDB, and the expressions are evaluated by the PromQL engine
// after each scrape.
func TestReadmeAlerts(t *testing.T) {
	alerts := readmeAlerts(t)

	t.Run("healthy", func(t *testing.T) {
		t.Parallel()
		f := newFleet(t, alerts)
		a, b := f.process("a"), f.process("b")
		f.lead(a)
		f.contend(b)
		f.scrape()
		f.expect()
		for i := range 16 { // 16 minutes of steady leadership, and locks taken at once
			lockOnce(t, []*process{a, b}[i%2])
			if i%4 == 0 {
				await(t, a.tap.next(1, call(observe.OpRenew, succeeded)), "a renewal")
			}
			f.tick()
			f.expect()
		}
	})

	t.Run("store outage, then every process gone", func(t *testing.T) {
		f, a, b := healthyFleet(t, alerts)
		lost := a.tap.next(1, tenureEnded("store_error"))
		a.backend.fail(-1)
		b.backend.fail(-1)
		await(t, lost, "a's loss")
		f.tick()
		f.expect(noLeader, lostLeases, renewalsFailing)
		f.tick()
		f.expect(noLeader, lostLeases, renewalsFailing)
		f.down(a)
		f.down(b)
		f.tick()
		f.expect(noContender, lostLeases, renewalsFailing)
	})

	t.Run("leader cut off, another takes over", func(t *testing.T) {
		f, a, b := healthyFleet(t, alerts)
		lost := a.tap.next(1, tenureEnded("store_error"))
		leads := b.tap.next(1, tenureBegan(observe.RoleLeader))
		a.backend.fail(-1)
		await(t, lost, "a's loss")
		await(t, leads, "b to lead")
		f.tick()
		f.expect(lostLeases, renewalsFailing)
	})

	t.Run("leadership handed back and forth", func(t *testing.T) {
		f, a, b := healthyFleet(t, alerts)
		for i := range 5 {
			from, to := a, b
			if i%2 == 1 {
				from, to = b, a
			}
			leads := to.tap.next(1, tenureBegan(observe.RoleLeader))
			require.NoError(t, from.leader.Stop(t.Context()))
			await(t, leads, to.name+" to lead")
			f.contend(from)
			f.tick()
			if i < 2 {
				f.expect()
			} else {
				f.expect(leaderFlapping)
			}
		}
	})

	t.Run("slow acquisition", func(t *testing.T) {
		f, a, b := healthyFleet(t, alerts)
		lease, err := a.locker.Acquire(t.Context())
		require.NoError(t, err)
		tried := b.tap.next(1, call(observe.OpAcquire, anyCall))
		waited := make(chan error, 1)
		go func() {
			lease, err := b.locker.Acquire(context.Background())
			if err == nil {
				err = lease.Release(context.Background())
			}
			waited <- err
		}()
		await(t, tried, "b's attempt")
		<-time.After(1200 * time.Millisecond) // b waits this long at least: the slow acquisition
		require.NoError(t, lease.Release(t.Context()))
		select {
		case err := <-waited:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("b's acquisition did not return")
		}
		f.tick()
		f.expect(acquisitionWait)
	})

	t.Run("slow renewals", func(t *testing.T) {
		f, a, _ := healthyFleet(t, alerts)
		slow := a.tap.next(2, call(observe.OpRenew, func(c observe.Call) bool { return c.Err == nil && c.Latency > time.Second }))
		a.backend.slow(1200 * time.Millisecond)
		await(t, slow, "two slow renewals")
		a.backend.slow(0)
		f.tick()
		f.expect(renewalsSlow)
	})

	t.Run("renewals failing briefly", func(t *testing.T) {
		f, a, _ := healthyFleet(t, alerts)
		failed := a.tap.next(2, call(observe.OpRenew, func(c observe.Call) bool { return c.Err != nil }))
		a.backend.fail(2)
		await(t, failed, "two failed renewals")
		await(t, a.tap.next(1, call(observe.OpRenew, succeeded)), "a renewal")
		f.tick()
		f.expect(renewalsFailing)
	})
}

func succeeded(c observe.Call) bool { return c.Err == nil }

// lockOnce takes p's lock and gives it back at once.
func lockOnce(t *testing.T, p *process) {
	t.Helper()
	lease, err := p.locker.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
}

// scrapeInterval is the simulated time between scrapes.
const scrapeInterval = time.Minute

// fleet is processes that contend for reportMutex and lock "orders" on one store, each
// with its own registry, and a Prometheus that scrapes them.
type fleet struct {
	t         *testing.T
	alerts    map[string]string
	store     *memory.Store
	db        *teststorage.TestStorage
	engine    *promql.Engine
	now       time.Time // the simulated time of the last scrape
	processes []*process
	id        string // the fleet's part of its contender IDs: one process may hold one per mutex
}

var fleets atomic.Int64

// process is one simulated process: a leader service for reportMutex, a Locker for
// "orders", an Observer and the registry it writes to, served as Prometheus would scrape
// it.
type process struct {
	name    string
	backend *faultyBackend
	tap     *tap
	metrics http.Handler
	leader  *simba.Service
	locker  *simba.Locker
	down    bool
	last    map[string]labels.Labels // the series of the last scrape
}

func newFleet(t *testing.T, alerts map[string]string) *fleet {
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 1e6, Timeout: time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return scrapeInterval.Milliseconds() },
	})
	t.Cleanup(func() { _ = engine.Close() })
	return &fleet{
		t: t, alerts: alerts, store: memory.NewStore(), db: teststorage.New(t), engine: engine,
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), id: strconv.FormatInt(fleets.Add(1), 10),
	}
}

func (f *fleet) process(name string) *process {
	t := f.t
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	require.NoError(t, err)
	mb, err := memory.New(f.store)
	require.NoError(t, err)
	p := &process{
		name:    name,
		backend: &faultyBackend{Backend: mb},
		tap:     &tap{Observer: obs},
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}
	// Renewals every 300ms, each free to take up to 2s: a healthy leader never loses,
	// and one cut off loses within 3s.
	p.leader = leaderService(t, p.backend, reportMutex, name+"-"+f.id, simba.WithObserver(p.tap),
		simba.WithTTL(3*time.Second), simba.WithRenewalLead(2700*time.Millisecond),
		simba.WithCallTimeout(2*time.Second), simba.WithTransition(0))
	p.locker, err = simba.NewLocker(p.backend, "orders", simba.WithObserver(p.tap), simba.WithContenderID(name+"-"+f.id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.locker.Close() })
	f.processes = append(f.processes, p)
	return p
}

// lead starts p's leader service and waits for it to lead.
func (f *fleet) lead(p *process) {
	leads := p.tap.next(1, tenureBegan(observe.RoleLeader))
	require.NoError(f.t, p.leader.Start(f.t.Context()))
	await(f.t, leads, p.name+" to lead")
}

// contend starts p's leader service and waits for its first attempt, which finds the
// mutex owned.
func (f *fleet) contend(p *process) {
	tried := p.tap.next(1, call(observe.OpAcquire, anyCall))
	require.NoError(f.t, p.leader.Start(f.t.Context()))
	await(f.t, tried, p.name+"'s attempt")
}

// healthyFleet runs a parallel test's fleet of processes a and b, where a leads and b
// contends, and scrapes 4 minutes of that, with locks taken at once, in which no alert
// fires.
func healthyFleet(t *testing.T, alerts map[string]string) (f *fleet, a, b *process) {
	t.Parallel()
	f = newFleet(t, alerts)
	a, b = f.process("a"), f.process("b")
	f.lead(a)
	f.contend(b)
	f.scrape()
	for i := range 4 {
		lockOnce(t, []*process{a, b}[i%2])
		f.tick()
		f.expect()
	}
	return f, a, b
}

// down makes p's target fail its scrapes, as a dead process's does.
func (f *fleet) down(p *process) { p.down = true }

// tick advances the simulated time by a scrape interval and scrapes.
func (f *fleet) tick() {
	f.now = f.now.Add(scrapeInterval)
	f.scrape()
}

// scrape scrapes every process at f.now, as Prometheus does: the samples of a target that
// is up, labelled with job and instance, and a staleness marker for every series of its
// last scrape that is gone, or of a target that is down.
func (f *fleet) scrape() {
	t := f.t
	app := f.db.Appender(t.Context())
	ts := f.now.UnixMilli()
	for _, p := range f.processes {
		now := map[string]labels.Labels{}
		if !p.down {
			scrapeSeries(t, p, func(series labels.Labels, v float64) {
				_, err := app.Append(0, series, ts, v)
				require.NoError(t, err)
				now[series.String()] = series
			})
		}
		for key, gone := range p.last {
			if _, ok := now[key]; !ok {
				_, err := app.Append(0, gone, ts, math.Float64frombits(value.StaleNaN))
				require.NoError(t, err)
			}
		}
		p.last = now
	}
	require.NoError(t, app.Commit())
}

// scrapeSeries gets p's metrics through its HTTP handler and parses them as Prometheus's
// scraper does, passing each sample to add.
func scrapeSeries(t *testing.T, p *process, add func(labels.Labels, float64)) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	rec := httptest.NewRecorder()
	p.metrics.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	parser, err := textparse.New(rec.Body.Bytes(), rec.Header().Get("Content-Type"), labels.NewSymbolTable(), textparse.ParserOptions{})
	require.NoError(t, err)
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err)
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := parser.Series()
		var l labels.Labels
		parser.Labels(&l)
		b := labels.NewBuilder(l)
		b.Set("job", "simba")
		b.Set("instance", p.name)
		add(b.Labels(), v)
	}
}

// expect evaluates every README alert at the last scrape: those named fire, the others do
// not.
func (f *fleet) expect(firing ...string) {
	t := f.t
	t.Helper()
	for title, expr := range f.alerts {
		q, err := f.engine.NewInstantQuery(t.Context(), f.db, nil, expr, f.now)
		require.NoError(t, err, expr)
		vector, err := q.Exec(t.Context()).Vector()
		q.Close()
		require.NoError(t, err, expr)
		if slices.Contains(firing, title) {
			assert.NotEmpty(t, vector, "%q does not fire at %s: %s", title, f.now.Format(time.TimeOnly), expr)
		} else {
			assert.Empty(t, vector, "%q fires at %s: %s", title, f.now.Format(time.TimeOnly), expr)
		}
	}
}

// faultyBackend passes its contentions' calls on to a memory backend, and lets a test
// delay or fail their acquire calls (renewals included): a slow or unreachable store,
// for this process alone.
type faultyBackend struct {
	*memory.Backend

	mu    sync.Mutex
	delay time.Duration
	fails int // acquire calls still to fail; negative: all
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// fail makes the next n acquire calls fail (n < 0: all of them).
func (b *faultyBackend) fail(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails = n
}

// slow delays every acquire call by d (0: none).
func (b *faultyBackend) slow(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delay = d
}

func (b *faultyBackend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return &faultyContention{memoryContention: c.(memoryContention), backend: b}, nil
}

// memoryContention is what a memory backend's contention implements.
type memoryContention interface {
	backend.LeaseContention
	backend.WaitList
}

type faultyContention struct {
	memoryContention
	backend *faultyBackend
}

func (c *faultyContention) Acquire(ctx context.Context) (backend.Record, error) {
	b := c.backend
	b.mu.Lock()
	delay, fail := b.delay, b.fails != 0
	if b.fails > 0 {
		b.fails--
	}
	b.mu.Unlock()
	if fail {
		return backend.Record{}, errUnreachable
	}
	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return backend.Record{}, ctx.Err()
		}
	}
	return c.memoryContention.Acquire(ctx)
}
