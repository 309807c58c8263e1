package simba_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/clock"
)

// slotRun is a run of a Scheduler as its work saw it: who ran, at which instant of its
// own clock (a slot's, in a synctest bubble), with which token.
type slotRun struct {
	who   string
	at    time.Time
	token uint64
}

// slotScheduler returns a Scheduler on b, named who, whose work sends its runs to runs.
func slotScheduler(t *testing.T, b simba.Backend, who string, sched simba.Schedule, c clock.Clock, runs chan<- slotRun, opts ...simba.SchedulerOption) *simba.Scheduler {
	t.Helper()
	opts = append([]simba.SchedulerOption{simba.WithContenderID(who), simba.WithClock(c)}, opts...)
	s, err := simba.NewScheduler(b, "job", sched, func(_ context.Context, leader simba.Owner) {
		runs <- slotRun{who: who, at: c.Now(), token: leader.Token}
	}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// nextRun returns the next run sent on runs; the deadline only fails the test.
func nextRun(t *testing.T, runs <-chan slotRun, what string) slotRun {
	t.Helper()
	select {
	case r := <-runs:
		return r
	case <-time.After(time.Hour):
		t.Fatalf("no run %s", what)
		return slotRun{}
	}
}

// skewed is the system clock behind by a fixed duration: another process's clock.
type skewed time.Duration

func (s skewed) Now() time.Time { return time.Now().Add(-time.Duration(s)) }
func (skewed) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}

// A new leader that takes over by the previous one's Stop at the very instant of a slot
// that one ran does not run it again: it starts after the slot recorded on the store.
func TestSchedulerNewLeaderAfterStopSkipsTheSlotRun(t *testing.T) {
	for name, sched := range map[string]simba.Schedule{
		"timetable": {Timetable: every(time.Second)},
		"period":    {Period: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(300 * time.Millisecond) // off the Timetable's instants
				store := memory.NewStore()
				ba, _ := memory.New(store)
				bb, _ := memory.New(store)
				runs := make(chan slotRun, 16)
				a := slotScheduler(t, ba, "a", sched, clock.System, runs)
				b := slotScheduler(t, bb, "b", sched, clock.System, runs)
				require.NoError(t, a.Start(t.Context()))
				first := nextRun(t, runs, "of a")
				require.NoError(t, b.Start(t.Context()))
				second := nextRun(t, runs, "of a")
				require.Equal(t, "a", second.who)
				// Stopped at the instant of its second run: b leads from that instant on.
				require.NoError(t, a.Stop(t.Context()))
				took := nextRun(t, runs, "of b")
				assert.Equal(t, "b", took.who)
				assert.True(t, took.at.After(second.at), "b ran the slot at %v after a ran the slots at %v and %v", took.at, first.at, second.at)
				assert.Greater(t, took.token, second.token)
				require.NoError(t, b.Stop(t.Context()))
			})
		})
	}
}

// A new leader that takes over from a leader whose lease was lost never runs a slot at or
// before the one recorded: with a Timetable, not even on a clock behind the first
// leader's; with a Period, not before a Period has passed since the recorded slot.
func TestSchedulerNewLeaderAfterLossSkipsRecordedSlots(t *testing.T) {
	for name, tc := range map[string]struct {
		sched simba.Schedule
		skew  time.Duration // b's clock is behind a's by skew
		gap   time.Duration // the least time from a's last slot to b's first
	}{
		"timetable": {sched: simba.Schedule{Timetable: every(time.Second)}, skew: 30 * time.Second, gap: time.Second},
		"period":    {sched: simba.Schedule{Period: 10 * time.Second}, gap: 10 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(300 * time.Millisecond)
				store := memory.NewStore()
				ba, _ := memory.New(store)
				bb, _ := memory.New(store)
				runs := make(chan slotRun, 16)
				ttl := simba.WithTTL(time.Second)
				a := slotScheduler(t, ba, "a", tc.sched, clock.System, runs, ttl)
				b := slotScheduler(t, bb, "b", tc.sched, skewed(tc.skew), runs, ttl)
				require.NoError(t, a.Start(t.Context()))
				ran := nextRun(t, runs, "of a")
				require.NoError(t, b.Start(t.Context()))
				require.NoError(t, ba.Close()) // a's process dies: its lease lapses
				took := nextRun(t, runs, "of b")
				require.Equal(t, "b", took.who, "a ran again after its process died")
				assert.GreaterOrEqual(t, took.at.Sub(ran.at), tc.gap, "b ran at %v (its clock) after a's slot at %v", took.at, ran.at)
				assert.False(t, a.Leading())
				require.NoError(t, b.Stop(t.Context()))
			})
		})
	}
}

// A Scheduler does not run a slot whose claim the store answers false because another
// Scheduler claimed it first, and runs the next slot it wins.
func TestSchedulerSkipsASlotClaimedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Millisecond)
		store := memory.NewStore()
		ba, _ := memory.New(store)
		runs := make(chan slotRun, 16)
		a := slotScheduler(t, ba, "a", simba.Schedule{Timetable: every(time.Second)}, clock.System, runs)
		require.NoError(t, a.Start(t.Context()))
		ran := nextRun(t, runs, "of a")
		// Another Scheduler of the mutex, with the same token (a process that believed it
		// led, say), claims a's next slot first.
		other := slotContention(t, store)
		taken := ran.at.Add(time.Second)
		won, err := other.ClaimSlot(t.Context(), backend.Slot{At: taken, Token: ran.token})
		require.NoError(t, err)
		require.True(t, won)
		next := nextRun(t, runs, "of a after the slot taken")
		assert.Equal(t, taken.Add(time.Second), next.at, "a ran the slot at %v claimed by another", taken)
		require.NoError(t, a.Stop(t.Context()))
	})
}

// slotContention returns a contention for mutex "job" on store, a SlotRecorder.
func slotContention(t *testing.T, store *memory.Store) backend.SlotRecorder {
	t.Helper()
	b, _ := memory.New(store)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: "job", ContenderID: "other", TTL: time.Second, Wake: func() {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.SlotRecorder)
}

// A Scheduler whose store fails to read the last slot retries and runs nothing until it
// answers; a slot whose claim fails is skipped. Each call has the call timeout.
func TestSchedulerSlotsOnAFailingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Millisecond)
		store := memory.NewStore()
		recorded := time.Now().Truncate(time.Second).Add(5 * time.Second)
		won, err := slotContention(t, store).ClaimSlot(t.Context(), backend.Slot{At: recorded})
		require.NoError(t, err)
		require.True(t, won)
		mb, _ := memory.New(store)
		b := &slotFaults{Backend: mb}
		b.lastFails.Store(3)
		b.claimFails.Store(1)
		runs := make(chan slotRun, 16)
		a := slotScheduler(t, b, "a", simba.Schedule{Timetable: every(time.Second)}, clock.System, runs)
		require.NoError(t, a.Start(t.Context()))
		ran := nextRun(t, runs, "of a")
		// The slot at 6s: its claim failed; the slot at 7s: won.
		assert.Equal(t, recorded.Add(2*time.Second), ran.at, "the slot recorded last is at %v", recorded)
		assert.EqualValues(t, 4, b.lastCalls.Load(), "LastSlot calls: three failed, one answered")
		assert.EqualValues(t, 2, b.claimCalls.Load())
		assert.Zero(t, b.noDeadline.Load(), "slot calls without a deadline")
		require.NoError(t, a.Stop(t.Context()))
	})
}

var errSlotOutage = errors.New("slot store outage")

// slotFaults fails the first slot calls of its contentions, as many as its counters say.
type slotFaults struct {
	simba.Backend
	lastFails, claimFails atomic.Int32
	lastCalls, claimCalls atomic.Int32
	noDeadline            atomic.Int32
}

func (f *slotFaults) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := f.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return faultySlots{c.(backend.LeaseContention), c.(backend.SlotRecorder), f}, nil
}

type faultySlots struct {
	backend.LeaseContention
	rec backend.SlotRecorder
	f   *slotFaults
}

func (c faultySlots) LastSlot(ctx context.Context) (backend.Slot, error) {
	c.f.lastCalls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		c.f.noDeadline.Add(1)
	}
	if c.f.lastFails.Add(-1) >= 0 {
		return backend.Slot{}, errSlotOutage
	}
	return c.rec.LastSlot(ctx)
}

func (c faultySlots) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	c.f.claimCalls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		c.f.noDeadline.Add(1)
	}
	if c.f.claimFails.Add(-1) >= 0 {
		return false, errSlotOutage
	}
	return c.rec.ClaimSlot(ctx, s)
}
