package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/tck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.NewStore()
	// Cleanups run after the parallel checks have finished.
	t.Cleanup(func() { assert.Zero(t, store.Len(), "records left in the store after every check stopped") })
	tck.Run(t, func(t *testing.T) simba.Backend {
		b, err := memory.New(store)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

func TestNewRejectsMissingStore(t *testing.T) {
	_, err := memory.New(nil)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = memory.New(&memory.Store{})
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

func TestClosedBackend(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	require.NoError(t, b.Close())
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"})
	require.NoError(t, err)
	err = svc.Start(t.Context())
	assert.ErrorIs(t, err, simba.ErrClosed)
	assert.Equal(t, simba.StatusInitial, svc.Status())
}

// The store drops records nobody holds, waits for or watches, so that many distinct
// names used once leave nothing behind.
func TestStoreDropsUnusedRecords(t *testing.T) {
	store := memory.NewStore()
	b, err := memory.New(store)
	require.NoError(t, err)
	ctx := t.Context()
	for i := range 1000 {
		l, err := simba.NewLocker(b, "m"+time.Duration(i).String())
		require.NoError(t, err)
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	assert.Zero(t, store.Len())
}

func TestTokensKeepIncreasingAfterRecordDropped(t *testing.T) {
	store := memory.NewStore()
	b, err := memory.New(store)
	require.NoError(t, err)
	l, err := simba.NewLocker(b, "m")
	require.NoError(t, err)
	var last uint64
	for range 3 {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), last)
		last = lease.Token()
		require.NoError(t, lease.Release(t.Context()))
		require.Zero(t, store.Len())
	}
}

func TestCancelledContext(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.StartContend(ctx, backend.Participant{Mutex: "m", ContenderID: "c", TTL: time.Second})
	assert.True(t, errors.Is(err, context.Canceled))
}
