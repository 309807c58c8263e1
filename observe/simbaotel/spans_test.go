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
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
	"github.com/simba-go/simba/observe/simbaotel"
)

// points returns the values of the data points of counter or up-down counter name whose
// attributes include want.
func (h *harness) points(t *testing.T, name string, want ...attribute.KeyValue) []int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var values []int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						values = append(values, p.Value)
					}
				}
			}
		}
	}
	return values
}

// acquireSpan returns the one simba.acquire span recorded since the last call.
func (h *harness) acquireSpan(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == "simba.acquire" {
			found = append(found, s)
		}
	}
	h.spans.Reset()
	require.Len(t, found, 1)
	return found[0]
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestAcquireSpanInCallersTrace: the acquisition's span is a child of the span in the
// caller's context, with the acquisition's own start and end; a renewal's span, which no
// caller waits for, is a root.
func TestAcquireSpanInCallersTrace(t *testing.T) {
	h := newHarness(t)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	l, err := simba.NewLocker(b, "payments", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer l.Close()

	ctx, caller := h.tracer.Start(t.Context(), "handle request")
	began := time.Now()
	lease, err := l.Acquire(ctx)
	returned := time.Now()
	require.NoError(t, err)
	caller.End()
	require.NoError(t, lease.Release(t.Context()))
	s := h.acquireSpan(t)
	assert.Equal(t, caller.SpanContext().TraceID(), s.SpanContext().TraceID(), "the caller's trace")
	assert.Equal(t, caller.SpanContext().SpanID(), s.Parent().SpanID(), "the caller's span is the parent")
	assert.False(t, s.StartTime().Before(began.Add(-time.Millisecond)), "starts when Acquire was called")
	assert.False(t, s.EndTime().After(returned), "ends when Acquire returned")
	assert.Equal(t, "acquired", attr(s, "simba.outcome"))

	renewed := make(chan observe.Call, 1)
	obs := observe.Funcs{Call: func(c observe.Call) {
		h.obs.OnCall(c)
		if c.Op == observe.OpRenew {
			select {
			case renewed <- c:
			default:
			}
		}
	}}
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "report", ID: "a"}, simba.WithObserver(obs),
		simba.WithTTL(300*time.Millisecond), simba.WithTransition(0))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(ctx))
	select {
	case <-renewed:
	case <-time.After(20 * time.Second):
		t.Fatal("no renewal")
	}
	var renewals int
	for _, s := range h.spans.Ended() {
		if s.Name() == "simba.renew" {
			renewals++
			assert.False(t, s.Parent().IsValid(), "a renewal's span is a root")
		}
	}
	assert.Positive(t, renewals)
}

// refusingBackend refuses every contention, as a store with wrong credentials does.
type refusingBackend struct{ err error }

func (b refusingBackend) StartContend(context.Context, backend.Participant) (backend.Contention, error) {
	return nil, b.err
}

// heldElsewhere returns a backend on a store where another process holds mutex until the
// end of the test.
func heldElsewhere(t *testing.T, mutex string) simba.Backend {
	t.Helper()
	store := memory.NewStore()
	holder, err := memory.New(store)
	require.NoError(t, err)
	l, err := simba.NewLocker(holder, mutex)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.Acquire(t.Context())
	require.NoError(t, err)
	b, err := memory.New(store)
	require.NoError(t, err)
	return b
}

// TestNotAcquiredIsAnOutcome: an acquisition that finds the mutex held, or whose caller's
// deadline passes, is an outcome of the span, not an error; a store's error is one, with
// no exception event of simba's types.
func TestNotAcquiredIsAnOutcome(t *testing.T) {
	h := newHarness(t)
	l, err := simba.NewLocker(heldElsewhere(t, "payments"), "payments", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer l.Close()
	refused, err := simba.NewLocker(refusingBackend{fmt.Errorf("wrong password: %w", simba.ErrRefused)}, "payments", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer refused.Close()
	down, err := simba.NewLocker(refusingBackend{errors.New("dial tcp: connection refused")}, "payments", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer down.Close()

	for _, c := range []struct {
		name    string
		acquire func(context.Context) (*simba.Lease, error)
		timeout time.Duration
		reason  string
		status  codes.Code
	}{
		{"TryAcquire of a held mutex", l.TryAcquire, 0, "held", codes.Unset},
		{"Acquire until the caller's deadline", l.Acquire, 50 * time.Millisecond, "deadline", codes.Unset},
		{"a refusal", refused.Acquire, 0, "refused", codes.Error},
		{"a store that does not answer", down.TryAcquire, 0, "error", codes.Error},
	} {
		ctx := t.Context()
		if c.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.timeout)
			defer cancel()
		}
		_, err := c.acquire(ctx)
		require.Error(t, err, c.name)
		s := h.acquireSpan(t)
		assert.Equal(t, "not_acquired", attr(s, "simba.outcome"), c.name)
		assert.Equal(t, c.reason, attr(s, "simba.reason"), c.name)
		assert.Equal(t, c.status, s.Status().Code, c.name)
		assert.Empty(t, s.Events(), "%s: no exception event", c.name)
	}
}

// TestCountersExistBeforeTheirFirstEvent: the counters have a point at 0 for every known
// attribute value from New on (with WithMutexAttribute, from the first event that names
// the mutex), and a leader's start-up creates its mutex's leadership at 0.
func TestCountersExistBeforeTheirFirstEvent(t *testing.T) {
	h := newHarness(t)
	for _, via := range []string{"call", "handover"} {
		assert.Equal(t, []int64{0}, h.points(t, "simba.tenure.started", attribute.String("simba.via", via)), via)
	}
	for _, cause := range []string{"released", "owner_changed", "expired", "store_error"} {
		assert.Equal(t, []int64{0}, h.points(t, "simba.tenure.ended", attribute.String("simba.cause", cause)), cause)
	}
	assert.Equal(t, []int64{0}, h.points(t, "simba.tenure.held"))

	h = newHarness(t, simbaotel.WithMutexAttribute())
	assert.Empty(t, h.points(t, "simba.tenure.ended"), "no mutex named yet")
	svc, err := simba.NewService(heldElsewhere(t, "report"), simba.ContenderFuncs{MutexName: "report", ID: "never"}, simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(t.Context())) // the start-up call is told before Start returns
	mutex := attribute.String("simba.mutex", "report")
	for _, cause := range []string{"released", "owner_changed", "expired", "store_error"} {
		assert.Equal(t, []int64{0}, h.points(t, "simba.tenure.ended", mutex, attribute.String("simba.cause", cause)), cause)
	}
	assert.Equal(t, []int64{0}, h.points(t, "simba.tenure.held", mutex))
	assert.Equal(t, []int64{0}, h.points(t, "simba.leader.held", mutex))
	assert.Equal(t, []int64{0}, h.points(t, "simba.leader.started", mutex))
}

// TestLeaderInstruments: simba.leader.held is 1 while a Service of this process leads the
// mutex, 0 once it stopped; a Locker's mutex has none.
func TestLeaderInstruments(t *testing.T) {
	h := newHarness(t)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	led := make(chan struct{})
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "report", ID: "a",
		Acquired: func(context.Context, simba.State) { close(led) }}, simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(t.Context()))
	select {
	case <-led:
	case <-time.After(20 * time.Second):
		t.Fatal("no leadership")
	}
	mutex := attribute.String("simba.mutex", "report")
	assert.Equal(t, []int64{1}, h.points(t, "simba.leader.held", mutex))
	assert.Equal(t, []int64{1}, h.points(t, "simba.leader.started", mutex))
	require.NoError(t, svc.Stop(t.Context()))
	assert.Equal(t, []int64{0}, h.points(t, "simba.leader.held", mutex))

	l, err := simba.NewLocker(b, "orders", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
	assert.Empty(t, h.points(t, "simba.leader.held", attribute.String("simba.mutex", "orders")))
}
