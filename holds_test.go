package simba_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// mutexOnly is a backend that keeps mutexes only.
type mutexOnly struct{ simba.Backend }

func TestHoldsRejectBadInput(t *testing.T) {
	b, _ := memory.New(memory.NewStore())
	_, err := simba.NewSemaphore(b, "s", 0)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.ErrorContains(t, err, "permits")
	_, err = simba.NewSemaphore(nil, "s", 1)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewSemaphore(b, " s", 1)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewSemaphore(mutexOnly{b}, "s", 1)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.ErrorContains(t, err, "keeps no semaphores")
	_, err = simba.NewRWMutex(mutexOnly{b}, "rw")
	assert.ErrorContains(t, err, "keeps no read-write locks")
	_, err = simba.NewRWMutex(b, "rw", simba.WithTTL(-time.Second))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)

	s, err := simba.NewSemaphore(b, "s", 1)
	require.NoError(t, err)
	defer s.Close()
	var nilCtx context.Context
	_, err = s.Acquire(nilCtx)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// TestSemaphoreDeadlineAndClose: an Acquire that waits keeps its deadline and tells who
// holds; Close releases the permits held and ends an Acquire under way with ErrClosed.
func TestSemaphoreDeadlineAndClose(t *testing.T) {
	store := memory.NewStore()
	ba, _ := memory.New(store)
	bb, _ := memory.New(store)
	a, err := simba.NewSemaphore(ba, "s", 1, simba.WithContenderID("a"))
	require.NoError(t, err)
	b, err := simba.NewSemaphore(bb, "s", 1, simba.WithContenderID("b"))
	require.NoError(t, err)
	defer b.Close()
	held, err := a.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "a#0", held.Owner().ID)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(ctx)
	assert.ErrorIs(t, err, simba.ErrHeld)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, `semaphore "s" is held by "a#0"`)

	waiting := make(chan error, 1)
	go func() {
		l, err := a.Acquire(context.Background())
		if l != nil {
			_ = l.Release(context.Background())
		}
		waiting <- err
	}()
	require.NoError(t, a.Close())
	select {
	case err := <-waiting:
		assert.ErrorIs(t, err, simba.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("an Acquire under way did not end at Close")
	}
	assert.ErrorIs(t, context.Cause(held.Context()), context.Canceled, "Close ended the hold")
	l, err := b.TryAcquire(t.Context())
	require.NoError(t, err, "Close released the permit")
	assert.Greater(t, l.Token(), held.Token())
	require.NoError(t, l.Release(t.Context()))
	_, err = a.Acquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrClosed)
	assert.Zero(t, store.Len())
}

// TestDowngradeOfAnEndedWriteLease: a write lease released or lost cannot be downgraded;
// the read hold is not taken.
func TestDowngradeOfAnEndedWriteLease(t *testing.T) {
	store := memory.NewStore()
	b, _ := memory.New(store)
	m, err := simba.NewRWMutex(b, "rw", simba.WithContenderID("p"))
	require.NoError(t, err)
	defer m.Close()
	w, err := m.Lock(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "p/w#0", w.Owner().ID)
	require.NoError(t, w.Release(t.Context()))
	_, err = w.Downgrade(t.Context())
	assert.ErrorIs(t, err, simba.ErrNotOwner)

	fb := newFaultyBackend(b)
	lossy, err := simba.NewRWMutex(fb, "rw", simba.WithTTL(200*time.Millisecond), simba.WithTransition(0))
	require.NoError(t, err)
	defer lossy.Close()
	w, err = lossy.Lock(t.Context())
	require.NoError(t, err)
	fb.hang(opAcquire, true) // renewals go unanswered: the write hold is lost
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the write hold was not lost")
	}
	fb.hang(opAcquire, false)
	_, err = w.Downgrade(t.Context())
	assert.ErrorIs(t, err, simba.ErrOwnershipLost)
	require.ErrorIs(t, w.Release(t.Context()), simba.ErrOwnershipLost)
	r, err := m.TryRLock(t.Context())
	require.NoError(t, err, "no read hold was left behind")
	require.NoError(t, r.Release(t.Context()))
}

func TestHoldsAreApartFromMutexes(t *testing.T) {
	b, _ := memory.New(memory.NewStore())
	l, err := simba.NewLocker(b, "x")
	require.NoError(t, err)
	defer l.Close()
	s, err := simba.NewSemaphore(b, "x", 1)
	require.NoError(t, err)
	defer s.Close()
	m, err := simba.NewRWMutex(b, "x")
	require.NoError(t, err)
	defer m.Close()
	var leases []*simba.Lease
	for _, acquire := range []func(context.Context) (*simba.Lease, error){l.TryAcquire, s.TryAcquire, func(ctx context.Context) (*simba.Lease, error) {
		w, err := m.TryLock(ctx)
		if err != nil {
			return nil, err
		}
		return w.Lease, nil
	}} {
		lease, err := acquire(t.Context())
		require.NoError(t, err, "a mutex, a semaphore and a read-write lock of one name are apart")
		leases = append(leases, lease)
	}
	for _, lease := range leases {
		require.NoError(t, lease.Release(t.Context()))
	}
}

// TestHoldKeepsItsDeadlineAcrossClose: an acquisition whose store start-up stalls returns
// by its deadline even when Close, which waits for that start-up, runs meanwhile (found by
// the simulation: the acquisition's way out closed its Locker, waiting with Close).
func TestHoldKeepsItsDeadlineAcrossClose(t *testing.T) {
	_, fb := newFaultyStore()
	fb.stall(opStart)
	defer fb.unstall(opStart)
	m, err := simba.NewRWMutex(fb, "rw")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.RLock(ctx)
		done <- err
	}()
	for fb.count(opStart) == 0 {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("RLock did not return by its deadline while Close waited for its start-up")
	}
	fb.unstall(opStart)
	require.NoError(t, <-closed)
}
