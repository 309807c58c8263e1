package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"
)

// Service runs a Contender (or Retriever) for one mutex, its status going INITIAL ->
// STARTING -> RUNNING -> STOPPING -> INITIAL, and again. It must not be copied.
type Service struct {
	// identity and configuration: set by the constructor, read-only after
	backend Backend
	role    observe.Role
	hooks   hooks
	mutex   string
	id      string       // contender ID; empty for a retriever
	claim   string       // claimKey(mutex, id), made once: every lifecycle claims it
	hold    backend.Hold // a semaphore's or read-write lock's (holds.go); zero for a mutex
	cfg     config
	period  contendPeriod
	log     *slog.Logger
	onPanic func(v any) // recovered, made once: a lifecycle's dispatcher takes it
	// inline: the backend keeps its calls' deadlines (backend.DeadlineKeeper), so the
	// calls a caller waits for are made on its goroutine: none is needed to keep ctx.
	inline bool

	calls   chan struct{}  // a lock held by Start, Stop and Close (see lock)
	closed  bool           // guarded by calls
	closing atomic.Bool    // Close has been called
	status  atomic.Int32   // a Status
	bg      sync.WaitGroup // finishing lifecycles and abandoned starts; Close waits for them

	// A timer of each kind that an ended lifecycle stopped before it fired: the next one
	// resets it rather than make one.
	roundsTimer spareTimer
	tenureTimer spareTimer

	mu      sync.Mutex // guards the fields below (lock order: see lifecycle.go)
	cur     *lifecycle // the running lifecycle; nil while not started
	last    *lifecycle // the last lifecycle begun, whose callbacks may still be delivered
	settled <-chan struct{}
}

// NewService returns a service that contends for c.Mutex() as c.ContenderID() on b.
func NewService(b Backend, c Contender, opts ...ServiceOption) (*Service, error) {
	cfg, err := configure(b, opts, ServiceOption.applyService)
	if err != nil {
		return nil, err
	}
	if isNil(c) {
		return nil, invalid("contender", nil, "must not be nil")
	}
	mutex, id := c.Mutex(), c.ContenderID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	h := hooks{
		acquired: func(t *tenure, st State) { c.OnAcquired(t.ctx, st) },
		released: c.OnReleased,
	}
	return newService(b, observe.RoleLeader, h, mutex, id, cfg), nil
}

// NewRetrievalService returns a service that reports to r who owns r.Mutex() on b.
func NewRetrievalService(b Backend, r Retriever, opts ...Option) (*Service, error) {
	cfg, err := configure(b, opts, Option.applyService)
	if err != nil {
		return nil, err
	}
	if isNil(r) {
		return nil, invalid("retriever", nil, "must not be nil")
	}
	mutex := r.Mutex()
	if err := validateNames(b, mutex, "", false); err != nil {
		return nil, err
	}
	return newService(b, observe.RoleObserver, hooks{changed: r.NotifyOwner}, mutex, "", cfg), nil
}

func newService(b Backend, role observe.Role, h hooks, mutex, id string, cfg config) *Service {
	// One With, not one per attribute: each copies the logger and its handler.
	var log *slog.Logger
	if id != "" {
		log = cfg.logger.With("mutex", mutex, "contender", id)
	} else {
		log = cfg.logger.With("mutex", mutex)
	}
	keeper, ok := b.(backend.DeadlineKeeper)
	batcher, batches := b.(backend.RenewalBatcher)
	s := &Service{
		backend: b,
		role:    role,
		hooks:   h,
		mutex:   mutex,
		id:      id,
		claim:   claimKey(mutex, id),
		cfg:     cfg,
		period: contendPeriod{
			ttl: cfg.ttl, transition: cfg.transition, lead: cfg.renewalLead, jitter: cfg.jitter,
			onGrid: batches && batcher.BatchesRenewals(),
		},
		log:    log,
		inline: ok && keeper.KeepsDeadlines(),
		calls:  make(chan struct{}, 1),
	}
	s.onPanic = s.recovered
	return s
}

// Mutex returns the name of the mutex the service contends for or observes.
func (s *Service) Mutex() string { return s.mutex }

// ContenderID returns the contender's ID, or "" for a retrieval service.
func (s *Service) ContenderID() string { return s.id }

// Status returns the lifecycle status.
func (s *Service) Status() Status { return Status(s.status.Load()) }

func (s *Service) setStatus(st Status) { s.status.Store(int32(st)) }

// Owner returns the owner the service believes in now; the zero Owner if not running.
func (s *Service) Owner() Owner {
	if l := s.current(); l != nil {
		return l.believedOwner()
	}
	return Owner{}
}

// State returns the last change of owner the service saw, kept after Stop.
func (s *Service) State() State {
	s.mu.Lock()
	l := s.last
	s.mu.Unlock()
	if l == nil {
		return State{}
	}
	return l.lastState()
}

// IsOwner reports whether this contender believes it owns the mutex now.
func (s *Service) IsOwner() bool { return s.believed() != nil }

// Err returns the error of the running service's last store call.
func (s *Service) Err() error {
	if l := s.current(); l != nil {
		return l.err()
	}
	return nil
}

// current returns the running lifecycle, or nil.
func (s *Service) current() *lifecycle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// believed returns the tenure this contender believes in now, or nil.
func (s *Service) believed() *tenure {
	if l := s.current(); l != nil {
		return l.believed()
	}
	return nil
}

// overdue returns how long the running lifecycle's renewal is overdue.
func (s *Service) overdue() time.Duration {
	if l := s.current(); l != nil {
		return l.overdue()
	}
	return 0
}

// attemptNow makes the running lifecycle attempt at once and returns that attempt's error
// (lifecycle.attemptNow); nil when none runs.
func (s *Service) attemptNow(ctx context.Context) error {
	if l := s.current(); l != nil {
		return l.attemptNow(ctx)
	}
	return nil
}

// othersWaiting asks the store, through the running lifecycle, whether other contenders
// wait for the mutex (lifecycle.othersWaiting).
func (s *Service) othersWaiting(ctx context.Context) (waiting, known bool) {
	if l := s.current(); l != nil {
		return l.othersWaiting(ctx)
	}
	return false, false
}

// backoff returns the delay before the retry that follows failures failed start-ups.
func (s *Service) backoff(failures int) time.Duration { return s.period.retry(failures, false) }

// settle waits for the service's store work in the background: a start-up that its
// caller gave up on, a release.
func (s *Service) settle() { s.bg.Wait() }

// logs reports whether the logger takes records of level. Calls on the hot paths ask first:
// a disabled slog call still costs its arguments and slog's large stack frame, which can
// make a short-lived goroutine grow its stack.
func (s *Service) logs(level slog.Level) bool {
	return s.log.Enabled(context.Background(), level)
}

// recovered logs a panic of a user callback; contention goes on.
func (s *Service) recovered(v any) {
	s.log.Error("simba: callback panicked", "panic", v)
}

// ---- Start, Stop, Close, Run ------------------------------------------------------------

// Start begins contending (or observing) until Stop or Close. ctx bounds the start-up
// only, which fails fast on an outage or refusal, leaving the service INITIAL.
func (s *Service) Start(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	_, err := s.begin(ctx, runSpec{delay: s.cfg.initialDelay})
	return err
}

// begin starts a lifecycle as spec says and returns it.
func (s *Service) begin(ctx context.Context, spec runSpec) (*lifecycle, error) {
	// The lifecycle's callbacks begin once Start has completed, the lock let go included,
	// so that they find the service RUNNING and free to stop (a Stop from inside one), or
	// stopped again if it failed. Deferred first, this runs after the unlock.
	var resume func()
	defer func() {
		if resume != nil {
			resume()
		}
	}()
	if err := s.lock(ctx); err != nil {
		return nil, wrapf(err, "simba: start %q", s.mutex)
	}
	defer s.unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if st := s.Status(); st != StatusInitial {
		return nil, fmt.Errorf("%w: status %s", ErrAlreadyStarted, st)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapf(err, "simba: start %q", s.mutex) // ended already: the store is not asked
	}
	// The previous lifecycle's release must reach the store before this one's acquire:
	// landing after it, it would end the new tenure.
	s.mu.Lock()
	settled := s.settled
	s.mu.Unlock()
	if settled != nil {
		select {
		case <-settled:
		case <-ctx.Done():
			return nil, fmt.Errorf("simba: start %q: the previous lifecycle's release is still under way: %w", s.mutex, ctx.Err())
		}
	}
	s.setStatus(StatusStarting)
	if s.id != "" {
		if err := claim(s.claim, s.mutex, s.id); err != nil {
			s.setStatus(StatusInitial)
			return nil, err
		}
	}
	l := newLifecycle(s, spec, s.hooks)
	resume = l.events.Resume
	s.mu.Lock()
	s.cur, s.last, s.settled = l, l, l.finished
	s.mu.Unlock()

	first, err := l.open(ctx)
	if err != nil {
		s.detach(l)
		s.setStatus(StatusInitial)
		return nil, wrapf(err, "simba: start %q", s.mutex)
	}
	l.run(first)
	s.setStatus(StatusRunning)
	l.markStarted()
	if s.logs(slog.LevelInfo) {
		s.log.Info("simba: started")
	}
	return l, nil
}

// detach forgets l as the running lifecycle.
func (s *Service) detach(l *lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == l {
		s.cur = nil
	}
}

// Yield steps down as Stop does, then queues behind the next waiter. It returns once the
// mutex is back (at once from a callback), or ErrNotOwner if not leading.
func (s *Service) Yield(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	return s.yield(ctx, "", !s.inCallback())
}

// HandOff steps down as Yield does, but the store gives the mutex to waiting contender to;
// if to does not wait (ErrNotWaiting), it goes back as by Yield. ErrUnsupported if the
// store cannot: nothing happens then.
func (s *Service) HandOff(ctx context.Context, to string) error {
	if err := s.checkHandOff(ctx, to); err != nil {
		return err
	}
	return s.yield(ctx, to, !s.inCallback())
}

// checkHandOff checks HandOff's arguments.
func (s *Service) checkHandOff(ctx context.Context, to string) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	if err := ValidateContenderID(to); err != nil {
		return err
	}
	if to == s.id {
		return invalid("contender ID", to, "must not be the leader's own")
	}
	return nil
}

// yield is Yield, or, with to set, HandOff.
func (s *Service) yield(ctx context.Context, to string, wait bool) error {
	l := s.current()
	if l == nil {
		return fmt.Errorf("%w: status %s", ErrNotRunning, s.Status())
	}
	y, err := l.yield(to)
	if err != nil || !wait {
		return err
	}
	what := "yield"
	if to != "" {
		what = "hand-off"
	}
	select {
	case <-y.done:
		if y.err != nil {
			return wrapf(y.err, "simba: %s %q", what, s.mutex)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("simba: %s %q: the release is still under way: %w", what, s.mutex, ctx.Err())
	}
}

// Stop ends belief, delivers OnReleased, then releases the mutex on the store (a failed
// release lets it lapse), so no successor overlaps. From a callback, it does not wait.
func (s *Service) Stop(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	return s.stopFrom(ctx, !s.inCallback())
}

// stopFrom is Stop. Without wait it neither waits for the lock nor for the stop to
// complete: it is called from inside a callback of this service (which the stop waits
// for), or by a Locker that leaves the release to the background.
func (s *Service) stopFrom(ctx context.Context, wait bool) error {
	if st := s.Status(); st != StatusRunning {
		// Not running (a Start under way, a Stop or Close under way, or stopped): an
		// error at once, rather than a wait for the lifecycle call under way.
		if s.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("%w: status %s", ErrNotRunning, st)
	}
	if !wait {
		if !s.tryLock() {
			return fmt.Errorf("%w: another Start, Stop or Close is under way", ErrNotRunning)
		}
	} else if err := s.lock(ctx); err != nil {
		return wrapf(err, "simba: stop %q", s.mutex)
	}
	defer s.unlock()
	if s.closed {
		return ErrClosed
	}
	return s.stop(ctx, wait)
}

func (s *Service) stop(ctx context.Context, wait bool) error {
	if st := s.Status(); st != StatusRunning {
		return fmt.Errorf("%w: status %s", ErrNotRunning, st)
	}
	s.setStatus(StatusStopping)
	defer s.setStatus(StatusInitial)
	l := s.current()
	l.halt()
	s.detach(l)
	switch {
	case wait && ctx.Done() == nil:
		l.finish(ctx) // no deadline to keep: no goroutine is needed to keep it
		return s.finished(l)
	case wait && s.inline && l.finishWithin(ctx):
		return s.finished(l)
	}
	s.bg.Go(func() { l.finish(ctx) })
	if !wait {
		return nil
	}
	select {
	case <-l.finished:
		return s.finished(l)
	case <-ctx.Done():
		select {
		case <-l.finished: // both were ready (ctx had ended before the call)
			return s.finished(l)
		default:
		}
		return fmt.Errorf("simba: stop %q: the release is still under way: %w", s.mutex, ctx.Err())
	}
}

// finished returns Stop's error once l has finished.
func (s *Service) finished(l *lifecycle) error {
	if l.finishErr != nil {
		return wrapf(l.finishErr, "simba: stop %q", s.mutex)
	}
	return nil
}

// Close stops the service if it runs; see the package doc. From a callback, it does not
// wait for that one.
func (s *Service) Close() error { return s.closeFrom(s.inCallback()) }

// closeFrom is Close; fromCallback says that it was called from inside a callback of this
// service (or a Scheduler's work), which it must not wait for.
func (s *Service) closeFrom(fromCallback bool) error {
	if fromCallback {
		if !s.tryLock() {
			go func() { _ = s.Close() }() // the holder of the lock waits for this callback
			return nil
		}
		defer s.unlock()
		if s.closed {
			return nil
		}
		s.closed = true
		s.closing.Store(true)
		if s.Status() == StatusRunning {
			return s.stop(context.Background(), false)
		}
		return nil
	}
	s.closing.Store(true)
	s.calls <- struct{}{}
	var err error
	if !s.closed {
		s.closed = true
		if s.Status() == StatusRunning {
			err = s.stop(context.Background(), true)
		}
	}
	s.unlock()
	s.bg.Wait()
	return err
}

// Run starts the service, waits for ctx's end (or a Stop or Close) and stops it within the
// call timeout, for errgroup and the like. It returns Start's or Stop's error.
func (s *Service) Run(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	l, err := s.begin(ctx, runSpec{delay: s.cfg.initialDelay})
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-l.halted.ch:
		return nil
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.callTimeout)
	defer cancel()
	err = s.Stop(stop)
	if errors.Is(err, ErrNotRunning) || errors.Is(err, ErrClosed) {
		return nil // stopped elsewhere meanwhile
	}
	return err
}

// isClosed reports whether Close has been called, without waiting for a lifecycle call.
func (s *Service) isClosed() bool { return s.closing.Load() }

// inCallback reports whether the caller runs inside one of the service's callbacks.
func (s *Service) inCallback() bool {
	// The last lifecycle, not the current one: a Stop or Close from elsewhere has ended
	// the current one when it delivers OnReleased, and waits for it.
	s.mu.Lock()
	l := s.last
	s.mu.Unlock()
	return l != nil && l.events.Delivering()
}

// lock takes the lock of lifecycle calls, or returns ctx's error when ctx ends first. A
// free lock is taken even when ctx has ended already, so that a call with an ended
// context does what it says (a Stop stops, leaving the release to the background) rather
// than toss a coin between the two.
func (s *Service) lock(ctx context.Context) error {
	if s.tryLock() {
		return nil
	}
	select {
	case s.calls <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryLock takes the lock of lifecycle calls if it is free.
func (s *Service) tryLock() bool {
	select {
	case s.calls <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Service) unlock() { <-s.calls }
