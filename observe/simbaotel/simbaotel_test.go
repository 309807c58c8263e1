package simbaotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
	"github.com/simba-go/simba/observe/simbaotel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an Observer on an in-memory metric reader and span recorder.
type harness struct {
	obs    *simbaotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tracer trace.Tracer // of the same provider: for the callers' spans
}

func newHarness(t *testing.T, opts ...simbaotel.Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := simbaotel.New(append([]simbaotel.Option{simbaotel.WithMeterProvider(mp), simbaotel.WithTracerProvider(tp)}, opts...)...)
	require.NoError(t, err)
	h.obs = obs
	h.tracer = tp.Tracer("test")
	return h
}

// value returns the sum of counter name, or the count of histogram name, over the data
// points whose attributes include want.
func (h *harness) value(t *testing.T, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var total float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						total += float64(p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						total += float64(p.Count)
					}
				}
			}
		}
	}
	return total
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func TestLockerMetricsAndSpans(t *testing.T) {
	h := newHarness(t)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	l, err := simba.NewLocker(b, "payments", simba.WithObserver(h.obs), simba.WithContenderID("pod-a"))
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.held"))
	require.NoError(t, lease.Release(t.Context()))

	assert.Equal(t, 1.0, h.value(t, "simba.tenure.started", attribute.String("simba.via", "call")))
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.ended", attribute.String("simba.cause", "released")))
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.duration"))
	assert.Equal(t, 0.0, h.value(t, "simba.tenure.held"))
	assert.Equal(t, 1.0, h.value(t, "simba.acquire.wait", attribute.Bool("simba.try", false), attribute.String("simba.outcome", "acquired")))
	assert.Equal(t, 1.0, h.value(t, "simba.store.call.duration", attribute.String("simba.op", "acquire"), attribute.String("simba.outcome", "ok")))
	assert.Zero(t, h.value(t, "simba.store.call.duration", attribute.String("simba.mutex", "payments")), "no mutex attribute by default")

	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "simba.acquire", s.Name())
	assert.Contains(t, s.Attributes(), attribute.String("simba.mutex", "payments"))
	assert.Contains(t, s.Attributes(), attribute.String("simba.contender", "pod-a"))
	assert.Contains(t, s.Attributes(), attribute.String("simba.token", fmt.Sprint(lease.Token())))
	assert.False(t, s.EndTime().Before(s.StartTime()))
	assert.Equal(t, codes.Unset, s.Status().Code)
}

func TestRenewalSpanAndCauses(t *testing.T) {
	h := newHarness(t, simbaotel.WithMutexAttribute())
	mutex := attribute.String("simba.mutex", "m")
	h.obs.OnCall(observe.Call{Mutex: "m", Contender: "c", Op: observe.OpRenew, Latency: 20 * time.Millisecond,
		Err: fmt.Errorf("renew: %w", simba.ErrTimeout), Outcome: "timeout"})
	h.obs.OnTenureBegan(observe.Tenure{Mutex: "m", Granted: true})
	h.obs.OnTenureEnded(observe.Tenure{Mutex: "m", Cause: fmt.Errorf("%w: %w", simba.ErrLeaseExpired, errors.New("down")), Reason: "store_error"})
	h.obs.OnAcquire(context.Background(), observe.Acquisition{Mutex: "m", Try: true, Err: simba.ErrNotAcquired})

	assert.Equal(t, 1.0, h.value(t, "simba.store.call.duration", mutex, attribute.String("simba.op", "renew"), attribute.String("simba.outcome", "timeout")))
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.started", mutex, attribute.String("simba.via", "handover")))
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.ended", mutex, attribute.String("simba.cause", "store_error")))
	assert.Equal(t, 1.0, h.value(t, "simba.acquire.wait", mutex, attribute.String("simba.outcome", "not_acquired")))

	spans := h.spans.Ended()
	require.Len(t, spans, 2)
	renew := spans[0]
	assert.Equal(t, "simba.renew", renew.Name())
	assert.Equal(t, codes.Error, renew.Status().Code)
	assert.Equal(t, 20*time.Millisecond, renew.EndTime().Sub(renew.StartTime()))
	assert.Equal(t, "simba.acquire", spans[1].Name())
	assert.Equal(t, codes.Unset, spans[1].Status().Code, "not acquired is an outcome")
}

func TestNewInvalid(t *testing.T) {
	_, err := simbaotel.New(simbaotel.WithMeterProvider(nil))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simbaotel.New(simbaotel.WithTracerProvider(nil))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}
