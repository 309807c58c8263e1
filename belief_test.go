package simba_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/clock"
)

// These tests pause one process (its clock: while paused none of its timers fires) while
// another takes the mutex over, then resume it without letting its timers run first, as
// a process resumed after SIGSTOP may run its goroutines in any order. Nothing may act on
// the lapsed lease: belief is checked where it is used, not only by a timer.

var pauseOptions = []simba.Option{simba.WithTTL(2 * time.Second), simba.WithTransition(time.Second)}

// pauseAndResume pauses clk for long enough that another contender can take the mutex
// over, waits until taken says it has, resumes clk and returns the timers that came due,
// still unfired.
func pauseAndResume(t *testing.T, clk *clock.Pausable, taken func() bool) []clock.Due {
	t.Helper()
	clk.Pause()
	time.Sleep(6 * time.Second) // past ttl + transition + jitter
	synctest.Wait()
	require.True(t, taken(), "another contender took the mutex over during the pause")
	return clk.Resume()
}

// fireInOrder fires the timers that came due during a pause in the order they came due,
// each running to completion before the next: the timer ending belief, which came due at
// the local TTL end, runs after those that came due before it (a Scheduler's next run, a
// renewal).
func fireInOrder(due []clock.Due) {
	for _, d := range due {
		d.Fire()
		synctest.Wait()
	}
}

// fireLatestFirst fires them the other way round.
func fireLatestFirst(due []clock.Due) {
	for i := len(due) - 1; i >= 0; i-- {
		due[i].Fire()
		synctest.Wait()
	}
}

// Issue 12, finding 1: a Scheduler whose leader was paused while another took over started
// a new run after resuming, before the timer ending its belief had run.
func TestSchedulerStartsNoRunAfterPause(t *testing.T) {
	for name, fire := range map[string]func([]clock.Due){"in order": fireInOrder, "latest first": fireLatestFirst} {
		t.Run(name, func(t *testing.T) { testSchedulerAfterPause(t, fire) })
	}
}

func testSchedulerAfterPause(t *testing.T, fire func([]clock.Due)) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		ba, _ := memory.New(store)
		bb, _ := memory.New(store)
		clk := clock.NewPausable(clock.System)
		var (
			mu   sync.Mutex
			runs []time.Time
		)
		schedule := simba.Schedule{Period: 100 * time.Millisecond}
		a, err := simba.NewScheduler(ba, "job", schedule, func(context.Context, simba.Owner) {
			mu.Lock()
			runs = append(runs, time.Now())
			mu.Unlock()
		}, optionsFor[simba.SchedulerOption](append(pauseOptions, simba.WithClock(clk))...)...)
		require.NoError(t, err)
		b, err := simba.NewScheduler(bb, "job", schedule, func(context.Context, simba.Owner) {}, optionsFor[simba.SchedulerOption](pauseOptions...)...)
		require.NoError(t, err)
		require.NoError(t, a.Start(t.Context()))
		time.Sleep(time.Second)
		synctest.Wait()
		require.True(t, a.Leading())
		require.NoError(t, b.Start(t.Context()))

		due := pauseAndResume(t, clk, b.Leading)
		resumed := time.Now()
		require.NotEmpty(t, due)
		fire(due)

		mu.Lock()
		for _, at := range runs {
			assert.True(t, at.Before(resumed), "a run started after the pause, at %s, on a lapsed lease", at.Sub(resumed))
		}
		mu.Unlock()
		assert.False(t, a.Leading())
		require.NoError(t, a.Stop(t.Context()))
		require.NoError(t, b.Stop(t.Context()))
	})
}

// The work gets the tenure's owner record, whose token fences its writes, and the leader
// hooks run around each tenure.
func TestSchedulerWorkGetsTheTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := memory.New(memory.NewStore())
		var (
			mu      sync.Mutex
			tokens  []uint64
			started []simba.Owner
			stopped []error
		)
		s, err := simba.NewScheduler(b, "job", simba.Schedule{Period: time.Second},
			func(_ context.Context, leader simba.Owner) {
				mu.Lock()
				defer mu.Unlock()
				tokens = append(tokens, leader.Token)
			},
			simba.WithLeaderHooks(
				func(_ context.Context, leader simba.Owner) {
					mu.Lock()
					defer mu.Unlock()
					started = append(started, leader)
				},
				func(_ simba.Owner, cause error) {
					mu.Lock()
					defer mu.Unlock()
					stopped = append(stopped, cause)
				}))
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		time.Sleep(2500 * time.Millisecond)
		require.NoError(t, s.Stop(t.Context()))
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, started, 1)
		assert.NotZero(t, started[0].Token)
		assert.Equal(t, []uint64{started[0].Token, started[0].Token, started[0].Token}, tokens)
		require.Len(t, stopped, 1)
		assert.ErrorIs(t, stopped[0], context.Canceled)
	})
}

// Issue 12, finding 1 for the Locker: after a pause, the lease's context says the lease has
// lapsed at the first look, before any timer of the process has run.
func TestLeaseContextReportsLapseAtFirstLook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		ba, _ := memory.New(store)
		bb, _ := memory.New(store)
		clk := clock.NewPausable(clock.System)
		a, err := simba.NewLocker(ba, "m", optionsFor[simba.LockerOption](append(pauseOptions, simba.WithClock(clk))...)...)
		require.NoError(t, err)
		b, err := simba.NewLocker(bb, "m", optionsFor[simba.LockerOption](pauseOptions...)...)
		require.NoError(t, err)
		lease, err := a.Acquire(t.Context())
		require.NoError(t, err)
		var next *simba.Lease
		got := make(chan struct{})
		go func() {
			defer close(got)
			next, _ = b.Acquire(t.Context())
		}()
		due := pauseAndResume(t, clk, func() bool {
			select {
			case <-got:
				return next != nil
			default:
				return false
			}
		})
		// No timer of a has run yet.
		assert.Error(t, lease.Context().Err(), "the lease's context still says alive after its local TTL end")
		assert.ErrorIs(t, context.Cause(lease.Context()), simba.ErrOwnershipLost)
		assert.Greater(t, next.Token(), lease.Token())
		err = lease.Release(t.Context())
		assert.ErrorIs(t, err, simba.ErrOwnershipLost)
		fireInOrder(due)
		require.NoError(t, next.Release(t.Context()))
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
}

// Issue 12, finding 1 for Mutexes: a holder that releases after a pause must not hand the
// lapsed tenure on to the next local waiter.
func TestMutexesGrantsNoLapsedTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		ba, _ := memory.New(store)
		bb, _ := memory.New(store)
		clk := clock.NewPausable(clock.System)
		m, err := simba.NewMutexes(ba, optionsFor[simba.MutexesOption](append(pauseOptions, simba.WithClock(clk))...)...)
		require.NoError(t, err)
		other, err := simba.NewLocker(bb, "m", optionsFor[simba.LockerOption](pauseOptions...)...)
		require.NoError(t, err)
		first, err := m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		type result struct {
			lease *simba.Lease
			err   error
		}
		second := make(chan result, 1)
		go func() {
			l, err := m.Acquire(t.Context(), "m")
			second <- result{l, err}
		}()
		var theirs *simba.Lease
		took := make(chan struct{})
		go func() {
			defer close(took)
			theirs, _ = other.Acquire(t.Context())
		}()
		synctest.Wait()
		require.Equal(t, 1, m.Waiting("m"))
		due := pauseAndResume(t, clk, func() bool {
			select {
			case <-took:
				return theirs != nil
			default:
				return false
			}
		})
		// Resumed, no timer run yet: the holder releases; the waiter must not get the
		// tenure, which lapsed during the pause.
		if err := first.Release(t.Context()); err != nil {
			require.ErrorIs(t, err, simba.ErrOwnershipLost)
		}
		synctest.Wait()
		select {
		case r := <-second:
			require.NoError(t, r.err)
			assert.Error(t, r.lease.Context().Err(), "a lease on a lapsed tenure was handed out")
			_ = r.lease.Release(t.Context())
		default: // still waiting: right
		}
		fireInOrder(due)
		require.NoError(t, theirs.Release(t.Context()))
		r := <-second
		require.NoError(t, r.err)
		assert.Greater(t, r.lease.Token(), theirs.Token(), "the waiter got a tenure of its own, after the other process's")
		require.NoError(t, r.lease.Release(t.Context()))
		require.NoError(t, m.Close())
		require.NoError(t, other.Close())
	})
}
