package simba_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// every is a Timetable of the instants that are whole multiples of a duration.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}

// A Timetable's runs start at its instants on the wall clock, not a period after
// leadership began, so that a new leader names the slots its predecessor named; a run that
// overruns skips the slots it missed rather than running one late.
func TestTimetableRunsOnItsInstants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A synctest bubble starts at a whole second; leadership begins 0.3s after.
		time.Sleep(300 * time.Millisecond)
		took := func(n int) time.Duration {
			if n == 2 {
				return 2500 * time.Millisecond // overruns the slots at 3s and 4s
			}
			return 0
		}
		got := runTimes(t, simba.Schedule{Timetable: every(time.Second)}, took, 5900*time.Millisecond)
		at := func(ms int) time.Duration { return time.Duration(ms-300) * time.Millisecond } // from Start
		assert.Equal(t, []time.Duration{at(1000), at(2000), at(5000), at(6000)}, got)
	})
}

func TestTimetableCountsInitialDelayFromLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Millisecond)
		got := runTimes(t, simba.Schedule{Timetable: every(time.Second), InitialDelay: 2 * time.Second}, func(int) time.Duration { return 0 }, 3900*time.Millisecond)
		// Leadership at 0.3s, initial delay to 2.3s: the first slot after is 3s.
		assert.Equal(t, []time.Duration{2700 * time.Millisecond, 3700 * time.Millisecond}, got)
	})
}

// timetableFunc adapts a function to simba.Timetable.
type timetableFunc func(time.Time) time.Time

func (f timetableFunc) Next(t time.Time) time.Time { return f(t) }

// A Timetable with no instant left, one that goes back, and one that panics leave the
// leader leading with no run (and, for the last two, an error logged), never spinning.
func TestTimetableWithoutAFutureInstantRunsNothing(t *testing.T) {
	for name, tt := range map[string]simba.Timetable{
		"none":   timetableFunc(func(time.Time) time.Time { return time.Time{} }),
		"back":   timetableFunc(func(t time.Time) time.Time { return t.Add(-time.Second) }),
		"panics": timetableFunc(func(time.Time) time.Time { panic("bad schedule") }),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := runTimes(t, simba.Schedule{Timetable: tt}, func(int) time.Duration { return 0 }, 10*time.Second)
				assert.Empty(t, got)
			})
		})
	}
}

func TestTimetableExcludesPeriod(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	work := func(context.Context, simba.Owner) {}
	_, err = simba.NewScheduler(b, "job", simba.Schedule{Timetable: every(time.Second), Period: time.Second}, work)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.ErrorContains(t, err, "period")
	_, err = simba.NewScheduler(b, "job", simba.Schedule{Timetable: every(time.Second), FixedDelay: true}, work)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewScheduler(b, "job", simba.Schedule{}, work)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// A run's context tells the instant the run was scheduled for, its slot; the slot a run
// overran is skipped, not told to the next run.
func TestScheduledAtIsTheRunsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		b, err := memory.New(memory.NewStore())
		require.NoError(t, err)
		slots := make(chan time.Time, 4)
		work := func(ctx context.Context, _ simba.Owner) {
			at, ok := simba.ScheduledAt(ctx)
			assert.True(t, ok)
			slots <- at
			time.Sleep(1500 * time.Millisecond) // overruns the slot at 2s
		}
		s, err := simba.NewScheduler(b, "job", simba.Schedule{Timetable: every(time.Second)}, work)
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Start(t.Context()))
		first, second := <-slots, <-slots
		whole := start.Truncate(time.Second)
		assert.True(t, first.Equal(whole.Add(time.Second)), "first run's slot %v", first.Sub(whole))
		assert.True(t, second.Equal(whole.Add(3*time.Second)), "second run's slot %v", second.Sub(whole))
		_, ok := simba.ScheduledAt(t.Context())
		assert.False(t, ok, "a context that is no run's")
		require.NoError(t, s.Stop(t.Context()))
	})
}
