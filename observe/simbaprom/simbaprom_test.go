package simbaprom_test

import (
	"context"

	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
	"github.com/simba-go/simba/observe/simbaprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// samples returns the sample count of histogram name (or the value of counter or gauge
// name) for the series whose labels include want.
func samples(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var total float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !matches(m, want) {
				continue
			}
			switch {
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			}
		}
	}
	return total
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func TestLockerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	require.NoError(t, err)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	l, err := simba.NewLocker(b, "report", simba.WithObserver(obs))
	require.NoError(t, err)
	defer l.Close()
	for range 2 {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1.0, samples(t, reg, "simba_tenures_held", nil))
		require.NoError(t, lease.Release(t.Context()))
	}
	assert.Equal(t, 2.0, samples(t, reg, "simba_tenures_started_total", map[string]string{"via": "call"}))
	assert.Equal(t, 2.0, samples(t, reg, "simba_tenures_ended_total", map[string]string{"cause": "released"}))
	assert.Equal(t, 2.0, samples(t, reg, "simba_tenure_duration_seconds", map[string]string{"cause": "released"}))
	assert.Equal(t, 0.0, samples(t, reg, "simba_tenures_held", nil))
	assert.Equal(t, 2.0, samples(t, reg, "simba_acquire_wait_seconds", map[string]string{"try": "false", "outcome": "acquired"}))
	assert.Equal(t, 2.0, samples(t, reg, "simba_store_call_duration_seconds", map[string]string{"op": "acquire", "outcome": "ok"}))
	assert.Equal(t, 2.0, samples(t, reg, "simba_store_call_duration_seconds", map[string]string{"op": "release", "outcome": "ok"}))

	// No metric has a mutex label by default.
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Positive(t, n)
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotEqual(t, "mutex", l.GetName(), f.GetName())
			}
		}
	}
}

func TestCausesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg, simbaprom.WithMutexLabel(), simbaprom.WithNamespace("app_locks"))
	require.NoError(t, err)
	lost := observe.Tenure{Mutex: "m", Contender: "c", Held: time.Second}
	obs.OnTenureBegan(observe.Tenure{Mutex: "m", Granted: true})
	obs.OnTenureBegan(observe.Tenure{Mutex: "m"})
	obs.OnTenureBegan(observe.Tenure{Mutex: "m"})
	lost.Cause, lost.Reason = simba.ErrOwnerChanged, "owner_changed"
	obs.OnTenureEnded(lost)
	lost.Cause, lost.Reason = fmt.Errorf("%w: %w", simba.ErrLeaseExpired, errors.New("refused")), "store_error"
	obs.OnTenureEnded(lost)
	lost.Cause, lost.Reason = simba.ErrLeaseExpired, "expired"
	obs.OnTenureEnded(lost)
	obs.OnCall(observe.Call{Mutex: "m", Op: observe.OpRenew, Err: simba.ErrTimeout, Outcome: "timeout", Latency: time.Second})
	obs.OnAcquire(context.Background(), observe.Acquisition{Mutex: "m", Try: true, Err: simba.ErrNotAcquired})

	m := func(kv ...string) map[string]string {
		labels := map[string]string{"mutex": "m"}
		for i := 0; i < len(kv); i += 2 {
			labels[kv[i]] = kv[i+1]
		}
		return labels
	}
	assert.Equal(t, 1.0, samples(t, reg, "app_locks_tenures_started_total", m("via", "handover")))
	assert.Equal(t, 2.0, samples(t, reg, "app_locks_tenures_started_total", m("via", "call")))
	for _, cause := range []string{"owner_changed", "store_error", "expired"} {
		assert.Equal(t, 1.0, samples(t, reg, "app_locks_tenures_ended_total", m("cause", cause)), cause)
	}
	assert.Equal(t, 0.0, samples(t, reg, "app_locks_tenures_held", m()))
	assert.Equal(t, 1.0, samples(t, reg, "app_locks_store_call_duration_seconds", m("op", "renew", "outcome", "timeout")))
	assert.Equal(t, 1.0, samples(t, reg, "app_locks_acquire_wait_seconds", m("try", "true", "outcome", "not_acquired")))

	const want = `
# HELP app_locks_tenures_ended_total Tenures ended, by cause: released, owner_changed, expired, store_error.
# TYPE app_locks_tenures_ended_total counter
app_locks_tenures_ended_total{cause="expired",kind="mutex",mutex="m"} 1
app_locks_tenures_ended_total{cause="owner_changed",kind="mutex",mutex="m"} 1
app_locks_tenures_ended_total{cause="released",kind="mutex",mutex="m"} 0
app_locks_tenures_ended_total{cause="store_error",kind="mutex",mutex="m"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "app_locks_tenures_ended_total"))
}

func TestNewInvalid(t *testing.T) {
	for name, opts := range map[string][]simbaprom.Option{
		"namespace":  {simbaprom.WithNamespace("9lives")},
		"empty":      {simbaprom.WithNamespace("")},
		"buckets":    {simbaprom.WithBuckets(1, 0.5)},
		"no buckets": {simbaprom.WithBuckets()},
	} {
		_, err := simbaprom.New(prometheus.NewRegistry(), opts...)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, name)
	}
	_, err := simbaprom.New(nil)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)

	reg := prometheus.NewRegistry()
	_, err = simbaprom.New(reg)
	require.NoError(t, err)
	_, err = simbaprom.New(reg)
	var are prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &are, "a second Observer on one registry needs another namespace")
}
