package simba_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// probe asks h at path and returns the status code and the decoded body.
func probe(t *testing.T, h http.Handler, path string) (int, []map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var body []map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	return rec.Code, body
}

// started starts a service for mutex as id on b and waits until it has made an attempt.
func started(t *testing.T, b simba.Backend, mutex, id string) (*simba.Service, *signalled) {
	t.Helper()
	sig := &signalled{acquired: make(chan struct{}, 1)}
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutex, ID: id,
		Acquired: func(_ context.Context, _ simba.State) { sig.acquired <- struct{}{} }})
	require.NoError(t, err)
	require.NoError(t, svc.Start(t.Context()))
	t.Cleanup(func() { _ = svc.Close() })
	return svc, sig
}

type signalled struct{ acquired chan struct{} }

func (s *signalled) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.acquired:
	case <-time.After(10 * time.Second):
		t.Fatal("not acquired")
	}
}

func TestHealthHandler(t *testing.T) {
	store := memory.NewStore()
	b1, _ := memory.New(store)
	b2, _ := memory.New(store)
	leader, sig := started(t, b1, "health", "leader")
	sig.wait(t)
	follower, _ := started(t, b2, "health", "follower")
	require.Eventually(t, func() bool { return follower.Owner().ID == "leader" }, 10*time.Second, time.Millisecond)

	code, body := probe(t, simba.HealthHandler(leader, follower), "/healthz")
	assert.Equal(t, http.StatusOK, code)
	require.Len(t, body, 2)
	assert.Equal(t, map[string]any{"mutex": "health", "contender": "leader", "status": "RUNNING",
		"leading": true, "owner": "leader", "healthy": true}, body[0])
	assert.Equal(t, false, body[1]["leading"])

	code, _ = probe(t, simba.HealthHandler(leader), "/healthz?leading")
	assert.Equal(t, http.StatusOK, code)
	code, _ = probe(t, simba.HealthHandler(follower), "/healthz?leading")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a follower does not lead")

	require.NoError(t, follower.Stop(t.Context()))
	code, body = probe(t, simba.HealthHandler(leader, follower), "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a stopped service is not healthy")
	assert.Equal(t, "INITIAL", body[1]["status"])

	code, body = probe(t, simba.HealthHandler(leader, nil), "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body[1]["error"], "must not be nil")
}

func TestHealthStoreError(t *testing.T) {
	_, fb := newFaultyStore()
	down := errors.New("connection refused")
	fb.fail(opAcquire, down)
	svc, _ := started(t, fb, "health", "me")
	require.Eventually(t, func() bool { return errors.Is(svc.Health().Err, down) }, 10*time.Second, time.Millisecond)
	h := svc.Health()
	assert.False(t, h.Healthy())
	code, body := probe(t, simba.HealthHandler(svc), "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body[0]["error"], "connection refused")

	fb.fail(opAcquire, nil)
	require.Eventually(t, func() bool { return svc.Health().Healthy() }, 10*time.Second, time.Millisecond)
}

// TestLivenessFailsOnlyAnOverdueLeader: the liveness probe (?live) fails a leader whose
// renewal is overdue (its contend loop is stuck: here, a store call that ignores its
// deadline), and nobody else: not a follower stuck the same way, not a leader whose store
// merely fails (readiness reports that).
func TestLivenessFailsOnlyAnOverdueLeader(t *testing.T) {
	_, b := newFaultyStore()
	opts := []simba.ServiceOption{simba.WithTTL(400 * time.Millisecond), simba.WithTransition(0)}
	acquired := make(chan struct{}, 4)
	leader, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "live", ID: "leader",
		Acquired: func(context.Context, simba.State) { acquired <- struct{}{} }}, opts...)
	require.NoError(t, err)
	defer leader.Close()
	require.NoError(t, leader.Start(t.Context()))
	<-acquired
	follower, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "live", ID: "follower"}, opts...)
	require.NoError(t, err)
	defer follower.Close()
	require.NoError(t, follower.Start(t.Context()))

	h := simba.HealthHandler(leader, follower)
	code, _ := probe(t, h, "/livez?live")
	assert.Equal(t, http.StatusOK, code)

	b.fail(opAcquire, errUnreachable) // an outage: the loop runs, readiness fails, liveness not
	waitFor(t, func() bool { return leader.Err() != nil })
	code, _ = probe(t, h, "/livez?live")
	assert.Equal(t, http.StatusOK, code, "an outage is no reason to restart")
	b.fail(opAcquire, nil)
	waitFor(t, func() bool { return leader.Err() == nil && leader.IsOwner() })

	b.stall(opAcquire) // the renewal call never returns: the loop is stuck
	waitFor(t, func() bool { return leader.Health().Overdue > 0 })
	code, body := probe(t, h, "/livez?live")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.NotEmpty(t, body[0]["renewal_overdue"])
	assert.Zero(t, follower.Health().Overdue, "a follower leads nothing: never overdue")
	code, _ = probe(t, h, "/livez?live=1h")
	assert.Equal(t, http.StatusOK, code, "within the tolerance the query gives")
	code, _ = probe(t, simba.HealthHandler(follower), "/livez?live")
	assert.Equal(t, http.StatusOK, code)
	b.unstall(opAcquire)
	waitFor(t, func() bool { return leader.Health().Overdue == 0 })

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez?live=soon", nil))
	assert.Equal(t, http.StatusBadRequest, rec.Code, "a tolerance that is no duration")
}

// TestLockerAndMutexesReportHealth: a Locker and a Mutexes are health reporters: healthy
// until their store fails them, leading while they hold, unhealthy once closed.
func TestLockerAndMutexesReportHealth(t *testing.T) {
	_, b := newFaultyStore()
	l, err := simba.NewLocker(b, "h", simba.WithContenderID("l"))
	require.NoError(t, err)
	m, err := simba.NewMutexes(b, simba.WithContenderID("m"))
	require.NoError(t, err)
	reporters := []simba.HealthReporter{l, m}
	acquire := []func(context.Context) (*simba.Lease, error){l.Acquire, func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "h2") }}
	for i, r := range reporters {
		h := r.Health()
		assert.True(t, h.Healthy(), "%d idle: %+v", i, h)
		assert.False(t, h.Leading)

		b.fail(opStart, errUnreachable)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := acquire[i](ctx)
		cancel()
		require.Error(t, err)
		h = r.Health()
		assert.False(t, h.Healthy(), "%d after an outage: %+v", i, h)
		assert.ErrorIs(t, h.Err, errUnreachable)

		b.fail(opStart, nil)
		lease, err := acquire[i](t.Context())
		require.NoError(t, err)
		h = r.Health()
		assert.True(t, h.Healthy(), "%d holding: %+v", i, h)
		assert.True(t, h.Leading)
		require.NoError(t, lease.Release(t.Context()))
		assert.False(t, r.Health().Leading)
	}
	require.NoError(t, l.Close())
	require.NoError(t, m.Close())
	code, _ := probe(t, simba.HealthHandler(l, m), "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "closed")
}
