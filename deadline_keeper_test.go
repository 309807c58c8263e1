package simba_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/goroutine"
)

// Issue 35: a Locker made its start-up and release calls on goroutines of its own, to keep
// a deadline that a store call might ignore: two goroutines and four switches per critical
// section. On a backend that keeps its calls' deadlines (backend.DeadlineKeeper) the
// caller's goroutine makes them; each call is still bounded by the caller's deadline and
// the call timeout, and what a deadline leaves unknown is undone in the background.

// keepingStore returns a memory store and a faultyBackend on it that keeps deadlines, with
// the backend to use.
func keepingStore() (*faultyBackend, simba.Backend, func() int) {
	store, f, b := faultyKinds[1].new()
	return f, b, store.Len
}

// The calls of an Acquire and a Release with contexts that can end are made on the
// caller's goroutine (before: on goroutines of their own).
func TestKeeperCallsOnTheCallersGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, b, stored := keepingStore()
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		me := goroutine.ID()
		for _, op := range []string{opStart, opAcquire, opRelease} {
			assert.Equal(t, me, f.caller(op), "the %s call was not made on the caller's goroutine", op)
		}
		require.NoError(t, l.Close())
		assert.Zero(t, stored())
	})
}

// Against a store that does not answer, a context without a deadline is kept by the call
// timeout: TryAcquire and Release return once it has passed, with an error that says so
// (ErrTimeout).
func TestKeeperCallsEndAtTheCallTimeout(t *testing.T) {
	const callTimeout = 2 * time.Second
	for _, op := range []string{opStart, opAnswer, opRelease} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, b, stored := keepingStore()
				l, err := simba.NewLocker(b, "m", simba.WithCallTimeout(callTimeout))
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				began := time.Now()
				if op == opRelease {
					lease, err := l.Acquire(ctx)
					require.NoError(t, err)
					f.stall(op)
					began = time.Now()
					err = lease.Release(ctx)
					assert.ErrorIs(t, err, simba.ErrTimeout)
					assert.ErrorContains(t, err, "release")
				} else {
					f.stall(op)
					_, err = l.TryAcquire(ctx)
					assert.ErrorIs(t, err, simba.ErrNotAcquired)
					assert.ErrorIs(t, err, simba.ErrTimeout)
				}
				assert.Equal(t, callTimeout, time.Since(began), "the call did not end at the call timeout")
				f.unstall(op)
				if op != opRelease { // the acquisition whose answer was lost was released
					assert.Zero(t, stored())
				}
				require.NoError(t, l.Close())
			})
		})
	}
}

// An acquisition whose answer the caller's deadline cut off may have been applied: it is
// released in the background, and Close waits for that release.
func TestKeeperCloseJoinsTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, b, stored := keepingStore()
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		f.stall(opAnswer)
		f.stall(opRelease)
		within(t, "Acquire", func(ctx context.Context) error {
			_, err := l.Acquire(ctx)
			assert.ErrorIs(t, err, simba.ErrNotAcquired)
			return err
		})
		assert.Equal(t, 1, stored(), "the store applied the acquisition")
		closeWaits(t, l.Close, "the release", func() { f.unstall(opRelease) })
		assert.Zero(t, stored(), "the acquisition was released")
	})
}

// A Release whose deadline ends before the store answers returns then; the release goes
// on in the background (made again: its outcome was unknown) and reaches the store.
func TestKeeperReleaseGoesOnInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, b, stored := keepingStore()
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		f.stall(opRelease)
		within(t, "Release", lease.Release)
		synctest.Wait()
		assert.Equal(t, 2, f.count(opRelease), "the release was not made again in the background")
		f.unstall(opRelease)
		synctest.Wait()
		assert.Zero(t, stored(), "the background release reached the store")
		require.NoError(t, l.Close())
	})
}

// A Release while a renewal is under way waits for it, as long as its deadline lasts, on
// the caller's goroutine: the halt cuts the renewal short, and the release follows.
func TestKeeperReleaseWaitsForTheRenewalUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, b, stored := keepingStore()
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		f.stall(opAcquire)
		for f.count(opAcquire) < 2 { // the renewal began, and stalls
			time.Sleep(100 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		require.NoError(t, lease.Release(ctx))
		assert.Equal(t, goroutine.ID(), f.caller(opRelease), "the release was not made on the caller's goroutine")
		assert.Zero(t, stored())
		f.unstall(opAcquire)
		require.NoError(t, l.Close())
	})
}
