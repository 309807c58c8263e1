package simba_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
)

// Issue 12, finding 3: start-up failures differed by store. One rule now: Service.Start
// fails fast with the store's error; Locker.Acquire retries start-up failures with
// backoff until its context ends; an error matches a context error only when the
// caller's context ended (a start-up cut off by simba's call timeout matches ErrTimeout).

var errRefused = errors.New("connection refused")

// A store that is down when Acquire begins and back 3s later: a 10s Acquire succeeds.
func TestAcquireRetriesStartUpFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		l, err := simba.NewLocker(f, "m")
		require.NoError(t, err)
		f.fail(opStart, errRefused)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		go func() {
			time.Sleep(3 * time.Second)
			f.fail(opStart, nil)
		}()
		lease, err := l.Acquire(ctx)
		require.NoError(t, err, "Acquire gave up although its context had not ended")
		assert.Greater(t, f.count(opStart), 1, "it retried")
		require.NoError(t, lease.Release(t.Context()))
		require.NoError(t, l.Close())
	})
}

// A store that stays down: Acquire returns at its deadline with both the context's error
// and the store's; TryAcquire returns at once with the store's error only.
func TestAcquireReportsStartUpFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		l, err := simba.NewLocker(f, "m")
		require.NoError(t, err)
		f.fail(opStart, errRefused)

		began := time.Now()
		_, err = l.TryAcquire(t.Context())
		assert.Zero(t, time.Since(began))
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, errRefused)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = l.Acquire(ctx)
		assert.Equal(t, 10*time.Second, time.Since(began))
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errRefused)
		require.NoError(t, l.Close())
	})
}

// A store that does not answer (a client that honours deadlines, as go-zookeeper's connect
// does): the start-up is cut off by the call timeout, and the error says so rather than
// claim the caller's deadline passed.
func TestStartUpTimeoutIsNotTheCallersDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		f.hang(opStart, true)
		svc, err := simba.NewService(f, simba.ContenderFuncs{MutexName: "m", ID: "c"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		began := time.Now()
		err = svc.Start(ctx)
		assert.Equal(t, simba.DefaultTTL/4, time.Since(began), "cut off by the call timeout")
		assert.ErrorIs(t, err, simba.ErrTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context had not ended")

		l, err := simba.NewLocker(f, "m")
		require.NoError(t, err)
		_, err = l.TryAcquire(ctx)
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, simba.ErrTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)

		_, err = l.Acquire(ctx) // retries until ctx ends: then it is the caller's deadline
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, simba.ErrTimeout, "and the store's last error")
		require.NoError(t, l.Close())
		require.NoError(t, svc.Close())
	})
}

// Issue 12, finding 4: a contender that cannot reach its store says so: Err reports the
// store's error while it retries, and nil again once the store answers.
func TestServiceErrReportsStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		svc, err := simba.NewService(f, simba.ContenderFuncs{MutexName: "m", ID: "c"})
		require.NoError(t, err)
		assert.NoError(t, svc.Err(), "not running")
		f.fail(opAcquire, errRefused)
		require.NoError(t, svc.Start(t.Context()))
		time.Sleep(time.Second)
		assert.ErrorIs(t, svc.Err(), errRefused)
		f.fail(opAcquire, nil)
		time.Sleep(simba.DefaultTTL)
		assert.NoError(t, svc.Err())
		assert.True(t, svc.IsOwner())
		require.NoError(t, svc.Close())
	})
}
