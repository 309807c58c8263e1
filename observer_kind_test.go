package simba_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
)

// TestObserverKind checks that a semaphore's and a read-write lock's events name their
// kind, and a Locker's the mutex.
func TestObserverKind(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	for _, tc := range []struct {
		kind    observe.Kind
		acquire func(rec *recorder) (release func(context.Context) error)
	}{
		{observe.KindMutex, func(rec *recorder) func(context.Context) error {
			l, err := simba.NewLocker(b, "kind", simba.WithObserver(rec))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)
			return lease.Release
		}},
		{observe.KindSemaphore, func(rec *recorder) func(context.Context) error {
			s, err := simba.NewSemaphore(b, "kind", 2, simba.WithObserver(rec))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			lease, err := s.Acquire(t.Context())
			require.NoError(t, err)
			return lease.Release
		}},
		{observe.KindRWLock, func(rec *recorder) func(context.Context) error {
			m, err := simba.NewRWMutex(b, "kind", simba.WithObserver(rec))
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			lease, err := m.RLock(t.Context())
			require.NoError(t, err)
			return lease.Release
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			rec := newRecorder()
			release := tc.acquire(rec)
			require.NoError(t, release(t.Context()))
			assert.Equal(t, tc.kind, await(t, rec, anyEvent[observe.Acquisition]).Kind, "acquisition")
			assert.Equal(t, tc.kind, await(t, rec, anyEvent[tenureBegan]).Kind, "tenure began")
			assert.Equal(t, tc.kind, await(t, rec, anyEvent[tenureEnded]).Kind, "tenure ended")
			for _, op := range []observe.Op{observe.OpStart, observe.OpAcquire, observe.OpRelease, observe.OpStop} {
				c := await(t, rec, func(c observe.Call) bool { return c.Op == op })
				assert.Equal(t, tc.kind, c.Kind, "call %v", op)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "mutex", observe.KindMutex.String())
	assert.Equal(t, "semaphore", observe.KindSemaphore.String())
	assert.Equal(t, "rwlock", observe.KindRWLock.String())
	assert.Equal(t, "Kind(9)", observe.Kind(9).String())
}
