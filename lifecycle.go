package simba

import (
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/dispatch"
)

// This file is the engine: one lifecycle of a contender (or retriever), from the store's
// start-up to its release, top-down:
//
//	open         StartContend: subscriptions, schema checks, session nodes
//	round        an attempt on the contend period (a lease store), or a report (a session store)
//	  attempt    Acquire (a retriever: Lookup), bounded by the call timeout and the local TTL end
//	  answer     the owner the store named: apply it
//	  apply      begin a tenure, renew it, or end it; tell a retriever of a new owner
//	  expire     the local TTL end passed without a renewal: belief ends
//	yield        step down: belief ends, the mutex goes back to the store (or, a hand-off, to a
//	             waiting contender), contention goes on
//	halt         Stop: belief ends at once, answers are dropped from now on
//	finish       the callbacks are delivered, then Release and StopContend
//
// A front-end (Service, Locker, Scheduler, Mutexes) creates one lifecycle per Start or
// acquisition, opens it, and learns what it needs through the methods in the last section
// of this file and through its hooks, which the lifecycle queues on its dispatcher, in
// order, one at a time. Front-ends never touch its fields.
//
// Locks: a lifecycle's mu guards its state. Lock order, where several are held: Mutexes.mu,
// then Service.mu, then lifecycle.mu, then the dispatcher's and the rounds' own locks. No
// lock is held while the store or a user's code runs (an observe.Observer aside, which must not
// block).

// phase is where a lifecycle is; enter is the one place it changes.
type phase uint8

const (
	phaseOpening phase = iota // the store's start-up (StartContend) is under way
	phaseRunning              // attempts (lease) or reports (session) are applied
	phaseOver                 // a single lifecycle's tenure ended: no other begins; it gives the mutex back
	phaseHalted               // Stop began: answers and reports are dropped
)

// runSpec says how one lifecycle contends: what Start asks for, or a Locker's acquisition.
type runSpec struct {
	// delay is the time before the first attempt of a lease store.
	delay time.Duration
	// single makes the lifecycle serve one tenure, as a Locker's acquisition does: it
	// waits only for its own turn (backend.Participant.WaitsOnly), begins no tenure once its first
	// has ended, and then gives the mutex back (a lease store) or leaves the queue (a
	// session store) at once.
	single bool
	// once, with single, makes one attempt only (TryAcquire; backend.Participant.Once).
	once bool
	// hopeless, if set, is called once when the lifecycle finds that no attempt can
	// succeed (the backend is closed, or refuses), with why, and with mu held: it must not
	// block.
	hopeless func(error)
}

// hooks are what a front-end is told, on the lifecycle's dispatcher, in order.
type hooks struct {
	acquired func(t *tenure, st State) // a tenure began
	released func(st State)            // the tenure ended
	changed  func(st State)            // the owner changed (a retriever)
}

// lifecycle is one Start to Stop of a service (or one acquisition of a Locker).
type lifecycle struct {
	svc    *Service // identity, configuration, logger and background WaitGroup: read-only
	spec   runSpec
	hooks  hooks
	ctx    context.Context // ends at halt: cuts a store call in flight short
	cancel context.CancelFunc
	rounds rounds // the attempts of a lease contention; leaving a session contention
	events *dispatch.Queue
	work   sync.WaitGroup // a session contention's yield, which finish waits for

	// Closed once each, when what they name has happened. decided: a Locker's acquisition
	// can end (the first tenure began; for a single attempt, the first attempt or report
	// was applied; or no attempt can succeed).
	decided   signal
	halted    signal // Stop began (or the start-up failed)
	finished  chan struct{}
	finishErr error // what the store said when finishing; read after finished

	mu           sync.Mutex
	phase        phase
	started      bool // Start completed: the lifecycle ran (for the log)
	contention   backend.Contention
	lease        backend.LeaseContention // nil for a session contention
	left         bool                    // a single session contention was left (StopContend called)
	owner        Owner                   // the owner as this lifecycle believes it now
	state        State                   // the last change of owner seen
	tenure       *tenure                 // set while this contender believes it owns the mutex
	first        *tenure                 // the first tenure
	failures     int                     // attempts failed in a row
	lastErr      error                   // the error of the last attempt, nil after a successful one
	begun        uint64                  // attempts begun
	applied      uint64                  // attempts whose outcome (answer or failure) was applied
	appliedCh    chan struct{}           // made by a waiter (attemptNow); closed and dropped when an attempt is applied
	granting     bool                    // a grant is being applied (for the observe.Observer)
	answeredSent time.Time               // the send time of the latest answer or grant applied
	grantedSent  time.Time               // the send time of the latest grant applied
	renewBy      time.Time               // while leading: when the next attempt must have been applied
	yielding     *yielding               // a step-down under way: no tenure begins until it is done
	gaveUp       bool                    // no attempt can succeed (giveUp)
}

// yielding is a step-down under way (Service.Yield, Service.HandOff).
type yielding struct {
	to   string        // the waiting contender the mutex is handed to; empty: back to the store
	done chan struct{} // closed once the mutex is back on the store, or handed off
	err  error         // the store's error; read after done
}

// signal is a channel closed once; fire is idempotent. Guarded by its lifecycle's mu.
type signal struct {
	ch    chan struct{}
	fired bool
}

func newSignal() signal { return signal{ch: make(chan struct{})} }

func (s *signal) fire() {
	if !s.fired {
		s.fired = true
		close(s.ch)
	}
}

func newLifecycle(svc *Service, spec runSpec, h hooks) *lifecycle {
	l := &lifecycle{
		svc: svc, spec: spec, hooks: h,
		events:  dispatch.NewHeld(svc.onPanic),
		decided: newSignal(), halted: newSignal(),
		finished: make(chan struct{}),
		state:    svc.State(), // a new lifecycle starts from what the last one saw
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.rounds.clock, l.rounds.spare = svc.cfg.clock, &svc.roundsTimer
	return l
}

// enter moves the lifecycle to phase p. Called with mu held.
func (l *lifecycle) enter(p phase) {
	switch {
	case l.phase == phaseHalted || l.phase == p:
		return // halted is final
	case p == phaseHalted:
		l.halted.fire()
	case p == phaseOver:
		l.rounds.poke() // the next round gives the mutex back
	}
	l.phase = p
}

// ---- open -------------------------------------------------------------------------------

// firstAttempt is what open says of the attempt it made: whether it made one, and the
// delay until the next.
type firstAttempt struct {
	made bool
	next time.Duration
}

// open opens the contention on the store. The backend's StartContend runs on a goroutine
// of its own, so that ctx is kept whatever the backend does: when ctx ends first, the
// lifecycle is halted, and the contention, if the backend still opens one, is closed again
// in the background. A Locker waits for its first attempt anyway: for one, the same
// goroutine then makes the first attempt of a lease contention, which saves two goroutine
// hand-offs. The caller's goroutine makes both when ctx cannot end, or when the backend
// keeps its calls' deadlines (Service.inline): the call timeout, derived from ctx, keeps ctx's.
func (l *lifecycle) open(ctx context.Context) (firstAttempt, error) {
	svc := l.svc
	cctx, cancel := context.WithTimeout(ctx, svc.cfg.callTimeout)
	failed := func(err error, background bool) error {
		l.halt()
		if background {
			svc.bg.Go(func() { l.finish(ctx) })
		} else {
			l.finish(ctx)
		}
		return callError(err, cctx, ctx, svc.cfg.callTimeout)
	}
	// gaveUp halts the lifecycle the caller gave up on; what the store did meanwhile is
	// not known: finish undoes it in the background, and Close waits for that.
	gaveUp := func(opening <-chan opened) error {
		cancel()
		l.halt()
		svc.bg.Go(func() {
			if opening != nil {
				<-opening // the contention, if opened, is the lifecycle's: finish ends it
			}
			l.finish(ctx)
		})
		return ctx.Err()
	}
	if ctx.Done() == nil || svc.inline {
		// No goroutine is needed to keep ctx: it cannot end, or the call timeout, derived
		// from it, bounds each call of a backend that keeps deadlines.
		o := l.try(ctx, cctx, cancel, ctx)
		switch {
		case ctx.Err() != nil:
			return firstAttempt{}, gaveUp(nil)
		case o.err != nil:
			return firstAttempt{}, failed(o.err, false)
		}
		return o.attempt, nil
	}
	out := make(chan opened, 1)
	svc.bg.Go(func() { out <- l.try(ctx, cctx, cancel, nil) })
	select {
	case o := <-out:
		if o.err != nil {
			return firstAttempt{}, failed(o.err, true)
		}
		return o.attempt, nil
	case <-ctx.Done():
		return firstAttempt{}, gaveUp(out)
	}
}

// opened is what try says: the store's error, and the first attempt made.
type opened struct {
	err     error
	attempt firstAttempt
}

// try opens the contention (bounded by cctx, which cancel ends) and, for a Locker, makes
// the first attempt of a lease contention, unless the caller has given up meanwhile (the
// lifecycle is halted). caller is ctx when the caller's goroutine runs it, else nil (see
// attempt). A method, not a closure of open's: the caller's goroutine allocates nothing
// for it.
func (l *lifecycle) try(ctx, cctx context.Context, cancel context.CancelFunc, caller context.Context) (o opened) {
	o.err = l.startContend(ctx, cctx)
	cancel()
	if o.err == nil && l.spec.single && l.leaseStore() && l.ctx.Err() == nil {
		o.attempt = firstAttempt{made: true, next: l.attempt(caller)}
	}
	return o
}

// startContend calls the backend's StartContend with cctx, the call context derived from
// the caller's ctx, and keeps the contention it opens.
func (l *lifecycle) startContend(ctx, cctx context.Context) error {
	svc := l.svc
	p := backend.Participant{
		Mutex:       svc.mutex,
		ContenderID: svc.id,
		Value:       svc.cfg.ownerValue,
		TTL:         svc.cfg.ttl,
		Transition:  svc.cfg.transition,
		Logger:      svc.log,
		Wake:        l.rounds.poke,
		WaitsOnly:   l.spec.single,
		Once:        l.spec.once,
		Report:      l.report,
		Grant:       l.grant,
		Hold:        svc.hold,
		Closed:      func() { l.giveUp(ErrClosed) },
	}
	sent := svc.cfg.now()
	c, err := svc.backend.StartContend(cctx, p)
	if err == nil && isNil(c) {
		c, err = nil, errors.New("backend returned no contention")
	}
	if svc.cfg.observer != nil {
		svc.observeCall(observe.OpStart, sent, backend.Record{}, callError(err, cctx, ctx, svc.cfg.callTimeout))
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.contention = c
	l.lease, _ = c.(backend.LeaseContention)
	return nil
}

// run begins the rounds of an opened lifecycle, or takes a session store's reports from
// now on, and lets the callbacks be delivered once resume is called.
func (l *lifecycle) run(first firstAttempt) {
	l.mu.Lock()
	l.enter(phaseRunning)
	session := l.lease == nil
	if session {
		l.attemptApplied()
	}
	l.mu.Unlock()
	switch {
	case !session:
		delay := l.spec.delay
		if first.made {
			delay = first.next
		}
		l.rounds.begin(l.round, true, delay)
	case l.spec.single:
		l.rounds.begin(func() (time.Duration, bool) { return 0, !l.leaveIfOver() }, false, 0)
	case l.svc.cfg.prefer != nil && !l.svc.prefers(l.svc.cfg.ownerValue):
		// A session store has no renewals: its leader looks for a preferred waiter as
		// often as a lease store's leader renews.
		every := l.svc.cfg.ttl - l.svc.cfg.renewalLead
		l.rounds.begin(func() (time.Duration, bool) { l.handOffIfPreferred(); return every, true }, true, every)
	}
}

// ---- rounds: attempt and answer ------------------------------------------------------------

// round is one round of a lease contention: an attempt, or, once a single lifecycle's
// tenure has ended, the release after which there are no more rounds.
func (l *lifecycle) round() (time.Duration, bool) {
	l.mu.Lock()
	over, y := l.phase == phaseOver, l.yielding
	l.mu.Unlock()
	switch {
	case over:
		l.releaseAfterTenure()
		return 0, false
	case y != nil:
		return l.giveBack(y), true
	}
	d := l.attempt(nil)
	if l.handOffIfPreferred() {
		return 0, true // the next round hands off
	}
	return d, true
}

// attempt makes one acquire (or, for a retriever, lookup) call and applies its answer. It
// returns the delay until the next attempt. caller, if not nil, is the context of the
// caller whose goroutine makes the call (open's): the call is bounded by it, not by the
// lifecycle's (nothing halts a lifecycle that is opening), and an answer that comes after
// it ended is dropped, as after a halt.
func (l *lifecycle) attempt(caller context.Context) time.Duration {
	svc := l.svc
	sent := svc.cfg.now()
	l.mu.Lock()
	l.begun++
	timeout := l.callTimeout(sent)
	lease := l.lease
	renewing := l.tenure != nil
	l.mu.Unlock()
	parent := l.ctx
	if caller != nil {
		parent = caller
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	var (
		rec backend.Record
		err error
	)
	if svc.id == "" {
		rec, err = lease.Lookup(ctx)
	} else {
		rec, err = lease.Acquire(ctx)
	}
	err = callError(err, ctx, parent, timeout)
	cancel()
	if svc.cfg.observer != nil {
		svc.observeCall(attemptOp(svc.id, renewing), sent, rec, err)
	}
	if l.ctx.Err() != nil || parent.Err() != nil {
		return 0 // stopping: the result belongs to an ended lifecycle; Stop releases
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.phase == phaseHalted {
		return 0
	}
	defer l.markApplied()
	l.setLastErr(err)
	if err != nil {
		return l.failed(err)
	}
	l.failures = 0
	return l.answer(rec, sent)
}

// failed applies an attempt's error and returns the delay until the retry. Called with
// mu held.
func (l *lifecycle) failed(err error) time.Duration {
	svc := l.svc
	l.failures++
	owner := l.tenure != nil
	d := svc.period.retry(l.failures, owner)
	switch {
	case errors.Is(err, ErrClosed):
		l.giveUpLocked(err)
	case errors.Is(err, ErrRefused):
		// An acquisition waiting for this lifecycle ends, and returns the refusal. A
		// running service or a held lease retries it (a password may be rotated back),
		// but loudly: no outage explains it.
		l.giveUpLocked(err)
		if !l.spec.single || owner {
			svc.log.Error("simba: the store refused the call; retrying", "err", err, "owner", owner, "retry_in", d)
		}
	default:
		svc.log.Warn("simba: store call failed; retrying", "err", err, "owner", owner, "retry_in", d)
	}
	l.due(d)
	return d
}

// answer applies the record a store call sent at sent returned, or a grant of the same
// shape, and returns the delay until the next attempt. Called with mu held.
func (l *lifecycle) answer(rec backend.Record, sent time.Time) time.Duration {
	svc := l.svc
	if l.tenure != nil && rec.Owner != svc.id && !sent.After(l.grantedSent) {
		// The call was sent before the waiting that a grant answered ended: its answer
		// predates the hand-over and must not end the tenure the grant began.
		return svc.period.next(svc.id, l.owner, l.grantedSent, svc.cfg.now(), false)
	}
	if sent.After(l.answeredSent) {
		l.answeredSent = sent
	}
	var end time.Time
	if svc.id != "" && rec.Owner == svc.id {
		rec.TTL = min(rec.TTL, svc.cfg.ttl) // never believe longer than this contender asked for
		// Belief ends a drift margin before the store's TTL end, counted from the send
		// time: the store read its clock later, so its TTL ends later still.
		end = sent.Add(rec.TTL - svc.cfg.driftMargin())
	}
	held := l.tenure
	o := ownerAt(rec, sent)
	l.apply(o, end)
	d := svc.period.next(svc.id, o, sent, svc.cfg.now(), held != nil && l.tenure == held)
	l.due(d)
	if svc.logs(slog.LevelDebug) {
		svc.log.Debug("simba: contended", "owner", o.ID, "token", o.Token, "next_in", d)
	}
	return d
}

// grant applies a hand-over the store made to this contender while it waited
// (backend.Participant.Grant): as the answer to the call sent at sent, unless an answer to a later
// call has been applied already. The next attempt is then due as after that answer.
func (l *lifecycle) grant(rec backend.Record, sent time.Time) {
	svc := l.svc
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.phase == phaseHalted || svc.id == "" || rec.Owner != svc.id || sent.Before(l.answeredSent) {
		return
	}
	if sent.After(l.grantedSent) {
		l.grantedSent = sent
	}
	l.setLastErr(nil)
	l.granting = true
	d := l.answer(rec, sent)
	l.granting = false
	l.attemptApplied()
	l.rounds.reschedule(d)
	if svc.logs(slog.LevelDebug) {
		svc.log.Debug("simba: granted", "token", rec.Token)
	}
}

// report receives an owner from a session backend (backend.Participant.Report).
func (l *lifecycle) report(rec backend.Record, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.phase == phaseHalted {
		return // a report of an ended lifecycle
	}
	o := ownerAt(rec, at)
	var end time.Time
	if o.OwnedBy(l.svc.id) && rec.TTL != 0 {
		end = o.TTLAt
	}
	l.apply(o, end)
	l.attemptApplied()
}

// giveUp records that no attempt can succeed as things are (err says why: the backend is
// closed, or the store refused the client), so that an acquisition waiting for the
// lifecycle ends (a Locker's through decided, a Mutexes holder's through
// spec.hopeless). A halted lifecycle is past caring.
func (l *lifecycle) giveUp(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.giveUpLocked(err)
}

// setLastErr records the outcome of the last call, unless the backend was closed: an
// answer that comes after the close must not undo it. Called with mu held.
func (l *lifecycle) setLastErr(err error) {
	if !errors.Is(l.lastErr, ErrClosed) {
		l.lastErr = err
	}
}

func (l *lifecycle) giveUpLocked(err error) {
	if l.phase == phaseHalted {
		return
	}
	l.lastErr = err // what a Locker's acquisition reports, whatever failed before
	if !l.gaveUp {
		l.gaveUp = true
		l.decided.fire()
		if l.spec.hopeless != nil {
			l.spec.hopeless(err)
		}
	}
}

// callTimeout bounds a store call sent at now by the call timeout and, while this
// contender believes it owns the mutex, by its local TTL end. (Once that has passed, the
// tenure is over whatever the call brings, and the call gets the whole timeout: the store
// may still name this contender, which then begins a new tenure.) Called with mu held.
func (l *lifecycle) callTimeout(now time.Time) time.Duration {
	d := l.svc.cfg.callTimeout
	if t := l.tenure; t != nil {
		if left := t.left(now); left > 0 && left < d {
			d = left
		}
	}
	return d
}

// due records, while this contender leads, the instant by which the attempt due d from
// now must have been applied: later, its renewal is overdue (Health.Overdue). Called with
// mu held.
func (l *lifecycle) due(d time.Duration) {
	if l.tenure == nil {
		l.renewBy = time.Time{}
		return
	}
	l.renewBy = l.svc.cfg.now().Add(d + l.svc.cfg.callTimeout)
}

// attemptApplied records that an attempt (or report) was applied: the outcome a single
// attempt (TryAcquire) waits for. Called with mu held.
func (l *lifecycle) attemptApplied() {
	if l.spec.once {
		l.decided.fire()
	}
}

// markApplied counts an applied attempt and wakes those waiting for one (attemptNow).
// Called with mu held.
func (l *lifecycle) markApplied() {
	l.applied++
	if l.appliedCh != nil { // only attemptNow waits for it: an acquisition need not make one
		close(l.appliedCh)
		l.appliedCh = nil
	}
	l.attemptApplied()
}

// ---- tenures: apply, begin, renew, end ----------------------------------------------------

// apply records the owner an answer or report named. end is the local end of belief when o
// names this contender (zero: none). Called with mu held.
func (l *lifecycle) apply(o Owner, end time.Time) {
	svc := l.svc
	now := svc.cfg.now()
	if t := l.tenure; t != nil {
		// The tenure is over whatever the answer says when its local end passed before the
		// answer could be applied (its context may have said so already), or when the
		// store answers with another tenure of this contender's (the mutex was freed and
		// taken again behind its back).
		switch {
		case !t.believes(now):
			l.endTenure(l.expiredCause(), Owner{})
		case o.OwnedBy(svc.id) && otherTenure(t.record(), o):
			l.endTenure(ErrOwnerChanged, Owner{})
		}
	}
	if o.OwnedBy(svc.id) {
		if l.phase != phaseOver && l.yielding == nil && (end.IsZero() || now.Before(end)) {
			if t := l.tenure; t != nil {
				l.renew(t, o, end, now)
				return
			}
			l.beginTenure(o, end, now)
			return
		}
		// The store names this contender, but belief cannot begin: the lifecycle serves no
		// further tenure, or the answer came after the local TTL end it implies. Until a
		// timely answer, the owner is unknown.
		o = Owner{}
	}
	if l.tenure != nil {
		l.endTenure(ErrOwnerChanged, o)
		return
	}
	if o.ID != l.owner.ID {
		l.changed(State{Before: l.owner, After: o})
	}
	l.owner = o
}

// changed records a change of owner that is no tenure of this contender's, and tells a
// retriever of it. Called with mu held.
func (l *lifecycle) changed(st State) {
	l.state = st
	if l.hooks.changed != nil {
		l.events.Push(func() { l.hooks.changed(st) })
	}
	if l.svc.logs(slog.LevelDebug) {
		l.svc.log.Debug("simba: owner changed", "owner", st.After.ID, "token", st.After.Token)
	}
}

// otherTenure reports whether o, a record naming the owner of was, is a later (or lost and
// restarted) tenure rather than a renewal: both tell their fencing tokens, and these differ.
func otherTenure(was, o Owner) bool {
	return was.Token != 0 && o.Token != 0 && was.Token != o.Token
}

func (l *lifecycle) beginTenure(o Owner, end, now time.Time) {
	svc := l.svc
	t := newTenure(svc.cfg.clock, o, end, now, l, &svc.tenureTimer)
	st := State{Before: l.owner, After: o}
	l.tenure, l.owner, l.state = t, o, st
	if l.first == nil {
		l.first = t
		l.decided.fire()
	}
	if svc.logs(slog.LevelInfo) {
		svc.log.Info("simba: acquired", "token", o.Token)
	}
	if svc.cfg.observer != nil {
		svc.cfg.observer.OnTenureBegan(observe.Tenure{Mutex: svc.mutex, Kind: svc.kind(), Contender: svc.id, Role: svc.role, Token: o.Token, Granted: l.granting})
	}
	if l.hooks.acquired != nil {
		l.tellAcquired(t, st)
	}
}

// tellAcquired queues the acquired hook. Apart from beginTenure, so that st is copied to
// the heap only when there is a hook to tell (a Locker has none).
func (l *lifecycle) tellAcquired(t *tenure, st State) {
	l.events.Push(func() { l.hooks.acquired(t, st) })
}

func (l *lifecycle) renew(t *tenure, o Owner, end, now time.Time) {
	l.owner = o
	t.renew(o, end, now)
	if l.svc.logs(slog.LevelDebug) {
		l.svc.log.Debug("simba: renewed", "token", o.Token)
	}
}

// endTenure ends this contender's belief: the tenure context is cancelled with cause at
// once, and OnReleased is queued. after is the owner now believed. Called with mu held.
func (l *lifecycle) endTenure(cause error, after Owner) {
	svc := l.svc
	t := l.tenure
	l.tenure = nil
	t.end(cause)
	was := t.record()
	st := State{Before: was, After: after}
	l.owner, l.state = after, st
	if l.spec.single {
		l.enter(phaseOver)
	}
	switch {
	case errors.Is(cause, ErrOwnershipLost):
		svc.log.Warn("simba: ownership lost", "token", was.Token, "cause", cause, "owner", after.ID)
	case svc.logs(slog.LevelInfo):
		svc.log.Info("simba: released", "token", was.Token)
	}
	if svc.cfg.observer != nil {
		svc.cfg.observer.OnTenureEnded(observe.Tenure{
			Mutex: svc.mutex, Kind: svc.kind(), Contender: svc.id, Role: svc.role, Token: was.Token, Held: svc.cfg.now().Sub(t.base),
			Cause: cause, Reason: reason(cause),
		})
	}
	if l.hooks.released != nil {
		l.tellReleased(st)
	}
}

// tellReleased queues the released hook; apart from endTenure as tellAcquired is.
func (l *lifecycle) tellReleased(st State) {
	l.events.Push(func() { l.hooks.released(st) })
}

// expire ends belief at the local TTL end of t unless a renewal has moved it. It runs on
// the tenure's timer, independently of any store call in flight.
func (l *lifecycle) expire(t *tenure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenure != t || l.phase == phaseHalted || t.believes(l.svc.cfg.now()) {
		return
	}
	l.endTenure(l.expiredCause(), Owner{})
	l.rounds.poke() // the renewal may still succeed: contend now
}

// expiredCause is the cause of a tenure whose local TTL end passed: ErrLeaseExpired, with
// the last store error if the renewals failed. Called with mu held.
func (l *lifecycle) expiredCause() error {
	if l.lastErr == nil {
		return ErrLeaseExpired
	}
	return describe(ErrLeaseExpired, "", l.lastErr)
}

// ---- a single lifecycle's end ------------------------------------------------------------

// releaseAfterTenure gives the mutex back once a single lifecycle's tenure has ended, so
// that others need not wait for the lease to lapse.
func (l *lifecycle) releaseAfterTenure() {
	ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
	defer cancel()
	if err := l.svc.call(ctx, l.ctx, observe.OpRelease, l.lease.Release); err != nil && l.ctx.Err() == nil {
		l.svc.log.Warn("simba: release after lost tenure failed", "err", err)
	}
}

// leaveIfOver gives up a session contention once a single lifecycle's tenure has ended
// (lost, while its session survived): its node would otherwise stay first in line until
// the lease is released. It reports whether it did.
func (l *lifecycle) leaveIfOver() bool {
	if !l.is(phaseOver) {
		return false
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
	err := l.svc.call(ctx, l.ctx, observe.OpStop, l.contention.StopContend)
	cancel()
	l.mu.Lock()
	l.left = true
	l.mu.Unlock()
	if err != nil && l.ctx.Err() == nil {
		l.svc.log.Warn("simba: leaving after a lost tenure failed", "err", err)
	}
	return true
}

// ---- yield --------------------------------------------------------------------------------

// yield steps down: belief ends at once (the tenure context is cancelled, OnReleased is
// queued), and, once OnReleased has been delivered, the mutex goes back to the store as by
// a release, which wakes the next waiter; contention then goes on from behind those
// already waiting (a session store's contention is opened anew, at the end of the queue).
// With to set, a hand-off, the store gives the mutex to the waiting contender to instead
// (backend.HandOffer), and the mutex goes back as above only if it did not. It returns the
// step-down under way, ErrNotOwner when this contender does not believe it owns the mutex,
// or, before belief ends, errors.ErrUnsupported for a hand-off the store cannot make.
func (l *lifecycle) yield(to string) (*yielding, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.yielding != nil && to == "":
		return l.yielding, nil
	case l.tenure == nil || l.phase != phaseRunning || l.yielding != nil:
		return nil, fmt.Errorf("%w: %q does not lead %q", ErrNotOwner, l.svc.id, l.svc.mutex)
	}
	if _, ok := l.contention.(backend.HandOffer); to != "" && !ok {
		return nil, fmt.Errorf("simba: hand-off of %q: the store's contention (%T) cannot: %w", l.svc.mutex, l.contention, errors.ErrUnsupported)
	}
	y := &yielding{to: to, done: make(chan struct{})}
	l.yielding = y
	l.endTenure(context.Canceled, Owner{})
	if l.lease != nil {
		l.rounds.poke() // a round gives the mutex back: one store call at a time
	} else {
		l.work.Go(func() { l.reopen(y) })
	}
	return y, nil
}

// handOffIfPreferred begins a hand-off to the waiter preferred picks, if any, and reports
// whether it did.
func (l *lifecycle) handOffIfPreferred() bool {
	to := l.preferred()
	if to == "" {
		return false
	}
	_, err := l.yield(to)
	return err == nil
}

// preferred returns the first waiting contender whose value the preference
// (WithPreference) accepts, when this contender leads and its own value it does not; ""
// when none, or when the store cannot tell.
func (l *lifecycle) preferred() string {
	svc := l.svc
	if svc.cfg.prefer == nil || svc.prefers(svc.cfg.ownerValue) || l.believed() == nil {
		return ""
	}
	l.mu.Lock()
	h, ok := l.contention.(backend.HandOffer)
	l.mu.Unlock()
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(l.ctx, svc.cfg.callTimeout)
	defer cancel()
	waiters, err := h.Waiters(ctx)
	if err != nil {
		if l.ctx.Err() == nil {
			svc.log.Warn("simba: asking the store for waiters failed", "err", err)
		}
		return ""
	}
	for _, w := range waiters {
		if w.ID != svc.id && svc.prefers(w.Value) {
			return w.ID
		}
	}
	return ""
}

// prefers reports whether the preference (WithPreference) accepts value; a preference that
// panics accepts nothing, and the panic is logged.
func (s *Service) prefers(value string) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("simba: the preference panicked; it prefers no one", "panic", v)
			ok = false
		}
	}()
	return s.cfg.prefer(value)
}

// yieldGrace is the least time a contender that gave its mutex back waits before it tries
// again. Where the store frees the mutex and wakes the oldest waiter instead of naming it
// owner (a Quorum, JVM Simba's waiters), the woken waiter must hear the message and
// acquire; a yielder that tried again at once would often take the mutex back first.
const yieldGrace = 250 * time.Millisecond

// giveBack hands off or releases the mutex of a step-down, in a round, once OnReleased has
// been delivered, and returns the delay until the next attempt, as for a non-owner, and at
// least yieldGrace.
func (l *lifecycle) giveBack(y *yielding) time.Duration {
	l.delivered()
	err := l.handOff(y)
	if y.to == "" || err != nil {
		ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
		err = errors.Join(err, l.svc.call(ctx, l.ctx, observe.OpRelease, l.lease.Release))
		cancel()
	}
	l.yielded(y, err)
	now := l.svc.cfg.now()
	return max(l.svc.period.next(l.svc.id, Owner{}, now, now, false), yieldGrace)
}

// handOff asks the store to give the mutex to y.to, if set: the store then keeps this
// contender waiting. Observed as a release, which it is for this contender.
func (l *lifecycle) handOff(y *yielding) error {
	if y.to == "" {
		return nil
	}
	l.mu.Lock()
	h := l.contention.(backend.HandOffer) // checked by yield
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
	defer cancel()
	return l.svc.call(ctx, l.ctx, observe.OpRelease, func(ctx context.Context) error { return h.HandOff(ctx, y.to) })
}

// reopen hands a session contention's mutex off (y.to set) once OnReleased has been
// delivered; else, or if that failed, gives the contention up and opens it anew, at the
// end of the queue, retrying with backoff until it opens or the lifecycle is halted.
func (l *lifecycle) reopen(y *yielding) {
	l.delivered()
	handOffErr := l.handOff(y)
	if y.to != "" && handOffErr == nil {
		l.yielded(y, nil) // the store queued this contention behind those waiting
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
	l.mu.Lock()
	old := l.contention
	l.contention = nil // given up: finish must not stop it again
	l.mu.Unlock()
	err := l.svc.call(ctx, l.ctx, observe.OpStop, old.StopContend)
	cancel()
	l.yielded(y, errors.Join(handOffErr, err))
	for failures := 1; l.ctx.Err() == nil; failures++ {
		ctx, cancel := context.WithTimeout(l.ctx, l.svc.cfg.callTimeout)
		err := l.startContend(l.ctx, ctx)
		cancel()
		if err == nil || l.ctx.Err() != nil {
			return
		}
		d := l.svc.period.retry(failures, false)
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		l.svc.log.Warn("simba: opening the contention again failed; retrying", "err", err, "retry_in", d)
		_ = sleep(l.ctx, l.svc, d, nil)
	}
}

// yielded ends step-down y with the store's error.
func (l *lifecycle) yielded(y *yielding, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	y.err = err
	l.yielding = nil
	close(y.done)
}

// delivered waits until the callbacks queued so far have been delivered, or the
// lifecycle is halted.
func (l *lifecycle) delivered() {
	done := make(chan struct{})
	if !l.events.Push(func() { close(done) }) {
		return
	}
	select {
	case <-done:
	case <-l.halted.ch:
	}
}

// ---- halt and finish ---------------------------------------------------------------------

// halt ends the lifecycle at once: from now on its answers and reports are dropped, belief
// ends (the tenure context is cancelled and OnReleased queued), the store call in flight
// is cut short and no further round begins. finish does the rest.
func (l *lifecycle) halt() {
	l.rounds.halt() // first: ending the tenure below must not start a round
	l.cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenure != nil {
		l.endTenure(context.Canceled, Owner{})
	}
	l.enter(phaseHalted)
}

// finish does the store work of a halted lifecycle, on a goroutine that Close waits for:
// it waits for the round under way, delivers the callbacks still queued (so OnReleased has
// returned before the store hears of the release), releases the mutex on the store (which
// also undoes an acquisition whose answer was lost or dropped) and ends the contention.
// Each store call is bounded by the call timeout; values carries the caller's values.
func (l *lifecycle) finish(values context.Context) {
	defer close(l.finished)
	l.rounds.wait()
	l.work.Wait()
	l.events.Close()
	if _, ok := values.Deadline(); ok || values.Done() != nil {
		values = context.WithoutCancel(values) // a context that cannot end is kept as it is
	}
	ctx, cancel := context.WithTimeout(values, l.svc.cfg.callTimeout)
	defer cancel()
	l.tellStore(ctx, nil)
}

// finishWithin is finish on the caller's goroutine, for a backend that keeps deadlines
// (Service.inline), ctx's deadline kept: it waits for the round under way as long as ctx
// lasts, and each store call is bounded by ctx too. It does nothing and reports false
// when callbacks may be queued (a Locker's lifecycle has none) or ctx ends before the
// round, and reports false when ctx ended before the release was answered: finish then
// does it all (the release again) in the background.
func (l *lifecycle) finishWithin(ctx context.Context) bool {
	if h := l.hooks; h.acquired != nil || h.released != nil || h.changed != nil {
		return false
	}
	select {
	case <-l.rounds.ended():
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		return false // both were ready
	}
	cctx, cancel := context.WithTimeout(ctx, l.svc.cfg.callTimeout)
	defer cancel()
	if !l.tellStore(cctx, ctx) {
		return false
	}
	l.events.Close() // nothing to deliver: returns at once
	close(l.finished)
	return true
}

// tellStore releases the mutex on the store (which also undoes an acquisition whose
// answer was lost or dropped) and ends the contention, each call bounded by ctx, and
// records what the store said as finishErr. With caller set, it stops short, reporting
// false, when caller ended before the release was answered.
func (l *lifecycle) tellStore(ctx, caller context.Context) bool {
	svc := l.svc
	l.mu.Lock()
	c, lease, left, started := l.contention, l.lease, l.left, l.started
	l.mu.Unlock()
	var errs []error
	if lease != nil && svc.id != "" {
		if err := svc.call(ctx, caller, observe.OpRelease, lease.Release); err != nil {
			if caller != nil && caller.Err() != nil {
				return false // the outcome is unknown: the release must be made again
			}
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	if c != nil && !left {
		if err := svc.call(ctx, caller, observe.OpStop, c.StopContend); err != nil {
			errs = append(errs, fmt.Errorf("stop contend: %w", err))
		}
	}
	if svc.id != "" {
		unclaim(svc.claim)
	}
	if len(errs) > 0 {
		l.finishErr = errors.Join(errs...)
		svc.log.Warn("simba: stopped; the store was not told", "err", l.finishErr)
	} else if started && svc.logs(slog.LevelInfo) { // a start-up that failed was no start
		svc.log.Info("simba: stopped")
	}
	return true
}

// ---- what front-ends ask ------------------------------------------------------------------

// is reports whether the lifecycle is in phase p.
func (l *lifecycle) is(p phase) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase == p
}

// leaseStore reports whether the contention is a lease store's.
func (l *lifecycle) leaseStore() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease != nil
}

// markStarted records that Start completed.
func (l *lifecycle) markStarted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
}

// believed returns the tenure this contender believes in now, or nil.
func (l *lifecycle) believed() *tenure {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenure == nil || !l.tenure.believes(l.svc.cfg.now()) {
		return nil
	}
	return l.tenure
}

// believedOwner returns the owner as the lifecycle believes it now: the record of the last
// answer, with this contender's own record dropped once its local TTL end has passed.
func (l *lifecycle) believedOwner() Owner {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.tenure; t != nil && !t.believes(l.svc.cfg.now()) {
		return Owner{}
	}
	return l.owner
}

// lastState returns the last change of owner the lifecycle saw.
func (l *lifecycle) lastState() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// err returns the error of the last attempt.
func (l *lifecycle) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// outcome returns what a single lifecycle's acquisition needs: its first tenure (nil if
// none began), the owner believed, and the store's last error.
func (l *lifecycle) outcome() (*tenure, Owner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.owner, l.lastErr
}

// overdue returns how long the renewal of the lifecycle's tenure is overdue.
func (l *lifecycle) overdue() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.renewBy.IsZero() {
		return 0
	}
	return max(0, l.svc.cfg.now().Sub(l.renewBy))
}

// attemptNow asks a lease contention for an attempt at once and waits until an attempt
// that began after the call has been applied, or ctx ends; it returns that attempt's
// error. A session contention has nothing to ask: what it reported is all there is.
func (l *lifecycle) attemptNow(ctx context.Context) error {
	l.mu.Lock()
	if l.lease == nil {
		l.mu.Unlock()
		return nil
	}
	target := l.begun + 1
	l.mu.Unlock()
	l.rounds.poke()
	for {
		l.mu.Lock()
		if l.applied >= target || l.phase == phaseHalted {
			err := l.lastErr
			l.mu.Unlock()
			return err
		}
		if l.appliedCh == nil {
			l.appliedCh = make(chan struct{})
		}
		applied := l.appliedCh
		l.mu.Unlock()
		select {
		case <-applied:
		case <-l.halted.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// slotRecorder returns the contention's backend.SlotRecorder; nil when its store records
// no slots.
func (l *lifecycle) slotRecorder() backend.SlotRecorder {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, _ := l.contention.(backend.SlotRecorder)
	return r
}

// othersWaiting asks the store whether other contenders wait for the mutex. known is false
// when the store cannot tell or did not answer.
func (l *lifecycle) othersWaiting(ctx context.Context) (waiting, known bool) {
	l.mu.Lock()
	wl, ok := l.contention.(backend.WaitList)
	l.mu.Unlock()
	if !ok {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, l.svc.cfg.callTimeout)
	defer cancel()
	waiting, err := wl.OthersWaiting(ctx)
	if err != nil {
		l.svc.log.Warn("simba: asking the store for waiters failed", "err", err)
		return false, false
	}
	return waiting, true
}
