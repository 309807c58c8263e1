package simba

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/observe"

	"github.com/simba-go/simba/internal/clock"
	"github.com/simba-go/simba/internal/goroutine"
)

// Schedule says when a Scheduler runs its work while it leads. Runs never overlap.
type Schedule struct {
	// Period is the time between runs; must be > 0 unless Timetable is set.
	Period time.Duration
	// FixedDelay counts Period from a run's end; else runs start Period apart (missed skipped).
	FixedDelay bool
	// InitialDelay is the time from acquiring leadership to the first run; >= 0.
	InitialDelay time.Duration
	// Timetable, instead of Period, starts runs at its wall-clock instants from leadership
	// plus InitialDelay on, skipping those a run overran: the same on every instance.
	Timetable Timetable
}

// Timetable's Next returns the first run time after t, zero for none.
type Timetable interface {
	Next(t time.Time) time.Time
}

// ScheduledAt returns the instant a Scheduler's run was scheduled for (its slot), given
// the run's context; false for another context.
func ScheduledAt(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(scheduledAtKey{}).(time.Time)
	return at, ok
}

type scheduledAtKey struct{}

// Scheduler runs work on a Schedule while it leads, until a loss or Stop ends the work's
// context. Where the store records slots (backend.SlotRecorder), no slot runs twice.
// It has a Service's lifecycle and must not be copied.
type Scheduler struct {
	svc      *Service
	schedule Schedule
	work     func(ctx context.Context, leader Owner)
	hooks    leaderHooks
	clock    clock.Clock
	leading  sync.WaitGroup // the schedule of the current tenure
	worker   atomic.Uint64  // the number of the goroutine that runs the schedule; 0: none
}

// leaderHooks are the functions of WithLeaderHooks.
type leaderHooks struct {
	started func(ctx context.Context, leader Owner)
	stopped func(leader Owner, cause error)
}

// WithLeaderHooks sets functions (nil or not) a Scheduler calls on leading, before the
// first run, and on stopping, after the last run, with the cause.
func WithLeaderHooks(started func(ctx context.Context, leader Owner), stopped func(leader Owner, cause error)) SchedulerOption {
	return schedulerOption(func(c *config) {
		c.leaderHooks = leaderHooks{started: started, stopped: stopped}
	})
}

// NewScheduler returns a Scheduler for mutex on b, which calls work on schedule with the
// tenure context and owner record (whose Token fences its writes), recovering a panic.
func NewScheduler(b Backend, mutex string, schedule Schedule, work func(ctx context.Context, leader Owner), opts ...SchedulerOption) (*Scheduler, error) {
	cfg, err := configure(b, opts, SchedulerOption.applyScheduler)
	if err != nil {
		return nil, err
	}
	switch {
	case work == nil:
		return nil, invalid("work", nil, "must not be nil")
	case schedule.Timetable != nil && (schedule.Period != 0 || schedule.FixedDelay):
		return nil, invalid("schedule period", schedule.Period, "must be 0, without FixedDelay, with a Timetable")
	case schedule.Timetable == nil && schedule.Period <= 0:
		return nil, invalid("schedule period", schedule.Period, "must be > 0")
	case schedule.InitialDelay < 0:
		return nil, invalid("schedule initial delay", schedule.InitialDelay, "must be >= 0")
	}
	id := cfg.ownID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	s := &Scheduler{schedule: schedule, work: work, hooks: cfg.leaderHooks, clock: cfg.clock}
	s.svc = newService(b, observe.RoleLeader, hooks{acquired: s.acquired, released: s.released}, mutex, id, cfg)
	return s, nil
}

// Start begins contending for leadership; see Service.Start.
func (s *Scheduler) Start(ctx context.Context) error { return s.svc.Start(ctx) }

// Stop ends the work's context, waits for it, then releases; see Service.Stop.
func (s *Scheduler) Stop(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	return s.svc.stopFrom(ctx, !s.inSchedule() && !s.svc.inCallback())
}

// Yield stops the work as a loss does, and contends on; see Service.Yield.
func (s *Scheduler) Yield(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	return s.svc.yield(ctx, "", !s.inSchedule() && !s.svc.inCallback())
}

// HandOff stops the work as Yield does; see Service.HandOff.
func (s *Scheduler) HandOff(ctx context.Context, to string) error {
	if err := s.svc.checkHandOff(ctx, to); err != nil {
		return err
	}
	return s.svc.yield(ctx, to, !s.inSchedule() && !s.svc.inCallback())
}

// Close stops the scheduler if it runs; see Service.Close.
func (s *Scheduler) Close() error { return s.svc.closeFrom(s.inSchedule() || s.svc.inCallback()) }

// Run runs the scheduler until ctx ends; see Service.Run.
func (s *Scheduler) Run(ctx context.Context) error { return s.svc.Run(ctx) }

// Status returns the lifecycle status.
func (s *Scheduler) Status() Status { return s.svc.Status() }

// Leading reports whether this scheduler believes it owns the mutex now.
func (s *Scheduler) Leading() bool { return s.svc.IsOwner() }

// Err returns the error of the scheduler's last store call; see Service.Err.
func (s *Scheduler) Err() error { return s.svc.Err() }

// Mutex returns the name of the mutex.
func (s *Scheduler) Mutex() string { return s.svc.Mutex() }

// ContenderID returns the scheduler's contender ID.
func (s *Scheduler) ContenderID() string { return s.svc.ContenderID() }

// inSchedule reports whether the caller is the goroutine that runs the schedule.
func (s *Scheduler) inSchedule() bool {
	id := s.worker.Load()
	return id != 0 && id == goroutine.ID()
}

// acquired starts the schedule of tenure t (the service's hook).
func (s *Scheduler) acquired(t *tenure, st State) {
	s.leading.Go(func() { s.lead(t, st.After) })
}

// released waits for the schedule to end: its context is already cancelled (the service's
// hook).
func (s *Scheduler) released(State) { s.leading.Wait() }

// lead runs the work on schedule until the context of tenure t ends.
func (s *Scheduler) lead(t *tenure, leader Owner) {
	ctx := t.ctx
	s.worker.Store(goroutine.ID())
	defer s.worker.Store(0)
	if h := s.hooks.started; h != nil {
		s.guard("leadership started hook", func() { h(ctx, leader) })
	}
	if h := s.hooks.stopped; h != nil {
		defer s.guard("leadership stopped hook", func() { h(t.record(), context.Cause(ctx)) })
	}
	clock := s.clock
	from := clock.Now().Add(s.schedule.InitialDelay)
	slots := s.slotsOf(t)
	if slots != nil {
		var known bool
		if from, known = slots.after(ctx, from); !known {
			return
		}
	}
	next, ok := s.first(from)
	if !ok {
		<-ctx.Done()
		return
	}
	due := make(chan struct{}, 1)
	timer := clock.AfterFunc(next.Sub(clock.Now()), func() {
		select {
		case due <- struct{}{}:
		default:
		}
	})
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-due:
		}
		// Belief is checked where it is used: Err looks at the local TTL end itself, so
		// no run starts after it, even when the tenure's timer has not run yet.
		if ctx.Err() != nil {
			return
		}
		if slots == nil || slots.claim(ctx, next) {
			s.guard("scheduled work", func() { s.work(context.WithValue(ctx, scheduledAtKey{}, next), t.record()) })
		}
		if ctx.Err() != nil {
			return
		}
		now := clock.Now()
		if next, ok = s.after(next, now); !ok {
			<-ctx.Done()
			return
		}
		timer.Reset(next.Sub(now))
	}
}

// first returns when the first run of a tenure starts, at from or after; false: never.
func (s *Scheduler) first(from time.Time) (time.Time, bool) {
	if s.schedule.Timetable == nil {
		return from, true
	}
	// Next gives instants after its argument: a nanosecond earlier admits from itself.
	return s.instant(from.Add(-time.Nanosecond))
}

// after returns when the run after the one due at prev starts, seen at now, when it
// ended; false: never.
func (s *Scheduler) after(prev, now time.Time) (time.Time, bool) {
	switch {
	case s.schedule.Timetable != nil:
		next, ok := s.instant(prev)
		if ok && next.Before(now) {
			return s.instant(now) // the run overran: skip the instants it missed
		}
		return next, ok
	case s.schedule.FixedDelay:
		return now.Add(s.schedule.Period), true
	}
	if next := prev.Add(s.schedule.Period); !next.Before(now) {
		return next, true
	}
	return now, true // the run overran: skip the slots it missed, run now
}

// instant returns the Timetable's first instant after t; false when there is none or the
// Timetable misbehaves (an instant not after t, a panic), which is logged.
func (s *Scheduler) instant(t time.Time) (next time.Time, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.svc.log.Error("simba: the schedule's Timetable panicked; no more runs this tenure", "panic", v)
			ok = false
		}
	}()
	// The wall clock only: an instant a Timetable derives from t (t.Add, say) would keep
	// t's monotonic reading, and be compared with now on that clock, not on the wall's.
	t = t.Round(0)
	switch next = s.schedule.Timetable.Next(t); {
	case next.IsZero():
		return next, false
	case !next.After(t):
		s.svc.log.Error("simba: the schedule's Timetable gave an instant not after the one asked about; no more runs this tenure", "after", t, "next", next)
		return next, false
	}
	return next, true
}

// guard runs f, recovering and logging a panic.
func (s *Scheduler) guard(what string, f func()) {
	defer func() {
		if v := recover(); v != nil {
			s.svc.log.Error("simba: "+what+" panicked", "panic", v)
		}
	}()
	f()
}
