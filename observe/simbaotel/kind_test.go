package simbaotel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// TestSemaphoreCountedUnderItsKind: a semaphore's permit and a read-write lock's hold are
// recorded under their simba.kind, not as a mutex's tenure.
func TestSemaphoreCountedUnderItsKind(t *testing.T) {
	h := newHarness(t)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	sem, err := simba.NewSemaphore(b, "pool", 2, simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer sem.Close()
	rw, err := simba.NewRWMutex(b, "table", simba.WithObserver(h.obs))
	require.NoError(t, err)
	defer rw.Close()

	permit, err := sem.Acquire(t.Context())
	require.NoError(t, err)
	write, err := rw.Lock(t.Context())
	require.NoError(t, err)
	kind := func(k string) attribute.KeyValue { return attribute.String("simba.kind", k) }
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.held", kind("semaphore")))
	assert.Equal(t, 1.0, h.value(t, "simba.tenure.held", kind("rwlock")))
	assert.Equal(t, 0.0, h.value(t, "simba.tenure.held", kind("mutex")))
	require.NoError(t, permit.Release(t.Context()))
	require.NoError(t, write.Release(t.Context()))

	for _, name := range []string{"simba.acquire.wait", "simba.tenure.started", "simba.tenure.ended", "simba.tenure.duration"} {
		assert.Equal(t, 1.0, h.value(t, name, kind("semaphore")), name)
		assert.Equal(t, 1.0, h.value(t, name, kind("rwlock")), name)
		assert.Equal(t, 0.0, h.value(t, name, kind("mutex")), name)
	}
	assert.Equal(t, 1.0, h.value(t, "simba.store.call.duration", kind("semaphore"), attribute.String("simba.op", "release")))
	spans := h.spans.Ended()
	require.Len(t, spans, 2)
	assert.Contains(t, spans[0].Attributes(), kind("semaphore"))
	assert.Contains(t, spans[1].Attributes(), kind("rwlock"))
}
