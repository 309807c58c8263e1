package simba

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/clock"
	"github.com/simba-go/simba/internal/mutation"
)

// tenure is one continuous period of believed ownership.
type tenure struct {
	ctx    context.Context // a tenureContext on inner
	inner  context.Context // cancelled with a cause when belief ends
	cancel context.CancelCauseFunc
	clock  clock.Clock
	base   time.Time    // when the tenure began; end counts from it
	end    atomic.Int64 // the local end of belief, in ns after base; noEnd: none
	owner  Owner        // the record as last renewed; guarded by Service.mu
	timer  clock.Timer  // ends belief at end; guarded by Service.mu
}

// noEnd marks a tenure without a local end (a session store that reports no TTL).
const noEnd = math.MaxInt64

func (t *tenure) setEnd(end time.Time) {
	if end.IsZero() {
		t.end.Store(noEnd)
		return
	}
	t.end.Store(int64(end.Sub(t.base)))
}

// endTime returns the local end of belief, or the zero Time when there is none.
func (t *tenure) endTime() time.Time {
	end := t.end.Load()
	if end == noEnd {
		return time.Time{}
	}
	return t.base.Add(time.Duration(end))
}

// believes reports whether the tenure's local end lies after now.
func (t *tenure) believes(now time.Time) bool {
	return int64(now.Sub(t.base)) < t.end.Load()
}

// lapse cancels the tenure's context, with cause ErrLeaseExpired, if its local end has
// passed. The service's timer does the same, and ends the tenure; lapse makes every reader
// of the context see the end at once, even when that timer has not run yet (a process
// resumed after a pause runs its goroutines in any order).
func (t *tenure) lapse() {
	if mutation.On("unchecked-belief") {
		return
	}
	if !t.believes(t.clock.Now()) {
		t.cancel(ErrLeaseExpired)
	}
}

// live reports whether the tenure is believed now: its context has not ended and its
// local end lies ahead.
func (t *tenure) live() bool { return t.ctx.Err() == nil }

// derive returns a context that ends with the tenure, or earlier by cancel, and checks the
// tenure's local end as the tenure's own context does: the context of one holder of a
// tenure that several holders share in turn (Mutexes).
func (t *tenure) derive() (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(t.inner) // the checks are the wrapper's
	return tenureContext{ctx, t}, cancel
}

// tenureContext is the context of a tenure (or of one holder of it). Besides the
// cancellation the service applies when belief ends, its Done, Err and Value (through
// which context.Cause reads) check the local end themselves: after a pause, the first
// look at the context tells that belief has lapsed, whatever the timers have done.
//
// Contexts derived from it by context.WithCancel and the like end when it is cancelled:
// at the first look at it after the local end, or when the service's timer runs.
type tenureContext struct {
	context.Context
	t *tenure
}

func (c tenureContext) Done() <-chan struct{} {
	c.t.lapse()
	return c.Context.Done()
}

func (c tenureContext) Err() error {
	c.t.lapse()
	return c.Context.Err()
}

func (c tenureContext) Value(key any) any {
	c.t.lapse()
	return c.Context.Value(key)
}

// apply records the owner an answer or report named. end is the local end of belief when o
// names this contender (zero: none). Called with s.mu held.
func (s *Service) apply(r *run, o Owner, end time.Time) {
	now := s.cfg.now()
	if t := r.tenure; t != nil {
		// The tenure is over whatever the answer says when its local end passed before the
		// answer could be applied (its context may have said so already), or when the
		// store answers with another tenure of this contender's (the mutex was freed and
		// taken again behind its back).
		switch {
		case !t.believes(now):
			s.endTenure(r, s.expiredCause(r), Owner{})
		case o.OwnedBy(s.id) && otherTenure(t.owner, o):
			s.endTenure(r, ErrOwnerChanged, Owner{})
		}
	}
	if o.OwnedBy(s.id) {
		if !r.over && (end.IsZero() || now.Before(end)) {
			if t := r.tenure; t != nil {
				s.renew(r, t, o, end, now)
				return
			}
			s.beginTenure(r, o, end, now)
			return
		}
		// The store names this contender, but belief cannot begin: the lifecycle serves no
		// further tenure, or the answer came after the local TTL end it implies. Until a
		// timely answer, the owner is unknown.
		o = Owner{}
	}
	if r.tenure != nil {
		s.endTenure(r, ErrOwnerChanged, o)
		return
	}
	if o.ID != r.owner.ID {
		s.ownerChanged(r, o)
	}
	r.owner = o
}

// ownerChanged tells a retriever of a new owner. Called with s.mu held.
func (s *Service) ownerChanged(r *run, o Owner) {
	st := State{Before: r.owner, After: o}
	s.lastState = st
	if s.retriever != nil {
		r.events.Push(func() { s.retriever.NotifyOwner(st) })
	}
	if s.logs(slog.LevelDebug) {
		s.log.Debug("simba: owner changed", "owner", o.ID, "token", o.Token)
	}
}

// otherTenure reports whether o, a record naming the owner of was, is a later (or lost and
// restarted) tenure rather than a renewal: both tell their fencing tokens, and these differ.
func otherTenure(was, o Owner) bool {
	return was.Token != 0 && o.Token != 0 && was.Token != o.Token
}

func (s *Service) beginTenure(r *run, o Owner, end, now time.Time) {
	t := s.newTenure(r, o, end, now)
	st := State{Before: r.owner, After: o}
	r.tenure, r.owner, s.lastState = t, o, st
	if r.first == nil {
		r.first = t
		close(r.acquired)
	}
	if s.logs(slog.LevelInfo) {
		s.logAcquired(o)
	}
	if s.cfg.observer != nil {
		s.cfg.observer.OnTenureBegan(Tenure{Mutex: s.mutex, Contender: s.id, Role: s.role, Owner: o, Granted: r.granting})
	}
	if s.contender != nil {
		r.events.Push(func() { s.contender.OnAcquired(t.ctx, st) })
	}
}

func (s *Service) newTenure(r *run, o Owner, end, now time.Time) *tenure {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &tenure{inner: ctx, cancel: cancel, clock: s.cfg.clock, base: now, owner: o}
	t.ctx = tenureContext{ctx, t}
	t.setEnd(end)
	if !end.IsZero() {
		t.timer = s.cfg.clock.AfterFunc(end.Sub(now), func() { s.expire(r, t) })
	}
	return t
}

func (s *Service) logAcquired(o Owner) { s.log.Info("simba: acquired", "token", o.Token) }

func (s *Service) renew(r *run, t *tenure, o Owner, end, now time.Time) {
	t.owner, r.owner = o, o
	t.setEnd(end)
	switch {
	case end.IsZero() && t.timer != nil:
		t.timer.Stop()
	case end.IsZero():
	case t.timer != nil:
		t.timer.Reset(end.Sub(now))
	default:
		t.timer = s.cfg.clock.AfterFunc(end.Sub(now), func() { s.expire(r, t) })
	}
	if s.logs(slog.LevelDebug) {
		s.log.Debug("simba: renewed", "token", o.Token)
	}
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
	if r.spec.single {
		r.over = true
		r.rounds.poke()
	}
	switch {
	case errors.Is(cause, ErrOwnershipLost):
		s.log.Warn("simba: ownership lost", "token", t.owner.Token, "cause", cause, "owner", after.ID)
	case s.logs(slog.LevelInfo):
		s.log.Info("simba: released", "token", t.owner.Token)
	}
	if s.cfg.observer != nil {
		s.cfg.observer.OnTenureEnded(Tenure{
			Mutex: s.mutex, Contender: s.id, Role: s.role, Owner: t.owner, Held: s.cfg.now().Sub(t.base), Cause: cause,
		})
	}
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
	s.endTenure(r, s.expiredCause(r), Owner{})
	r.rounds.poke() // the renewal may still succeed: contend now
}

// expiredCause is the cause of a tenure of r whose local TTL end passed: ErrLeaseExpired,
// with the last store error if the renewals failed. Called with s.mu held.
func (s *Service) expiredCause(r *run) error {
	if r.lastErr == nil {
		return ErrLeaseExpired
	}
	return describe(ErrLeaseExpired, "", r.lastErr)
}
