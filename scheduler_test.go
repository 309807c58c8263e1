package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// runTimes starts a scheduler on a fresh memory store inside a synctest bubble and
// returns the virtual times of its runs, measured from Start, after the given span.
func runTimes(t *testing.T, sched simba.Schedule, took func(n int) time.Duration, span time.Duration) []time.Duration {
	t.Helper()
	var (
		mu    sync.Mutex
		times []time.Duration
	)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	start := time.Now()
	s, err := simba.NewScheduler(b, "job", sched, func(ctx context.Context, _ simba.Owner) {
		mu.Lock()
		times = append(times, time.Since(start))
		n := len(times)
		mu.Unlock()
		time.Sleep(took(n))
	})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	time.Sleep(span)
	require.NoError(t, s.Stop(t.Context()))
	mu.Lock()
	defer mu.Unlock()
	return times
}

func TestFixedRateSkipsMissedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		took := func(n int) time.Duration {
			if n == 2 {
				return 2500 * time.Millisecond // overruns two slots
			}
			return 0
		}
		got := runTimes(t, simba.Schedule{Period: time.Second}, took, 5*time.Second)
		s := time.Second
		assert.Equal(t, []time.Duration{0, s, 3500 * time.Millisecond, 4500 * time.Millisecond}, got)
	})
}

func TestFixedDelayCountsFromRunEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		took := func(int) time.Duration { return 500 * time.Millisecond }
		got := runTimes(t, simba.Schedule{Period: time.Second, FixedDelay: true, InitialDelay: 2 * time.Second}, took, 4900*time.Millisecond)
		assert.Equal(t, []time.Duration{2 * time.Second, 3500 * time.Millisecond}, got)
	})
}

// When leadership is lost, the running work's context is cancelled at the local TTL end and
// no run starts afterwards.
func TestSchedulerStopsOnLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := memory.New(memory.NewStore())
		require.NoError(t, err)
		var (
			mu        sync.Mutex
			runs      []time.Time
			cancelled time.Time
		)
		s, err := simba.NewScheduler(b, "job", simba.Schedule{Period: time.Second}, func(ctx context.Context, _ simba.Owner) {
			mu.Lock()
			runs = append(runs, time.Now())
			mu.Unlock()
			if len(runs) == 3 {
				<-ctx.Done()
				mu.Lock()
				cancelled = time.Now()
				mu.Unlock()
			}
		}, simba.WithTTL(10*time.Second))
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, s.Start(t.Context()))
		time.Sleep(2500 * time.Millisecond)
		require.NoError(t, b.Close()) // the store becomes unreachable
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		assert.Len(t, runs, 3)
		assert.Equal(t, start.Add(10*time.Second-100*time.Millisecond), cancelled,
			"cancelled at the local TTL end: acquisition + ttl - 1%")
		mu.Unlock()
		assert.False(t, s.Leading())
		_ = s.Stop(t.Context())
	})
}

// The lease's context ends at the local TTL end when the store becomes unreachable, with
// ErrOwnershipLost as its cause, and Release reports the loss.
func TestLeaseContextEndsAtLocalTTLEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		b, err := memory.New(store)
		require.NoError(t, err)
		l, err := simba.NewLocker(b, "m", simba.WithTTL(3*time.Second), simba.WithTransition(time.Second))
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		start := time.Now()
		time.Sleep(2500 * time.Millisecond) // after one renewal at 2s
		require.NoError(t, b.Close())
		<-lease.Done()
		assert.Equal(t, 2*time.Second+3*time.Second-30*time.Millisecond, time.Since(start))
		assert.ErrorIs(t, context.Cause(lease.Context()), simba.ErrOwnershipLost)
		err = lease.Release(t.Context())
		assert.ErrorIs(t, err, simba.ErrOwnershipLost)
		assert.ErrorIs(t, err, simba.ErrClosed, "the failed release on the store is reported too")
	})
}

// Locker waiters block without spinning: while the mutex is held, a waiter makes one
// attempt per contend period.
func TestLockerWaiterDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		b1, _ := memory.New(store)
		b2, _ := memory.New(store)
		holder, _ := simba.NewLocker(b1, "m")
		waiter, _ := simba.NewLocker(b2, "m")
		lease, err := holder.Acquire(t.Context())
		require.NoError(t, err)
		got := make(chan *simba.Lease)
		go func() {
			l, err := waiter.Acquire(t.Context())
			assert.NoError(t, err)
			got <- l
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("acquired a held mutex")
		default:
		}
		require.NoError(t, lease.Release(t.Context()))
		next := <-got
		assert.Greater(t, next.Token(), lease.Token())
		require.NoError(t, next.Release(t.Context()))
	})
}

// When the store does not answer, TryAcquire's error says so, and Acquire's error at its
// deadline carries the store's error as well as the deadline.
func TestLockerReportsStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := memory.New(memory.NewStore())
		require.NoError(t, err)
		l, err := simba.NewLocker(unanswering{b}, "m")
		require.NoError(t, err)
		_, err = l.TryAcquire(t.Context())
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, errNoAnswer)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err = l.Acquire(ctx)
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errNoAnswer)
	})
}

var errNoAnswer = errors.New("no answer")

// unanswering starts contentions whose acquire calls fail.
type unanswering struct{ simba.Backend }

func (u unanswering) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := u.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return failingAcquire{c.(backend.LeaseContention)}, nil
}

type failingAcquire struct{ backend.LeaseContention }

func (failingAcquire) Acquire(context.Context) (backend.Record, error) {
	return backend.Record{}, errNoAnswer
}
