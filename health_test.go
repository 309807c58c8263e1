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
