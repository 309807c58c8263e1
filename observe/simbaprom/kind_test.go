package simbaprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe/simbaprom"
)

// TestSemaphoreCountedUnderItsKind: a semaphore's permit and a read-write lock's hold are
// counted under their kind, not as a mutex's tenure.
func TestSemaphoreCountedUnderItsKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	require.NoError(t, err)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	sem, err := simba.NewSemaphore(b, "pool", 2, simba.WithObserver(obs))
	require.NoError(t, err)
	defer sem.Close()
	rw, err := simba.NewRWMutex(b, "table", simba.WithObserver(obs))
	require.NoError(t, err)
	defer rw.Close()

	permit, err := sem.Acquire(t.Context())
	require.NoError(t, err)
	read, err := rw.RLock(t.Context())
	require.NoError(t, err)
	kind := func(k string, kv ...string) map[string]string {
		labels := map[string]string{"kind": k}
		for i := 0; i < len(kv); i += 2 {
			labels[kv[i]] = kv[i+1]
		}
		return labels
	}
	assert.Equal(t, 1.0, samples(t, reg, "simba_tenures_held", kind("semaphore")))
	assert.Equal(t, 1.0, samples(t, reg, "simba_tenures_held", kind("rwlock")))
	assert.Equal(t, 0.0, samples(t, reg, "simba_tenures_held", kind("mutex")))
	require.NoError(t, permit.Release(t.Context()))
	require.NoError(t, read.Release(t.Context()))

	assert.Equal(t, 1.0, samples(t, reg, "simba_acquire_wait_seconds", kind("semaphore", "outcome", "acquired")))
	assert.Equal(t, 1.0, samples(t, reg, "simba_tenures_started_total", kind("semaphore")))
	assert.Equal(t, 1.0, samples(t, reg, "simba_tenures_ended_total", kind("semaphore", "cause", "released")))
	assert.Equal(t, 1.0, samples(t, reg, "simba_store_call_duration_seconds", kind("semaphore", "op", "release")))
	assert.Equal(t, 1.0, samples(t, reg, "simba_acquire_wait_seconds", kind("rwlock", "outcome", "acquired")))
	for _, name := range []string{"simba_acquire_wait_seconds", "simba_tenures_started_total", "simba_tenures_ended_total", "simba_store_call_duration_seconds"} {
		assert.Equal(t, 0.0, samples(t, reg, name, kind("mutex")), name)
	}
	assert.Equal(t, 0.0, samples(t, reg, "simba_tenures_held", kind("semaphore")))
}
