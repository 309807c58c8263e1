package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/simba-go/simba/internal/dispatch"
	"github.com/simba-go/simba/internal/mutation"
)

// Start begins contending (or observing). ctx bounds only the start-up: the start-up I/O,
// which the call timeout bounds too, and the wait for the store work of the previous
// lifecycle if that is still under way. The service then runs until Stop or Close. Its
// callbacks begin once Start has completed: they find the service RUNNING, and free to stop.
//
// Start fails fast, the same way on every backend: when the store cannot be reached or
// refuses this client, it returns the backend's error, wrapped, and the service is INITIAL
// again (Locker.Acquire, by contrast, retries until its context ends). An error matches a
// context error only when ctx itself ended; a start-up cut off by the call timeout matches
// ErrTimeout. Start also returns ErrAlreadyStarted unless the status is INITIAL, and
// ErrClosed after Close.
func (s *Service) Start(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	_, err := s.begin(ctx, runSpec{delay: s.cfg.initialDelay})
	return err
}

// begin starts a lifecycle as spec says and returns it.
func (s *Service) begin(ctx context.Context, spec runSpec) (*run, error) {
	// The lifecycle's callbacks begin once Start has completed, the lifecycle lock let go
	// included, so that they find the service RUNNING and free to stop (a Stop from inside
	// one), or stopped again if it failed. Deferred first, this runs after the unlock.
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
		if err := claim(s.mutex, s.id); err != nil {
			s.setStatus(StatusInitial)
			return nil, err
		}
	}
	r := &run{
		spec:      spec,
		events:    dispatch.NewHeld(s.recovered),
		attempted: make(chan struct{}),
		hopeless:  make(chan struct{}),
		acquired:  make(chan struct{}),
		halted:    make(chan struct{}),
		finished:  make(chan struct{}),
		appliedCh: make(chan struct{}),
	}
	resume = r.events.Resume
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.rounds.clock = s.cfg.clock
	s.mu.Lock()
	s.run, s.last, s.settled = r, r, r.finished
	s.mu.Unlock()

	c, attempted, err := s.startContend(ctx, r)
	if err != nil {
		s.setStatus(StatusInitial)
		return nil, wrapf(err, "simba: start %q", s.mutex)
	}
	if _, ok := c.(LeaseContention); ok {
		delay := spec.delay
		if attempted.made {
			delay = attempted.next
		}
		r.rounds.begin(func() (time.Duration, bool) { return s.round(r) }, true, delay)
	} else {
		s.mu.Lock()
		s.markAttempted(r)
		s.mu.Unlock()
		if spec.single {
			r.rounds.begin(func() (time.Duration, bool) { return 0, !s.leaveIfOver(r) }, false, 0)
		}
	}
	if s.cfg.starting != nil {
		s.cfg.starting()
	}
	s.setStatus(StatusRunning)
	s.mu.Lock()
	r.started = true
	s.mu.Unlock()
	if s.logs(slog.LevelInfo) {
		s.log.Info("simba: started", "mode", modeName(c))
	}
	return r, nil
}

func modeName(c Contention) string {
	if _, ok := c.(LeaseContention); ok {
		return "lease"
	}
	return "session"
}

// firstAttempt is what startContend says of the attempt it made: whether it made one,
// and the delay until the next.
type firstAttempt struct {
	made bool
	next time.Duration
}

// startContend opens r's contention on the store. The backend's StartContend runs on a
// goroutine of its own, so that ctx is kept whatever the backend does: when ctx ends
// first, r is halted, and the contention, if the backend still opens one, is closed again
// in the background. A Locker waits for its first attempt anyway: for one, the same
// goroutine then makes the first attempt of a lease contention, which saves two goroutine
// hand-offs (with a context that cannot end, the caller's goroutine makes both).
func (s *Service) startContend(ctx context.Context, r *run) (Contention, firstAttempt, error) {
	p := Participant{
		Mutex:       s.mutex,
		ContenderID: s.id,
		TTL:         s.cfg.ttl,
		Transition:  s.cfg.transition,
		Logger:      s.log,
		Wake:        r.rounds.poke,
		WaitsOnly:   r.spec.single,
		Once:        r.spec.once,
		Report:      func(o Owner) { s.report(r, o) },
		Grant:       func(rec Record, sent time.Time) { s.grant(r, rec, sent) },
		Closed: func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.markHopeless(r, ErrClosed)
		},
	}
	type opened struct {
		c       Contention
		err     error
		attempt firstAttempt
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	// open opens the contention and, for a Locker, makes the first attempt of a lease
	// contention, unless the caller has given up meanwhile (r is halted).
	open := func() (o opened) {
		o.c, o.err = s.open(ctx, cctx, p)
		cancel()
		if o.err != nil {
			return o
		}
		s.setContention(r, o.c)
		if _, ok := o.c.(LeaseContention); ok && r.spec.single && r.ctx.Err() == nil {
			o.attempt = firstAttempt{made: true, next: s.attempt(r)}
		}
		return o
	}
	if ctx.Done() == nil {
		// A context that cannot end has no deadline to keep: no goroutine is needed to
		// keep it (the call timeout still bounds a backend that honours contexts).
		o := open()
		if o.err != nil {
			s.halt(r)
			s.finish(r, ctx)
			return nil, firstAttempt{}, callError(o.err, cctx, ctx, s.cfg.callTimeout)
		}
		return o.c, o.attempt, nil
	}
	out := make(chan opened, 1)
	abandon := ctx.Done()
	if mutation.On("blocking-calls") {
		abandon = nil // wait for the store, whatever the caller's deadline
	}
	s.bg.Go(func() { out <- open() })
	select {
	case o := <-out:
		if o.err != nil {
			s.halt(r)
			s.bg.Go(func() { s.finish(r, ctx) })
			return nil, firstAttempt{}, callError(o.err, cctx, ctx, s.cfg.callTimeout)
		}
		return o.c, o.attempt, nil
	case <-abandon:
		cancel()
		s.halt(r)
		s.bg.Go(func() {
			<-out // the contention, if opened, is r's: finish ends it
			s.finish(r, ctx)
		})
		return nil, firstAttempt{}, ctx.Err()
	}
}

// open calls the backend's StartContend with cctx, the call context derived from the
// caller's ctx.
func (s *Service) open(ctx, cctx context.Context, p Participant) (Contention, error) {
	sent := s.cfg.now()
	c, err := s.backend.StartContend(cctx, p)
	if err == nil && isNil(c) {
		c, err = nil, errors.New("backend returned no contention")
	}
	if s.cfg.observer != nil {
		s.observeCall(OpStart, sent, Record{}, callError(err, cctx, ctx, s.cfg.callTimeout))
	}
	return c, err
}

func (s *Service) setContention(r *run, c Contention) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.contention = c
	r.lease, _ = c.(LeaseContention)
}

// Stop stops contending. If this contender believed it owned the mutex, its tenure context
// is cancelled and OnReleased is delivered, and only then is the mutex released on the
// store, so that no successor can overlap. Stop returns once that is done and every
// goroutine of the lifecycle has exited, or when ctx ends, whichever comes first; in the
// second case the release goes on in the background, bounded by the call timeout, and
// the error matches ctx's error. ctx's values are kept for the release.
//
// Called from inside one of the service's own callbacks (or a Scheduler's work), Stop ends
// belief at once and returns without waiting: the callback it was called from has to
// return before OnReleased can be delivered. The release follows in the background.
//
// Stop returns ErrNotRunning unless the status is RUNNING, ErrClosed after Close, and the
// store's error if the release failed; the service has stopped regardless, and the store's
// lease then lapses by itself after ttl + transition.
func (s *Service) Stop(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	return s.stopFrom(ctx, !s.inCallback())
}

// stopFrom is Stop. Without wait it neither waits for the lifecycle lock nor for the stop
// to complete: it is called from inside a callback of this service (which the stop waits
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
	r := s.currentRun()
	s.halt(r)
	if wait && ctx.Done() == nil {
		s.finish(r, ctx) // no deadline to keep: no goroutine is needed to keep it
		return s.finished(r)
	}
	s.bg.Go(func() { s.finish(r, ctx) })
	if !wait {
		return nil
	}
	abandon := ctx.Done()
	if mutation.On("blocking-calls") {
		abandon = nil // wait for the store, whatever the caller's deadline
	}
	select {
	case <-r.finished:
		return s.finished(r)
	case <-abandon:
		select {
		case <-r.finished: // both were ready (ctx had ended before the call)
			return s.finished(r)
		default:
		}
		return fmt.Errorf("simba: stop %q: the release is still under way: %w", s.mutex, ctx.Err())
	}
}

// finished returns Stop's error once r has finished.
func (s *Service) finished(r *run) error {
	if r.finishErr != nil {
		return wrapf(r.finishErr, "simba: stop %q", s.mutex)
	}
	return nil
}

// halt ends lifecycle r at once: from now on its results and reports are dropped, belief
// ends (the tenure context is cancelled and OnReleased queued), the store call in flight
// is cut short and no further round begins. finish does the rest.
func (s *Service) halt(r *run) {
	r.rounds.halt() // first: ending the tenure below must not start a round
	r.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.stopped {
		r.stopped = true
		close(r.halted)
	}
	if r.tenure != nil {
		s.endTenure(r, context.Canceled, Owner{})
	}
	if s.run == r {
		s.run = nil
	}
}

// finish does the store work of a halted lifecycle, on a goroutine that Close waits for:
// it waits for the round under way, delivers the callbacks still queued (so OnReleased has
// returned before the store hears of the release), releases the mutex on the store (which
// also undoes an acquisition whose answer was lost or dropped) and ends the contention.
// Each store call is bounded by the call timeout; values carries the caller's values.
func (s *Service) finish(r *run, values context.Context) {
	defer close(r.finished)
	r.rounds.wait()
	r.events.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(values), s.cfg.callTimeout)
	defer cancel()
	s.mu.Lock()
	c, lease, left, started := r.contention, r.lease, r.contendDone, r.started
	s.mu.Unlock()
	var errs []error
	if lease != nil && s.id != "" {
		if err := s.call(ctx, nil, OpRelease, lease.Release); err != nil {
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	if c != nil && !left {
		if err := s.call(ctx, nil, OpStop, c.StopContend); err != nil {
			errs = append(errs, fmt.Errorf("stop contend: %w", err))
		}
	}
	if s.id != "" {
		unclaim(s.mutex, s.id)
	}
	switch len(errs) {
	case 0:
		if started && s.logs(slog.LevelInfo) { // a start-up that failed was no start
			s.log.Info("simba: stopped")
		}
	case 1:
		r.finishErr = errs[0]
	default:
		r.finishErr = fmt.Errorf("%w; %w", errs[0], errs[1])
	}
	if r.finishErr != nil {
		s.log.Warn("simba: stopped; the store was not told", "err", r.finishErr)
	}
}

// Close stops the service if it is running, makes later Start and Stop calls fail with
// ErrClosed, and waits for every store call of the service that is still under way in the
// background (each bounded by the call timeout). It is idempotent and returns nil when
// there was nothing to stop. Called from inside one of the service's own callbacks, it
// does not wait: the stop completes once the callback has returned.
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
	s.lifecycle <- struct{}{}
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

// Run starts the service, waits until ctx ends and stops it, for use with errgroup and
// similar. It also returns, with nil, when the service is stopped by a Stop or Close
// elsewhere. It returns Start's error, or Stop's; nil after a clean stop. The stop keeps
// ctx's values and is given the call timeout: a release the store has not answered by
// then goes on in the background (the error matches context.DeadlineExceeded), and Close
// waits for it.
func (s *Service) Run(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	r, err := s.begin(ctx, runSpec{delay: s.cfg.initialDelay})
	if err != nil {
		return err
	}
	halted := r.halted
	if mutation.On("run-ignores-stop") {
		halted = nil
	}
	select {
	case <-ctx.Done():
	case <-halted:
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
	if mutation.On("stop-waits-in-callback") {
		return false
	}
	// The last lifecycle, not the current one: a Stop or Close from elsewhere has ended
	// the current one when it delivers OnReleased, and waits for it.
	s.mu.Lock()
	r := s.last
	s.mu.Unlock()
	return r != nil && r.events.Delivering()
}

// lock takes the lifecycle lock, or returns ctx's error when ctx ends first. A free lock
// is taken even when ctx has ended already, so that a call with an ended context does
// what it says (a Stop stops, leaving the release to the background) rather than toss a
// coin between the two.
func (s *Service) lock(ctx context.Context) error {
	if s.tryLock() {
		return nil
	}
	select {
	case s.lifecycle <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryLock takes the lifecycle lock if it is free.
func (s *Service) tryLock() bool {
	select {
	case s.lifecycle <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Service) unlock() { <-s.lifecycle }
