package simbaprom_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
	"github.com/simba-go/simba/observe/simbaprom"
)

// tap passes a process's events on to its Observer and then tells the waiters whose
// event it is, so that a test can wait for what it caused (and then scrape its effect).
type tap struct {
	observe.Observer

	mu      sync.Mutex
	waiters []*waiter
}

type waiter struct {
	match func(event any) bool
	n     int           // matching events still awaited
	done  chan struct{} // closed at the n-th
}

func (t *tap) OnCall(c observe.Call)           { t.Observer.OnCall(c); t.tell(c) }
func (t *tap) OnTenureBegan(tn observe.Tenure) { t.Observer.OnTenureBegan(tn); t.tell(tn) }
func (t *tap) OnTenureEnded(tn observe.Tenure) { t.Observer.OnTenureEnded(tn); t.tell(tn) }
func (t *tap) OnAcquire(ctx context.Context, a observe.Acquisition) {
	t.Observer.OnAcquire(ctx, a)
	t.tell(a)
}

func (t *tap) tell(event any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	left := t.waiters[:0]
	for _, w := range t.waiters {
		if w.match(event) {
			if w.n--; w.n == 0 {
				close(w.done)
				continue
			}
		}
		left = append(left, w)
	}
	t.waiters = left
}

// next returns a channel closed at the n-th event from now that match accepts. Call it
// before doing what causes the events.
func (t *tap) next(n int, match func(event any) bool) <-chan struct{} {
	w := &waiter{match: match, n: n, done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiters = append(t.waiters, w)
	return w.done
}

// await waits for ch, failing the test after a generous deadline.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Event matchers.

func tenureBegan(role observe.Role) func(any) bool {
	return func(e any) bool { tn, ok := e.(observe.Tenure); return ok && tn.Role == role && tn.Cause == nil }
}

func tenureEnded(reason string) func(any) bool {
	return func(e any) bool { tn, ok := e.(observe.Tenure); return ok && tn.Cause != nil && tn.Reason == reason }
}

func call(op observe.Op, ok func(observe.Call) bool) func(any) bool {
	return func(e any) bool { c, isCall := e.(observe.Call); return isCall && c.Op == op && ok(c) }
}

func anyCall(observe.Call) bool { return true }

// leaderService returns a Service of contender id for mutex on b, told to obs, closed at
// the end of the test.
func leaderService(t *testing.T, b simba.Backend, mutex, id string, opts ...simba.ServiceOption) *simba.Service {
	t.Helper()
	s, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutex, ID: id}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// series returns the value of the series of name whose labels include want, and whether
// there is one.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, want) {
				return samples(t, reg, name, want), true
			}
		}
	}
	return 0, false
}

// contendInVain starts a leader service for "report", told to obs, on a store where
// another process holds the mutex, and waits for its first attempt, which finds it held.
func contendInVain(t *testing.T, obs observe.Observer) {
	t.Helper()
	store := memory.NewStore()
	holder, err := memory.New(store)
	require.NoError(t, err)
	l, err := simba.NewLocker(holder, "report")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.Acquire(t.Context())
	require.NoError(t, err)
	b, err := memory.New(store)
	require.NoError(t, err)
	tp := &tap{Observer: obs}
	tried := tp.next(1, call(observe.OpAcquire, anyCall))
	require.NoError(t, leaderService(t, b, "report", "never", simba.WithObserver(tp)).Start(t.Context()))
	await(t, tried, "an attempt")
}

// TestSeriesExistBeforeTheirFirstEvent: without the mutex label every series of a known
// label value is there at 0 from New on, so that a process that never led shows
// simba_tenures_held 0 and increase() counts the first loss.
func TestSeriesExistBeforeTheirFirstEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	require.NoError(t, err)
	contendInVain(t, obs)

	const want = `
# HELP simba_tenures_ended_total Tenures ended, by cause: released, owner_changed, expired, store_error.
# TYPE simba_tenures_ended_total counter
simba_tenures_ended_total{cause="expired",kind="mutex"} 0
simba_tenures_ended_total{cause="owner_changed",kind="mutex"} 0
simba_tenures_ended_total{cause="released",kind="mutex"} 0
simba_tenures_ended_total{cause="store_error",kind="mutex"} 0
# HELP simba_tenures_held Tenures contenders of this process believe they hold now (1 on the leader of one mutex).
# TYPE simba_tenures_held gauge
simba_tenures_held{kind="mutex"} 0
# HELP simba_tenures_started_total Tenures begun by contenders of this process: via an answer to an acquire call, or a hand-over by the store.
# TYPE simba_tenures_started_total counter
simba_tenures_started_total{kind="mutex",via="call"} 0
simba_tenures_started_total{kind="mutex",via="handover"} 0
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"simba_tenures_ended_total", "simba_tenures_held", "simba_tenures_started_total"))
	for name, n := range map[string]int{
		"simba_store_call_duration_seconds": 6 * 3, // op × outcome
		"simba_tenure_duration_seconds":     4,     // cause
		"simba_acquire_wait_seconds":        2 * 2, // try × outcome
	} {
		got, err := testutil.GatherAndCount(reg, name)
		require.NoError(t, err)
		assert.Equal(t, n, got, name)
	}
	v, ok := series(t, reg, "simba_leader", map[string]string{"mutex": "report"})
	assert.True(t, ok && v == 0, "simba_leader{mutex=\"report\"}: %v, %v", v, ok)
}

// TestSeriesOfAMutexExistFromItsFirstEvent: with the mutex label a mutex's series are
// there at 0 from the first event that names it (a leader's start-up), before any tenure.
func TestSeriesOfAMutexExistFromItsFirstEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg, simbaprom.WithMutexLabel())
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "no mutex named yet")

	contendInVain(t, obs)
	for _, cause := range []string{"released", "owner_changed", "expired", "store_error"} {
		v, ok := series(t, reg, "simba_tenures_ended_total", map[string]string{"mutex": "report", "cause": cause})
		assert.True(t, ok && v == 0, "simba_tenures_ended_total{cause=%q,mutex=\"report\"}: %v, %v", cause, v, ok)
	}
	v, ok := series(t, reg, "simba_tenures_held", map[string]string{"mutex": "report"})
	assert.True(t, ok && v == 0, "simba_tenures_held{mutex=\"report\"}: %v, %v", v, ok)
}

// TestLeaderGauge: simba_leader{mutex} is 1 on the process whose Service leads the mutex
// and 0 on those that contend, from their start-up on; a Locker's mutex has none.
func TestLeaderGauge(t *testing.T) {
	store := memory.NewStore()
	type process struct {
		reg *prometheus.Registry
		tap *tap
		svc *simba.Service
	}
	start := func(id string) *process {
		reg := prometheus.NewRegistry()
		obs, err := simbaprom.New(reg)
		require.NoError(t, err)
		b, err := memory.New(store)
		require.NoError(t, err)
		p := &process{reg: reg, tap: &tap{Observer: obs}}
		p.svc = leaderService(t, b, "report", id, simba.WithObserver(p.tap), simba.WithTransition(0))
		return p
	}
	leader := func(p *process) float64 {
		t.Helper()
		v, ok := series(t, p.reg, "simba_leader", map[string]string{"mutex": "report"})
		require.True(t, ok, "no simba_leader{mutex=\"report\"}")
		return v
	}
	leaderships := func(p *process) float64 {
		return samples(t, p.reg, "simba_leader_tenures_started_total", map[string]string{"mutex": "report"})
	}
	a, b := start("a"), start("b")
	leads := a.tap.next(1, tenureBegan(observe.RoleLeader))
	require.NoError(t, a.svc.Start(t.Context()))
	await(t, leads, "a to lead")
	tried := b.tap.next(1, call(observe.OpAcquire, anyCall))
	require.NoError(t, b.svc.Start(t.Context()))
	await(t, tried, "b's attempt")
	assert.Equal(t, 1.0, leader(a))
	assert.Equal(t, 0.0, leader(b))

	leads = b.tap.next(1, tenureBegan(observe.RoleLeader))
	require.NoError(t, a.svc.Stop(t.Context()))
	await(t, leads, "b to lead")
	assert.Equal(t, 0.0, leader(a))
	assert.Equal(t, 1.0, leader(b))
	assert.Equal(t, 1.0, leaderships(a))
	assert.Equal(t, 1.0, leaderships(b))

	lb, err := memory.New(store)
	require.NoError(t, err)
	l, err := simba.NewLocker(lb, "orders", simba.WithObserver(a.tap))
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
	_, ok := series(t, a.reg, "simba_leader", map[string]string{"mutex": "orders"})
	assert.False(t, ok, "a Locker's mutex has no simba_leader series")
}
