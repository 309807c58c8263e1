package simbagocron_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/simbagocron"
)

// offsetClock is the real clock as a host whose clock is offset ahead reads it: a
// scheduler on it fires each slot offset early.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// slotRuns counts the runs of each slot, a slot being the scheduled time.
type slotRuns struct {
	mu     sync.Mutex
	runs   map[time.Time]int
	latest time.Time
	ran    chan struct{} // receives after each run, never blocking
}

func (s *slotRuns) record(slot time.Time) {
	s.mu.Lock()
	s.runs[slot]++
	if slot.After(s.latest) {
		s.latest = slot
	}
	s.mu.Unlock()
	select {
	case s.ran <- struct{}{}:
	default:
	}
}

// awaitSlot waits until a slot at or after slot has run.
func (s *slotRuns) awaitSlot(t *testing.T, slot time.Time) {
	t.Helper()
	deadline := time.After(time.Until(slot) + time.Minute)
	for {
		s.mu.Lock()
		done := !s.latest.Before(slot)
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-s.ran:
		case <-deadline:
			t.Fatalf("no run of slot %s or later", slot.Format(time.TimeOnly))
		}
	}
}

// TestLockerRunsEachSlotOnce runs a cron job every second, whose run takes 1ms, on three
// instances (a scheduler, a Locker and a backend each, on one store) whose clocks differ
// by a few milliseconds, as hosts' clocks do and as one host's schedulers' start jitter
// and lock latency do. Each slot must run once at most, and most slots must run.
func TestLockerRunsEachSlotOnce(t *testing.T) {
	const (
		period = time.Second
		slots  = 10
	)
	offsets := []time.Duration{0, 4 * time.Millisecond, 8 * time.Millisecond}
	for name, newBackend := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runs := &slotRuns{runs: map[time.Time]int{}, ran: make(chan struct{}, 1)}
			job := "gocron-slots-" + name
			for _, offset := range offsets {
				clock := offsetClock{clockwork.NewRealClock(), offset}
				l, err := simbagocron.NewLocker(newBackend(t))
				require.NoError(t, err)
				s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l), gocron.WithClock(clock))
				require.NoError(t, err)
				_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
					slot := clock.Now().Round(period) // the run begins within a few ms of its slot
					time.Sleep(time.Millisecond)
					runs.record(slot)
				}), gocron.WithName(job))
				require.NoError(t, err)
				s.Start()
				t.Cleanup(func() {
					assert.NoError(t, s.Shutdown())
					assert.NoError(t, l.Close())
				})
			}
			// Slots from the second after the next on: every instance has started by then.
			first := time.Now().Truncate(period).Add(2 * period)
			last := first.Add((slots - 1) * period)
			runs.awaitSlot(t, last.Add(period)) // the last slot's runs have all begun

			runs.mu.Lock()
			defer runs.mu.Unlock()
			var twice, missed []string
			for slot := first; !slot.After(last); slot = slot.Add(period) {
				switch n := runs.runs[slot]; {
				case n > 1:
					twice = append(twice, fmt.Sprintf("%s ×%d", slot.Format(time.TimeOnly), n))
				case n == 0:
					missed = append(missed, slot.Format(time.TimeOnly))
				}
			}
			t.Logf("%d of %d slots ran more than once %v; %d ran not at all %v", len(twice), slots, twice, len(missed), missed)
			assert.Empty(t, twice, "slots run more than once")
			assert.LessOrEqual(t, len(missed), slots/5, "slots run by no instance")
		})
	}
}
