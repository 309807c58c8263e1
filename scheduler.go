package simba

import (
	"context"
	"sync"
	"time"
)

// Schedule says when a Scheduler runs its work while it leads.
type Schedule struct {
	// Period is the time between runs; must be > 0.
	Period time.Duration
	// FixedDelay measures Period from the end of one run to the start of the next. When
	// false (fixed rate), runs start Period apart; a run that overruns its slot is
	// followed at once by the next, and missed slots are skipped rather than run in a
	// burst. Runs never overlap either way.
	FixedDelay bool
	// InitialDelay is the time from acquiring leadership to the first run; must be >= 0.
	InitialDelay time.Duration
}

// Scheduler runs work periodically, only while this instance owns the mutex: leader-only
// jobs. When leadership is acquired the schedule starts; when it is lost (or on Stop) the
// context given to the running work is cancelled, no further run starts, and the next
// leader's schedule starts from its own acquisition.
//
// Scheduler has the lifecycle of a Service (Start, Stop, Close, Run). Embed *Scheduler
// in a type of your own to give it that lifecycle:
//
//	type ReportJob struct {
//		*simba.Scheduler
//		db *sql.DB
//	}
//
// A Scheduler is safe for concurrent use and must not be copied.
type Scheduler struct {
	svc      *Service
	schedule Schedule
	work     func(ctx context.Context)
	runs     sync.WaitGroup // the schedule of the current tenure
}

// NewScheduler returns a Scheduler that contends for mutex through b and, while it owns
// the mutex, calls work on schedule. work gets the tenure context, cancelled when
// leadership is lost or the scheduler stops; it should return promptly then. A panic in
// work is recovered and logged, and the schedule goes on. The contender ID is a new
// HostContenderID unless WithContenderID sets one.
func NewScheduler(b Backend, mutex string, schedule Schedule, work func(ctx context.Context), opts ...Option) (*Scheduler, error) {
	cfg, err := checkedConfig(b, opts, forScheduler)
	if err != nil {
		return nil, err
	}
	switch {
	case work == nil:
		return nil, invalid("work", nil, "must not be nil")
	case schedule.Period <= 0:
		return nil, invalid("schedule period", schedule.Period, "must be > 0")
	case schedule.InitialDelay < 0:
		return nil, invalid("schedule initial delay", schedule.InitialDelay, "must be >= 0")
	}
	id := cfg.ownID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	s := &Scheduler{schedule: schedule, work: work}
	s.svc = newService(b, schedulerContender{s: s, mutex: mutex, id: id}, nil, mutex, id, cfg)
	return s, nil
}

// Start begins contending for leadership; see Service.Start.
func (s *Scheduler) Start(ctx context.Context) error { return s.svc.Start(ctx) }

// Stop stops contending, cancels the running work's context and waits for it to return
// before releasing leadership; see Service.Stop.
func (s *Scheduler) Stop(ctx context.Context) error { return s.svc.Stop(ctx) }

// Close stops the scheduler if it runs; see Service.Close.
func (s *Scheduler) Close() error { return s.svc.Close() }

// Run starts the scheduler, waits until ctx ends and stops it; see Service.Run.
func (s *Scheduler) Run(ctx context.Context) error { return s.svc.Run(ctx) }

// Status returns the lifecycle status.
func (s *Scheduler) Status() Status { return s.svc.Status() }

// Leading reports whether this scheduler believes it owns the mutex now.
func (s *Scheduler) Leading() bool { return s.svc.IsOwner() }

// Mutex returns the name of the mutex.
func (s *Scheduler) Mutex() string { return s.svc.Mutex() }

// ContenderID returns the scheduler's contender ID.
func (s *Scheduler) ContenderID() string { return s.svc.ContenderID() }

// schedulerContender receives the scheduler's ownership changes; a separate type keeps
// the callbacks out of the Scheduler's method set, and so out of types that embed it.
type schedulerContender struct {
	s         *Scheduler
	mutex, id string
}

func (c schedulerContender) Mutex() string       { return c.mutex }
func (c schedulerContender) ContenderID() string { return c.id }

func (c schedulerContender) OnAcquired(ctx context.Context, _ State) {
	c.s.runs.Go(func() { c.s.loop(ctx) })
}

// OnReleased waits for the schedule to end: its context is already cancelled.
func (c schedulerContender) OnReleased(State) { c.s.runs.Wait() }

// loop runs the work on schedule until ctx ends.
func (s *Scheduler) loop(ctx context.Context) {
	now := time.Now()
	next := now.Add(s.schedule.InitialDelay)
	timer := time.NewTimer(s.schedule.InitialDelay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		now = time.Now()
		if s.schedule.FixedDelay {
			next = now.Add(s.schedule.Period)
		} else if next = next.Add(s.schedule.Period); next.Before(now) {
			next = now
		}
		timer.Reset(next.Sub(now))
	}
}

func (s *Scheduler) runOnce(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			s.svc.log.Error("simba: scheduled work panicked", "panic", v)
		}
	}()
	s.work(ctx)
}
