package simba

import (
	"context"
	"time"
)

// This file is the service's side of a session store, which decides ownership itself and
// reports every owner it learns of (Participant.Report).

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

// leaveIfOver gives up a session contention once a single lifecycle's tenure has ended
// (lost, while its session survived): its node would otherwise stay first in line until
// the lease is released. It reports whether it did.
func (s *Service) leaveIfOver(r *run) bool {
	if !s.isOver(r) {
		return false
	}
	ctx, cancel := context.WithTimeout(r.ctx, s.cfg.callTimeout)
	err := s.call(ctx, r.ctx, OpStop, r.contention.StopContend)
	cancel()
	s.mu.Lock()
	r.contendDone = true
	s.mu.Unlock()
	if err != nil && r.ctx.Err() == nil {
		s.log.Warn("simba: leaving after a lost tenure failed", "err", err)
	}
	return true
}
