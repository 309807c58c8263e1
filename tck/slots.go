package tck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/simba-go/simba/backend"
)

// checkSlots: a store that records a Scheduler's slots (backend.SlotRecorder) records a
// claim only when its instant is later than the recorded one and its token not less, so a
// retry, an equal instant and a stale token answer false and change nothing; LastSlot
// reads what was claimed, to the nanosecond, from any contention of the mutex and no
// other (with WithMinorityClaims, it may read a later claim that fell short); of two
// contenders claiming one slot at once, exactly one wins. A backend whose contentions do
// not record slots skips the check.
func checkSlots(e *env) error {
	mutex := e.mutex()
	a, err := e.slotRecorder(mutex, e.id("a"))
	if err != nil {
		return err
	}
	b, err := e.slotRecorder(mutex, e.id("b"))
	if err != nil {
		return err
	}
	var f findings
	if last, err := a.LastSlot(e.ctx); err != nil || !last.At.IsZero() || last.Token != 0 {
		f.addf("LastSlot of a mutex with no slot claimed = %v, %v; want the zero Slot", fmtSlot(last), err)
	}
	// Instants with nanoseconds: stores keep At as Unix nanoseconds.
	t1 := time.Now().Truncate(time.Second).Add(123456789)
	claims := []struct {
		s    backend.Slot
		want bool
		why  string
	}{
		{backend.Slot{At: t1, Token: 5}, true, "the first claim"},
		{backend.Slot{At: t1, Token: 5}, false, "a retry of the claim"},
		{backend.Slot{At: t1, Token: 6}, false, "the recorded instant, with a greater token"},
		{backend.Slot{At: t1.Add(-time.Nanosecond), Token: 6}, false, "an instant a nanosecond before the recorded one"},
		{backend.Slot{At: t1.Add(time.Second), Token: 4}, false, "a later instant with a stale token"},
		{backend.Slot{At: t1.Add(time.Nanosecond), Token: 5}, true, "an instant a nanosecond later, with the same token"},
		{backend.Slot{At: t1.Add(time.Minute), Token: 9}, true, "a later instant with a greater token"},
	}
	var (
		last  backend.Slot   // what the store should record
		tried []backend.Slot // the claims made so far
	)
	for _, c := range claims {
		tried = append(tried, c.s)
		got, err := a.ClaimSlot(e.ctx, c.s)
		switch {
		case err != nil:
			f.addf("ClaimSlot %s (%s): %v", fmtSlot(c.s), c.why, err)
		case got != c.want:
			f.addf("ClaimSlot %s (%s) = %v, want %v, with %s recorded", fmtSlot(c.s), c.why, got, c.want, fmtSlot(last))
		}
		if c.want {
			last = c.s
		}
		// b reads what a claimed: the record is the mutex's, not the contention's.
		if read, err := b.LastSlot(e.ctx); err != nil {
			f.addf("LastSlot after ClaimSlot %s (%s): %v", fmtSlot(c.s), c.why, err)
		} else if !e.mayRead(read, last, tried) {
			f.addf("LastSlot after ClaimSlot %s (%s) = %s, want %s", fmtSlot(c.s), c.why, fmtSlot(read), fmtSlot(last))
		}
	}
	other, err := e.slotRecorder(e.mutex(), e.id("c"))
	if err != nil {
		return f.join(err)
	}
	if read, err := other.LastSlot(e.ctx); err != nil || !read.At.IsZero() {
		f.addf("LastSlot of another mutex = %s, %v; want the zero Slot", fmtSlot(read), err)
	}
	return f.join(raceSlots(e, a, b, last))
}

// raceSlots has a and b claim the same slots at once, each after last, and checks that
// exactly one of them wins each.
func raceSlots(e *env, a, b backend.SlotRecorder, last backend.Slot) error {
	var f findings
	for i := range 20 {
		s := backend.Slot{At: last.At.Add(time.Duration(i+1) * time.Second), Token: last.Token + uint64(i)}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			won   [2]bool
			errs  [2]error
		)
		for j, r := range []backend.SlotRecorder{a, b} {
			wg.Go(func() {
				<-start
				won[j], errs[j] = r.ClaimSlot(e.ctx, s)
			})
		}
		close(start)
		wg.Wait()
		switch {
		case errors.Join(errs[:]...) != nil:
			f.addf("racing claims of %s: %v", fmtSlot(s), errors.Join(errs[:]...))
		case won[0] == won[1]:
			f.addf("racing claims of %s: a won %v, b won %v; want exactly one winner", fmtSlot(s), won[0], won[1])
		}
	}
	return f.join()
}

// slotRecorder opens a contention of contender id for mutex on a new backend instance and
// returns it as a SlotRecorder, or errUnsupported when it is none; it is stopped when the
// check ends.
func (e *env) slotRecorder(mutex, id string) (backend.SlotRecorder, error) {
	c, err := e.backend().inner.StartContend(e.ctx, backend.Participant{
		Mutex: mutex, ContenderID: id, TTL: e.cfg.ttl, Transition: e.cfg.transition, Logger: e.logger(),
		Wake: func() {}, Report: func(backend.Record, time.Time) {}, Grant: func(backend.Record, time.Time) {},
	})
	if err != nil {
		return nil, fmt.Errorf("StartContend: %w", err)
	}
	e.cleanup(func() { _ = c.StopContend(context.WithoutCancel(e.ctx)) })
	r, ok := c.(backend.SlotRecorder)
	if !ok {
		return nil, fmt.Errorf("%w (its contentions are no backend.SlotRecorder)", errUnsupported)
	}
	return r, nil
}

// mayRead reports whether LastSlot may read read when last is the last claim that won:
// last itself or, on a quorum (WithMinorityClaims), a later one of the claims tried.
func (e *env) mayRead(read, last backend.Slot, tried []backend.Slot) bool {
	if sameSlot(read, last) {
		return true
	}
	return e.cfg.minorityClaims && laterSlot(read, last) &&
		slices.ContainsFunc(tried, func(s backend.Slot) bool { return sameSlot(s, read) })
}

// laterSlot reports whether a is later than b in the order a quorum's LastSlot picks the
// latest record by: a later instant, or the same instant with a greater token.
func laterSlot(a, b backend.Slot) bool {
	return a.At.After(b.At) || a.At.Equal(b.At) && a.Token > b.Token
}

// sameSlot reports whether a and b name one instant, to the nanosecond, and one token.
func sameSlot(a, b backend.Slot) bool {
	return a.Token == b.Token && a.At.IsZero() == b.At.IsZero() && (a.At.IsZero() || a.At.UnixNano() == b.At.UnixNano())
}

func fmtSlot(s backend.Slot) string {
	if s.At.IsZero() {
		return fmt.Sprintf("{zero, token %d}", s.Token)
	}
	return fmt.Sprintf("{%d ns, token %d}", s.At.UnixNano(), s.Token)
}
