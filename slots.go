package simba

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backend"
)

// slots is a tenure's side of the slots its store records (backend.SlotRecorder): the
// Scheduler claims each run's slot before it starts the run, so that no slot runs twice,
// whoever leads.
type slots struct {
	s     *Scheduler
	rec   backend.SlotRecorder
	token uint64 // the tenure's fencing token: a claim of an earlier tenure's loses
}

// slotsOf returns the slots of tenure t, or nil when its store records none.
func (s *Scheduler) slotsOf(t *tenure) *slots {
	l, ok := t.of.(*lifecycle)
	if !ok {
		return nil
	}
	rec := l.slotRecorder()
	if rec == nil {
		return nil
	}
	return &slots{s: s, rec: rec, token: t.record().Token}
}

// after returns the first instant from from on that a slot may take: after the slot the
// store recorded last, read now, retrying on failures until the store answers; false when
// the tenure's context ended first.
func (sl *slots) after(ctx context.Context, from time.Time) (time.Time, bool) {
	svc, sched := sl.s.svc, sl.s.schedule
	for failures := 1; ; failures++ {
		cctx, cancel := context.WithTimeout(ctx, svc.cfg.callTimeout)
		last, err := sl.rec.LastSlot(cctx)
		err = callError(err, cctx, ctx, svc.cfg.callTimeout)
		cancel()
		switch {
		case ctx.Err() != nil:
			return time.Time{}, false
		case err == nil && last.At.IsZero():
			return from, true
		case err == nil:
			bound := last.At.Add(sched.Period)
			if sched.Timetable != nil {
				bound = last.At.Add(time.Nanosecond) // a slot at the recorded one is taken
			}
			if bound.After(from) {
				return bound, true
			}
			return from, true
		}
		d := svc.period.retry(failures, true)
		level := slog.LevelWarn
		if errors.Is(err, ErrRefused) {
			level = slog.LevelError // no outage explains it: retried all the same, loudly
		}
		svc.log.Log(ctx, level, "simba: reading the scheduler's last slot failed; no run until it is known, retrying", "err", err, "retry_in", d)
		if sleep(ctx, svc, d, nil) != nil {
			return time.Time{}, false
		}
	}
}

// claim asks the store to record the slot at at for the tenure, and reports whether the
// run may start: the store recorded it and the tenure is still believed after its answer.
func (sl *slots) claim(ctx context.Context, at time.Time) bool {
	svc := sl.s.svc
	cctx, cancel := context.WithTimeout(ctx, svc.cfg.callTimeout)
	ok, err := sl.rec.ClaimSlot(cctx, backend.Slot{At: at, Token: sl.token})
	err = callError(err, cctx, ctx, svc.cfg.callTimeout)
	cancel()
	switch {
	case ctx.Err() != nil:
		return false // belief ended while the store answered
	case err != nil:
		svc.log.Warn("simba: claiming the scheduler's slot failed; skipping the slot", "err", err, "slot", at)
	case !ok && svc.logs(slog.LevelDebug):
		svc.log.Debug("simba: the store refused the scheduler's slot (claimed already); skipping it", "slot", at)
	}
	return ok && err == nil
}
