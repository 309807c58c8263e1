package simba

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/simba-go/simba/internal/mutation"
)

// This file is the contend loop of a lease store: the service calls Acquire (Lookup for a
// retriever) on the contend period, one call at a time, and applies the answers and the
// store's grants.

// round is one round of a lease contention: an attempt, or, once a single lifecycle's
// tenure has ended, the release after which there are no more rounds.
func (s *Service) round(r *run) (time.Duration, bool) {
	if s.isOver(r) {
		s.releaseAfterTenure(r)
		return 0, false
	}
	return s.attempt(r), true
}

// attempt makes one acquire (or, for a retriever, lookup) call and applies its answer. It
// returns the delay until the next attempt.
func (s *Service) attempt(r *run) time.Duration {
	sent := s.cfg.now()
	s.mu.Lock()
	r.begun++
	timeout := s.callTimeout(r, sent)
	lease := r.lease
	renewing := r.tenure != nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	var (
		rec Record
		err error
	)
	if s.id == "" {
		rec, err = lease.Lookup(ctx)
	} else {
		rec, err = lease.Acquire(ctx)
	}
	err = callError(err, ctx, r.ctx, timeout)
	cancel()
	if s.cfg.observer != nil {
		s.observeCall(attemptOp(s.id, renewing), sent, rec, err)
	}
	if r.ctx.Err() != nil {
		return 0 // stopping: the result belongs to an ended lifecycle; Stop releases
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.stopped {
		return 0
	}
	defer s.markApplied(r)
	r.lastErr = err
	if err != nil {
		r.failures++
		owner := r.tenure != nil
		d := s.period.retry(r.failures, owner)
		switch {
		case errors.Is(err, ErrClosed):
			s.markHopeless(r, err)
		case errors.Is(err, ErrRefused):
			// An acquisition waiting for this lifecycle ends, and returns the refusal. A
			// running service or a held lease retries it (a password may be rotated back),
			// but loudly: no outage explains it.
			s.markHopeless(r, err)
			if !r.spec.single || owner {
				s.log.Error("simba: the store refused the call; retrying", "err", err, "owner", owner, "retry_in", d)
			}
		default:
			s.log.Warn("simba: store call failed; retrying", "err", err, "owner", owner, "retry_in", d)
		}
		s.due(r, d)
		return d
	}
	r.failures = 0
	return s.answer(r, rec, sent)
}

// markHopeless records that no attempt of r can succeed as things are (err says why: the
// backend is closed, or the store refused the client), so that an acquisition waiting for
// r ends (a Locker's through r.hopeless, a Mutexes holder's through spec.hopeless). A
// halted lifecycle is past caring. Called with s.mu held.
func (s *Service) markHopeless(r *run, err error) {
	if r.stopped {
		return
	}
	r.lastErr = err // what a Locker's acquisition reports, whatever failed before
	if !r.hopelessDone {
		r.hopelessDone = true
		close(r.hopeless)
		if r.spec.hopeless != nil {
			r.spec.hopeless(err)
		}
	}
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
	s.due(r, d)
	if s.logs(slog.LevelDebug) {
		s.log.Debug("simba: contended", "owner", o.ID, "token", o.Token, "next_in", d)
	}
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
	r.granting = true
	d := s.answer(r, rec, sent)
	r.granting = false
	s.markAttempted(r)
	r.rounds.reschedule(d)
	if s.logs(slog.LevelDebug) {
		s.log.Debug("simba: granted", "token", rec.Token)
	}
}

// due records, while this contender leads, the instant by which the attempt due d from
// now must have been applied: later, its renewal is overdue (Health.Overdue). Called with
// s.mu held.
func (s *Service) due(r *run, d time.Duration) {
	if r.tenure == nil {
		r.renewBy = time.Time{}
		return
	}
	r.renewBy = s.cfg.now().Add(d + s.cfg.callTimeout)
}

// overdue returns how long the renewal of the running lifecycle's tenure is overdue.
func (s *Service) overdue() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.renewBy.IsZero() {
		return 0
	}
	return max(0, s.cfg.now().Sub(s.run.renewBy))
}

// callTimeout bounds a store call sent at now by the call timeout and, while this
// contender believes it owns the mutex, by its local TTL end. (Once that has passed, the
// tenure is over whatever the call brings, and the call gets the whole timeout: the store
// may still name this contender, which then begins a new tenure.) Called with s.mu held.
func (s *Service) callTimeout(r *run, now time.Time) time.Duration {
	d := s.cfg.callTimeout
	if t := r.tenure; t != nil {
		if left := time.Duration(t.end.Load() - int64(now.Sub(t.base))); left > 0 && left < d {
			d = left
		}
	}
	return d
}

// markApplied counts an applied attempt and wakes those waiting for one (attemptNow).
// Called with s.mu held.
func (s *Service) markApplied(r *run) {
	r.applied++
	close(r.appliedCh)
	r.appliedCh = make(chan struct{})
	s.markAttempted(r)
}

// markAttempted closes r.attempted once. Called with s.mu held.
func (s *Service) markAttempted(r *run) {
	if !r.attemptedDone {
		r.attemptedDone = true
		close(r.attempted)
	}
}

// attemptNow asks a lease contention for an attempt at once and waits until an attempt
// that began after the call has been applied, or ctx ends; it returns that attempt's
// error. A session contention has nothing to ask: what it reported is all there is.
func (s *Service) attemptNow(ctx context.Context) error {
	s.mu.Lock()
	r := s.run
	if r == nil || r.lease == nil {
		s.mu.Unlock()
		return nil
	}
	target := r.begun + 1
	s.mu.Unlock()
	r.rounds.poke()
	for {
		s.mu.Lock()
		if r.applied >= target || r.stopped {
			err := r.lastErr
			s.mu.Unlock()
			return err
		}
		applied := r.appliedCh
		s.mu.Unlock()
		select {
		case <-applied:
		case <-r.halted:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Service) isOver(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.over
}

// releaseAfterTenure gives the mutex back once a single lifecycle's tenure has ended, so
// that others need not wait for the lease to lapse.
func (s *Service) releaseAfterTenure(r *run) {
	ctx, cancel := context.WithTimeout(r.ctx, s.cfg.callTimeout)
	defer cancel()
	if err := s.call(ctx, r.ctx, OpRelease, r.lease.Release); err != nil && r.ctx.Err() == nil {
		s.log.Warn("simba: release after lost tenure failed", "err", err)
	}
}
