package simba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/dispatch"
	"github.com/simba-go/simba/internal/mutation"
)

// Service runs one Contender (or Retriever) for one mutex through a Backend. It owns the
// lifecycle (Start, Stop, Close, Run), the contend loop of lease stores, the local TTL end
// that bounds ownership belief, and the ordered delivery of callbacks.
//
// Status moves INITIAL -> STARTING -> RUNNING -> STOPPING -> INITIAL. Start is an error
// unless the status is INITIAL, Stop unless it is RUNNING; a failed Start returns to
// INITIAL; a stopped service can be started again. Close stops a running service and makes
// every later Start or Stop fail with ErrClosed.
//
// A Service is safe for concurrent use; lifecycle calls are serialised. It must not be
// copied.
type Service struct {
	backend   Backend
	contender Contender // nil for a retriever
	retriever Retriever // nil for a contender
	mutex     string
	id        string // contender ID; empty for a retriever
	cfg       config
	period    contendPeriod
	log       *slog.Logger
	oneTenure bool // stop contending, and release, once the first tenure ends (Locker)

	lifecycle sync.Mutex // serialises Start, Stop and Close
	closed    bool       // guarded by lifecycle
	status    atomic.Int32

	mu        sync.Mutex // guards the fields below and the ownership fields of run
	run       *run       // the current lifecycle; nil while not started
	gen       uint64     // lifecycle generation, stamped on every run
	lastState State      // the last change of owner seen
}

// run is one lifecycle of a service, from Start to Stop.
type run struct {
	gen        uint64
	ctx        context.Context // ends when Stop begins
	cancel     context.CancelFunc
	rounds     rounds // the store calls of a lease contention; leaving a session contention
	events     *dispatch.Queue
	contention Contention
	lease      LeaseContention // nil for a session contention
	failures   int             // consecutive failed attempts; used by one round at a time
	attempted  chan struct{}   // closed once the first attempt has been applied
	acquired   chan struct{}   // closed when the first tenure begins

	// guarded by Service.mu
	stopped       bool    // Stop has begun: results and reports are dropped
	owner         Owner   // the owner as this service believes it now
	tenure        *tenure // set while this contender believes it owns the mutex
	first         *tenure // the run's first tenure
	finished      bool    // oneTenure: the first tenure has ended
	contendDone   bool    // StopContend was called already (a finished session contention)
	attemptedDone bool
	lastErr       error     // the error of the last attempt, nil after a successful one
	answeredSent  time.Time // the send time of the latest answer or grant applied
	grantedSent   time.Time // the send time of the latest grant applied
}

// tenure is one continuous period of believed ownership.
type tenure struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	owner  Owner
	end    time.Time   // local end of belief; zero: none (a session store without TTL)
	timer  *time.Timer // ends belief at end
}

// NewService returns a service that contends for c.Mutex() as c.ContenderID() through b.
// The mutex name and contender ID are validated here, before any I/O, by
// ValidateMutex, ValidateContenderID and the backend's Validator, if it has one.
// WithContenderID is not accepted: the Contender names its ID.
func NewService(b Backend, c Contender, opts ...Option) (*Service, error) {
	cfg, err := checkedConfig(b, opts, forService)
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
	return newService(b, c, nil, mutex, id, cfg), nil
}

// NewRetrievalService returns a service that observes who owns r.Mutex() through b without
// contending, and reports every change of owner to r. WithContenderID is not accepted.
func NewRetrievalService(b Backend, r Retriever, opts ...Option) (*Service, error) {
	cfg, err := checkedConfig(b, opts, forRetrievalService)
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
	return newService(b, nil, r, mutex, "", cfg), nil
}

func newService(b Backend, c Contender, r Retriever, mutex, id string, cfg config) *Service {
	log := cfg.logger.With("mutex", mutex)
	if id != "" {
		log = log.With("contender", id)
	}
	return &Service{
		backend:   b,
		contender: c,
		retriever: r,
		mutex:     mutex,
		id:        id,
		cfg:       cfg,
		period: contendPeriod{
			ttl: cfg.ttl, transition: cfg.transition, lead: cfg.renewalLead, jitter: cfg.jitter,
		},
		log: log,
	}
}

// constructor names the constructor that options are checked for.
type constructor string

const (
	forService          constructor = "NewService"
	forRetrievalService constructor = "NewRetrievalService"
	forLocker           constructor = "NewLocker"
	forScheduler        constructor = "NewScheduler"
	forMutexes          constructor = "NewMutexes"
)

// checkedConfig checks what every constructor shares: a backend, options that are valid
// together, and no option that this constructor does not take.
func checkedConfig(b Backend, opts []Option, ctor constructor) (config, error) {
	if isNil(b) {
		return config{}, invalid("backend", nil, "must not be nil")
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	switch {
	case cfg.contenderIDSet && (ctor == forService || ctor == forRetrievalService):
		return config{}, invalid("contender ID option", cfg.contenderID, "not accepted by "+string(ctor)+": the Contender names its ID, a retriever has none")
	case cfg.initialDelaySet && (ctor == forLocker || ctor == forMutexes):
		return config{}, invalid("initial delay", cfg.initialDelay, "not accepted by "+string(ctor)+": Acquire contends at once")
	case cfg.localHandOversSet && ctor != forMutexes:
		return config{}, invalid("local hand-overs", cfg.localHandOvers, "not accepted by "+string(ctor)+": only Mutexes hands over locally")
	}
	return cfg, nil
}

// ownID returns the contender ID of a Locker or Scheduler: WithContenderID's, or a new
// HostContenderID.
func (c *config) ownID() string {
	if c.contenderIDSet {
		return c.contenderID
	}
	return HostContenderID()
}

// validateNames applies the common rules and the backend's own to the mutex name and, for
// a contender, to its ID (a retriever has none).
func validateNames(b Backend, mutex, id string, contender bool) error {
	if err := ValidateMutex(mutex); err != nil {
		return err
	}
	if contender {
		if err := ValidateContenderID(id); err != nil {
			return err
		}
	}
	v, ok := b.(Validator)
	if !ok {
		return nil
	}
	if err := v.ValidateMutex(mutex); err != nil {
		return err
	}
	if contender {
		return v.ValidateContenderID(id)
	}
	return nil
}

// isNil reports whether v is nil or a nil pointer, map, func, channel or slice in an
// interface, so that a typed nil is rejected instead of panicking later.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Mutex returns the name of the mutex the service contends for or observes.
func (s *Service) Mutex() string { return s.mutex }

// ContenderID returns the contender's ID, or "" for a retrieval service.
func (s *Service) ContenderID() string { return s.id }

// Status returns the lifecycle status.
func (s *Service) Status() Status { return Status(s.status.Load()) }

// Owner returns the owner as the service believes it now: the record of the last answer,
// with this contender's own record dropped once its local TTL end has passed. It is the
// zero Owner while the service is not running.
func (s *Service) Owner() Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return Owner{}
	}
	return s.run.owner
}

// State returns the last change of owner the service saw; it is kept after Stop.
func (s *Service) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastState
}

// IsOwner reports whether this contender believes it owns the mutex now: it acquired or
// renewed it, no answer since named anyone else, and its local TTL end has not passed.
func (s *Service) IsOwner() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run != nil && s.run.tenure != nil && s.run.tenure.believes(s.cfg.now())
}

func (t *tenure) believes(now time.Time) bool { return t.end.IsZero() || now.Before(t.end) }

// currentRun returns the running lifecycle, or nil.
func (s *Service) currentRun() *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// othersWaiting asks the store whether other contenders wait for the mutex. known is false
// when the store cannot tell or did not answer.
func (s *Service) othersWaiting(ctx context.Context) (waiting, known bool) {
	r := s.currentRun()
	if r == nil {
		return false, false
	}
	wl, ok := r.contention.(WaitList)
	if !ok {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	defer cancel()
	waiting, err := wl.OthersWaiting(ctx)
	if err != nil {
		s.log.Warn("simba: asking the store for waiters failed", "err", err)
		return false, false
	}
	return waiting, true
}

// currentTenure returns the tenure this contender believes in now, or nil.
func (s *Service) currentTenure() *localTenure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.tenure == nil || !s.run.tenure.believes(s.cfg.now()) {
		return nil
	}
	return &localTenure{ctx: s.run.tenure.ctx, owner: s.run.tenure.owner}
}

// Start begins contending (or observing). ctx bounds only the start-up I/O, together with
// the call timeout; the service then runs until Stop or Close. Start returns
// ErrAlreadyStarted unless the status is INITIAL, ErrClosed after Close, and the backend's
// error, wrapped, if the store could not be reached; the service is then INITIAL again.
func (s *Service) Start(ctx context.Context) error {
	return s.startAfter(ctx, s.cfg.initialDelay)
}

// startAfter is Start with the given delay before the first attempt of a lease store.
func (s *Service) startAfter(ctx context.Context, initialDelay time.Duration) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.closed {
		return ErrClosed
	}
	if st := s.Status(); st != StatusInitial {
		return fmt.Errorf("%w: status %s", ErrAlreadyStarted, st)
	}
	return s.start(ctx, initialDelay)
}

func (s *Service) start(ctx context.Context, initialDelay time.Duration) error {
	s.setStatus(StatusStarting)
	if s.id != "" {
		if err := claim(s.mutex, s.id); err != nil {
			s.setStatus(StatusInitial)
			return err
		}
	}
	s.mu.Lock()
	s.gen++
	r := &run{
		gen:       s.gen,
		events:    dispatch.New(s.recovered),
		attempted: make(chan struct{}),
		acquired:  make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	s.run = r
	s.mu.Unlock()

	p := Participant{
		Mutex:       s.mutex,
		ContenderID: s.id,
		TTL:         s.cfg.ttl,
		Transition:  s.cfg.transition,
		Logger:      s.log,
		Wake:        r.rounds.poke,
		WaitsOnly:   s.oneTenure,
		Report:      func(o Owner) { s.report(r, o) },
		Grant:       func(rec Record, sent time.Time) { s.grant(r, rec, sent) },
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	c, err := s.backend.StartContend(sctx, p)
	cancel()
	if err == nil && isNil(c) {
		err = errors.New("backend returned no contention")
	}
	if err != nil {
		s.abandon(r)
		s.setStatus(StatusInitial)
		return fmt.Errorf("simba: start %q: %w", s.mutex, err)
	}
	r.contention = c
	if lc, ok := c.(LeaseContention); ok {
		r.lease = lc
		delay := initialDelay
		if s.oneTenure {
			// A Locker waits for the first attempt anyway: it is made here, on the
			// caller's goroutine and under its ctx, which saves two goroutine hand-offs.
			delay = s.attempt(r, ctx)
		}
		r.rounds.begin(func() (time.Duration, bool) { return s.round(r) }, true, delay)
	} else {
		s.mu.Lock()
		s.markAttempted(r)
		s.mu.Unlock()
		if s.oneTenure {
			r.rounds.begin(func() (time.Duration, bool) { return 0, !s.leaveIfFinished(r) }, false, 0)
		}
	}
	s.setStatus(StatusRunning)
	s.log.Info("simba: started", "mode", modeName(r))
	return nil
}

func modeName(r *run) string {
	if r.lease != nil {
		return "lease"
	}
	return "session"
}

// abandon undoes a start whose StartContend failed. A session backend may have reported an
// owner before it failed; the tenure ends and its notification is delivered.
func (s *Service) abandon(r *run) {
	r.rounds.halt(r.cancel)
	s.mu.Lock()
	r.stopped = true
	if r.tenure != nil {
		s.endTenure(r, context.Canceled, Owner{})
	}
	s.run = nil
	s.mu.Unlock()
	r.events.Close()
	if s.id != "" {
		unclaim(s.mutex, s.id)
	}
}

// Stop stops contending. If this contender believed it owned the mutex, its tenure context
// is cancelled and OnReleased is delivered, and only then is the mutex released on the
// store, so that no successor can overlap. Stop returns after every callback has returned
// and every goroutine of the service has exited. ctx values are kept but its cancellation
// is not: the release runs under the call timeout even when ctx has ended.
//
// Stop returns ErrNotRunning unless the status is RUNNING, ErrClosed after Close, and the
// store's error if the release failed; the service has stopped regardless, and the store's
// lease then lapses by itself after ttl + transition.
func (s *Service) Stop(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.stop(ctx)
}

func (s *Service) stop(ctx context.Context) error {
	if st := s.Status(); st != StatusRunning {
		return fmt.Errorf("%w: status %s", ErrNotRunning, st)
	}
	s.setStatus(StatusStopping)
	s.mu.Lock()
	r := s.run
	s.mu.Unlock()

	r.rounds.halt(r.cancel) // the round under way, if any, has returned
	s.mu.Lock()
	r.stopped = true
	if r.tenure != nil {
		s.endTenure(r, context.Canceled, Owner{})
	}
	s.mu.Unlock()
	r.events.Close() // OnReleased has returned before the store hears of the release

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.callTimeout)
	defer cancel()
	var errs []error
	if r.lease != nil && s.id != "" {
		if err := r.lease.Release(cctx); err != nil {
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	s.mu.Lock()
	contendDone := r.contendDone
	s.mu.Unlock()
	if !contendDone {
		if err := r.contention.StopContend(cctx); err != nil {
			errs = append(errs, fmt.Errorf("stop contend: %w", err))
		}
	}
	s.mu.Lock()
	s.run = nil
	s.mu.Unlock()
	if s.id != "" {
		unclaim(s.mutex, s.id)
	}
	s.setStatus(StatusInitial)
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("simba: stopped; the store was not told", "err", err)
		return fmt.Errorf("simba: stop %q: %w", s.mutex, err)
	}
	s.log.Info("simba: stopped")
	return nil
}

// Close stops the service if it is running and makes later Start and Stop calls fail with
// ErrClosed. It is idempotent and returns nil when there was nothing to stop.
func (s *Service) Close() error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.Status() == StatusRunning {
		return s.stop(context.Background())
	}
	return nil
}

// Run starts the service, waits until ctx ends and stops it, for use with errgroup and
// similar. It returns Start's error, or Stop's; nil after a clean stop.
func (s *Service) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return s.Stop(context.WithoutCancel(ctx))
}

func (s *Service) setStatus(st Status) { s.status.Store(int32(st)) }

// round is one round of a lease contention: an attempt, or, once a oneTenure service's
// tenure has ended, the release after which there are no more rounds.
func (s *Service) round(r *run) (time.Duration, bool) {
	if s.isFinished(r) {
		s.releaseAfterTenure(r)
		return 0, false
	}
	return s.attempt(r, nil), true
}

// attempt makes one acquire (or, for a retriever, lookup) call and applies its answer. It
// returns the delay until the next attempt. A non-nil caller also bounds the call; when it
// ends first, nothing is applied (the caller stops the service, which releases).
func (s *Service) attempt(r *run, caller context.Context) time.Duration {
	sent := s.cfg.now()
	ctx, cancel := context.WithDeadline(r.ctx, s.callDeadline(r, sent))
	if caller != nil {
		defer context.AfterFunc(caller, cancel)()
	}
	var (
		rec Record
		err error
	)
	if s.id == "" {
		rec, err = r.lease.Lookup(ctx)
	} else {
		rec, err = r.lease.Acquire(ctx)
	}
	cancel()
	if r.ctx.Err() != nil || (caller != nil && caller.Err() != nil) {
		return 0 // stopping: the result belongs to an ended lifecycle; Stop releases
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.stopped {
		return 0
	}
	defer s.markAttempted(r)
	r.lastErr = err
	if err != nil {
		r.failures++
		owner := r.tenure != nil
		d := s.period.retry(r.failures, owner)
		s.log.Warn("simba: store call failed; retrying", "err", err, "owner", owner, "retry_in", d)
		return d
	}
	r.failures = 0
	return s.answer(r, rec, sent)
}

// answer applies the record a store call sent at sent returned, or a grant of the same
// shape, and returns the delay until the next attempt. Called with s.mu held.
func (s *Service) answer(r *run, rec Record, sent time.Time) time.Duration {
	if r.tenure != nil && rec.Owner != s.id && !sent.After(r.grantedSent) {
		// The call was sent before the waiting that a grant answered ended: its answer
		// predates the hand-over and must not end the tenure the grant began.
		return s.period.next(s.id, r.owner, s.cfg.now())
	}
	if sent.After(r.answeredSent) {
		r.answeredSent = sent
	}
	var end time.Time
	if s.id != "" && rec.Owner == s.id {
		rec.TTL = min(rec.TTL, s.cfg.ttl) // never believe longer than this contender asked for
		from := sent
		if mutation.On("reply-time-lease") {
			from = s.cfg.now()
		}
		if !mutation.On("no-local-deadline") {
			end = from.Add(rec.TTL - s.cfg.driftMargin())
		}
	}
	o := rec.At(sent)
	s.apply(r, o, end)
	d := s.period.next(s.id, o, s.cfg.now())
	s.log.Debug("simba: contended", "owner", o.ID, "token", o.Token, "next_in", d)
	return d
}

// grant applies a hand-over the store made to this contender while it waited
// (Participant.Grant): as the answer to the call sent at sent, unless an answer to a later
// call has been applied already. The next attempt is then due as after that answer.
func (s *Service) grant(r *run, rec Record, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != r || r.stopped || s.id == "" || rec.Owner != s.id || sent.Before(r.answeredSent) {
		return
	}
	if sent.After(r.grantedSent) {
		r.grantedSent = sent
	}
	r.lastErr = nil
	d := s.answer(r, rec, sent)
	s.markAttempted(r)
	r.rounds.reschedule(d)
	s.log.Debug("simba: granted", "token", rec.Token)
}

// callDeadline bounds a store call by the call timeout and, while this contender believes
// it owns the mutex, by its local TTL end.
func (s *Service) callDeadline(r *run, now time.Time) time.Time {
	d := now.Add(s.cfg.callTimeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := r.tenure; t != nil && !t.end.IsZero() && t.end.Before(d) {
		d = t.end
	}
	return d
}

// report receives an owner from a session backend.
func (s *Service) report(r *run, o Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != r || r.stopped {
		return // a report of an ended lifecycle
	}
	var end time.Time
	if o.OwnedBy(s.id) {
		end = o.TTLAt
	}
	s.apply(r, o, end)
	s.markAttempted(r)
}

// apply records the owner an answer or report named. end is the local end of belief when o
// names this contender (zero: none). Called with s.mu held.
func (s *Service) apply(r *run, o Owner, end time.Time) {
	now := s.cfg.now()
	if o.OwnedBy(s.id) {
		if !r.finished && (end.IsZero() || now.Before(end)) {
			if t := r.tenure; t != nil {
				s.renew(r, t, o, end, now)
				r.owner = o
				return
			}
			s.beginTenure(r, o, end, now)
			return
		}
		// The store names this contender, but belief cannot begin: the answer came
		// after the local TTL end it implies. Until a timely answer, the owner is unknown.
		o = Owner{}
	}
	if r.tenure != nil {
		s.endTenure(r, ErrOwnershipLost, o)
		return
	}
	if o.ID != r.owner.ID {
		st := State{Before: r.owner, After: o}
		s.lastState = st
		if s.retriever != nil {
			r.events.Push(func() { s.retriever.NotifyOwner(st) })
		}
		s.log.Debug("simba: owner changed", "owner", o.ID, "token", o.Token)
	}
	r.owner = o
}

func (s *Service) beginTenure(r *run, o Owner, end, now time.Time) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &tenure{ctx: ctx, cancel: cancel, owner: o, end: end}
	if !end.IsZero() {
		t.timer = time.AfterFunc(end.Sub(now), func() { s.expire(r, t) })
	}
	st := State{Before: r.owner, After: o}
	r.tenure = t
	r.owner = o
	s.lastState = st
	if r.first == nil {
		r.first = t
		close(r.acquired)
	}
	s.log.Info("simba: acquired", "token", o.Token)
	if s.contender != nil {
		r.events.Push(func() { s.contender.OnAcquired(ctx, st) })
	}
}

func (s *Service) renew(r *run, t *tenure, o Owner, end, now time.Time) {
	t.owner = o
	t.end = end
	switch {
	case end.IsZero() && t.timer != nil:
		t.timer.Stop()
	case end.IsZero():
	case t.timer != nil:
		t.timer.Reset(end.Sub(now))
	default:
		t.timer = time.AfterFunc(end.Sub(now), func() { s.expire(r, t) })
	}
	s.log.Debug("simba: renewed", "token", o.Token)
}

// endTenure ends this contender's belief: the tenure context is cancelled with cause at
// once, and OnReleased is queued. after is the owner now believed. Called with s.mu held.
func (s *Service) endTenure(r *run, cause error, after Owner) {
	t := r.tenure
	r.tenure = nil
	if t.timer != nil {
		t.timer.Stop()
	}
	t.cancel(cause)
	st := State{Before: t.owner, After: after}
	r.owner = after
	s.lastState = st
	if s.oneTenure {
		r.finished = true
		r.rounds.poke()
	}
	s.log.Info("simba: released", "token", t.owner.Token, "cause", cause, "owner", after.ID)
	if s.contender != nil {
		r.events.Push(func() { s.contender.OnReleased(st) })
	}
}

// expire ends belief at the local TTL end of t unless a renewal has moved it. It runs on
// the tenure's timer, independently of any store call in flight.
func (s *Service) expire(r *run, t *tenure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.tenure != t || r.stopped || t.believes(s.cfg.now()) {
		return
	}
	s.endTenure(r, ErrOwnershipLost, Owner{})
	r.rounds.poke() // the renewal may still succeed: contend now
}

func (s *Service) isFinished(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.finished
}

// leaveIfFinished gives up a session contention once a oneTenure service's tenure has
// ended (lost, while its session survived): its node would otherwise stay first in line
// until the lease is released. It reports whether it did.
func (s *Service) leaveIfFinished(r *run) bool {
	if !s.isFinished(r) {
		return false
	}
	ctx, cancel := context.WithTimeout(r.ctx, s.cfg.callTimeout)
	err := r.contention.StopContend(ctx)
	cancel()
	s.mu.Lock()
	r.contendDone = true
	s.mu.Unlock()
	if err != nil && r.ctx.Err() == nil {
		s.log.Warn("simba: leaving after a lost tenure failed", "err", err)
	}
	return true
}

// releaseAfterTenure gives the mutex back once a oneTenure service's tenure has ended, so
// that others need not wait for the lease to lapse.
func (s *Service) releaseAfterTenure(r *run) {
	ctx, cancel := context.WithTimeout(r.ctx, s.cfg.callTimeout)
	defer cancel()
	if err := r.lease.Release(ctx); err != nil && r.ctx.Err() == nil {
		s.log.Warn("simba: release after lost tenure failed", "err", err)
	}
}

func (s *Service) markAttempted(r *run) {
	if !r.attemptedDone {
		r.attemptedDone = true
		close(r.attempted)
	}
}

// recovered logs a panic of a user callback; contention goes on.
func (s *Service) recovered(v any) {
	s.log.Error("simba: callback panicked", "panic", v)
}

// claims holds the (mutex, contender ID) pairs of the running services of this process.
var claims = struct {
	sync.Mutex
	m map[string]struct{}
}{m: map[string]struct{}{}}

func claim(mutex, id string) error {
	key := mutex + "\x00" + id
	claims.Lock()
	defer claims.Unlock()
	if _, ok := claims.m[key]; ok {
		return invalid("contender ID", id, fmt.Sprintf("already contends for mutex %q in this process", mutex))
	}
	claims.m[key] = struct{}{}
	return nil
}

func unclaim(mutex, id string) {
	claims.Lock()
	defer claims.Unlock()
	delete(claims.m, mutex+"\x00"+id)
}
