package tck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// checkServiceHandOff: through the root API, a leader's HandOff makes the named waiter
// lead next, not the one that waited longest, with a greater token and never beside it;
// the former leader no longer leads, waits behind the others and leads again once they
// stop. On a store that keeps owner values, a leader whose value the preference rejects
// hands off by itself to the first waiter whose value it accepts. Every service has a
// backend of its own (no probe: it would hide backend.HandOffer). Skipped when the store
// cannot hand off.
func checkServiceHandOff(e *env) error {
	mutex := e.mutex()
	a := newArena()
	start := func(role string, opts ...simba.ServiceOption) (*member, *simba.Service, error) {
		m, c := a.join(mutex, e.id(role))
		s, err := e.service(e.factory(e.t), c, opts...)
		if err != nil {
			return nil, nil, err
		}
		return m, s, start(e.ctx, s)
	}
	ma, sa, err := start("a")
	if err != nil {
		return err
	}
	if err := ma.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	var waiting []*simba.Service // b, then c: the waiting order
	var members []*member
	for _, role := range []string{"b", "c"} {
		m, s, err := start(role)
		if err != nil {
			return err
		}
		if err := seesOwner(e.ctx, s, ma.id); err != nil {
			return err
		}
		waiting, members = append(waiting, s), append(members, m)
	}
	sb, sc, mb, mc := waiting[0], waiting[1], members[0], members[1]
	// c seeing a as the owner is not yet c waiting where the store can tell (a SQL
	// backend's wait-table row, which c's attempt writes within its call's deadline, may
	// be missing on a loaded machine until its next attempt). A hand-off to a contender
	// not listed steps down all the same (ErrNotWaiting), so the check waits for the
	// listing first.
	waits, cancelWaits := e.within(e.cfg.takeoverBound())
	defer cancelWaits()
	if err := e.awaitListed(waits, mutex, mc.id); err != nil {
		return err
	}
	if err := sa.HandOff(waits, mc.id); errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("%w (%v)", errUnsupported, err)
	} else if err != nil {
		return fmt.Errorf("HandOff by the leader to c: %w", err)
	}
	var f findings
	ctx, cancel := e.within(e.cfg.takeoverBound())
	defer cancel()
	if err := mc.waitAcquired(ctx, 1); err != nil {
		return fmt.Errorf("c after the hand-off: %w", err)
	}
	if acq, _ := mb.counts(); acq != 0 {
		f.addf("b, which waited longest, led before the hand-off's c")
	}
	if tc, ta := a.tokenOf(mc.id), a.tokenOf(ma.id); tc <= ta {
		f.addf("c's token %d not greater than a's %d", tc, ta)
	}
	f.expect("HandOff by the former leader", sa.HandOff(e.ctx, mb.id), simba.ErrNotOwner)
	// a queued behind b when it stepped down: b leads next, then a.
	if err := sc.Stop(e.ctx); err != nil {
		return f.join(fmt.Errorf("Stop of c: %w", err))
	}
	if err := mb.waitAcquired(e.ctx, 1); err != nil {
		return f.join(err)
	}
	if acq, _ := ma.counts(); acq != 1 {
		f.addf("a led again before b, which waited before a stepped down")
	}
	if err := sb.Stop(e.ctx); err != nil {
		return f.join(fmt.Errorf("Stop of b: %w", err))
	}
	if err := ma.waitAcquired(e.ctx, 2); err != nil {
		f.add(fmt.Errorf("the former leader after the others stopped: %w", err))
	}
	return f.join(sa.Stop(e.ctx), checkPreference(e), a.err())
}

// awaitListed waits until the store lists id among mutex's waiters, as a hand-off's giver
// would ask, through a contention of its own that it stops again (on a session store it
// queues while it asks); errUnsupported when the store lists none. A start that takes
// longer than a TTL is tried again, as start does.
func (e *env) awaitListed(ctx context.Context, mutex, id string) error {
	b, lister := e.backend().inner, e.id("lister")
	c, err := untilAnswered(ctx, func(ctx context.Context) (backend.Contention, error) {
		sctx, cancel := context.WithTimeout(ctx, e.cfg.ttl)
		defer cancel()
		c, err := b.StartContend(sctx, backend.Participant{
			Mutex: mutex, ContenderID: lister, TTL: e.cfg.ttl, Transition: e.cfg.transition, Logger: e.logger(),
			Wake: func() {}, Report: func(backend.Record, time.Time) {}, Grant: func(backend.Record, time.Time) {},
		})
		if err != nil && sctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", simba.ErrTimeout, err)
		}
		return c, err
	})
	if err != nil {
		return fmt.Errorf("StartContend: %w", err)
	}
	defer func() { _ = c.StopContend(context.WithoutCancel(ctx)) }()
	h, ok := c.(backend.HandOffer)
	if !ok {
		return fmt.Errorf("%w (its contentions are no backend.HandOffer)", errUnsupported)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		waiters, err := h.Waiters(ctx)
		if errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("%w (%v)", errUnsupported, err)
		}
		if err == nil && slices.ContainsFunc(waiters, func(w backend.Waiter) bool { return w.ID == id }) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for the store to list %s among the waiters (last: %v, %v)", id, waiters, err)
		}
	}
}

// checkPreference is checkServiceHandOff's preference part, on a mutex of its own; nil on
// a store that keeps no owner values.
func checkPreference(e *env) error {
	if v, ok := e.factory(e.t).(backend.ValueKeeper); !ok || !v.KeepsValues(backend.Mutex) {
		return nil
	}
	mutex := e.mutex()
	a := newArena()
	prefer := simba.WithPreference(func(v string) bool { return v == "preferred" })
	start := func(role, value string) (*member, *simba.Service, error) {
		m, c := a.join(mutex, e.id(role))
		s, err := e.service(e.factory(e.t), c, simba.WithOwnerValue(value), prefer)
		if err != nil {
			return nil, nil, err
		}
		return m, s, start(e.ctx, s)
	}
	ma, _, err := start("a", "other")
	if err != nil {
		return err
	}
	if err := ma.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	mb, sb, err := start("b", "other")
	if err != nil {
		return err
	}
	if err := seesOwner(e.ctx, sb, ma.id); err != nil {
		return err
	}
	mc, _, err := start("c", "preferred")
	if err != nil {
		return err
	}
	// The leader looks for a preferred waiter at each renewal.
	ctx, cancel := e.within(e.cfg.ttl + e.cfg.takeoverBound())
	defer cancel()
	if err := mc.waitAcquired(ctx, 1); err != nil {
		return fmt.Errorf("preference: the preferred waiter: %w", err)
	}
	if acq, _ := mb.counts(); acq != 0 {
		return fmt.Errorf("preference: b, whose value the preference rejects, led")
	}
	return a.err()
}

// checkSchedulerSlots: a Scheduler on a store that records slots (backend.SlotRecorder)
// claims each slot, so a leader after another's Stop runs only later slots, with tokens
// never less, and the record holds the last run's slot and token, or a later slot its
// tenure claimed as Stop ended it. Skipped when the store records no slots.
func checkSchedulerSlots(e *env) error {
	mutex := e.mutex()
	if _, err := e.slotRecorder(e.mutex(), e.id("probe")); err != nil {
		return err // errUnsupported when the store records no slots
	}
	type run struct {
		who   string
		at    time.Time
		token uint64
	}
	var (
		mu   sync.Mutex
		runs []run
		ran  signal
	)
	scheduler := func(who string) (*simba.Scheduler, error) {
		s, err := simba.NewScheduler(e.factory(e.t), mutex, simba.Schedule{Period: e.cfg.d(50 * time.Millisecond)},
			func(ctx context.Context, leader simba.Owner) {
				at, _ := simba.ScheduledAt(ctx)
				mu.Lock()
				runs = append(runs, run{who, at, leader.Token})
				mu.Unlock()
				ran.notify()
			}, options[simba.SchedulerOption](e, simba.WithContenderID(who))...)
		if err != nil {
			return nil, fmt.Errorf("NewScheduler: %w", err)
		}
		e.cleanup(func() { _ = s.Close() })
		return s, start(e.ctx, s)
	}
	runsOf := func(who string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, r := range runs {
				if r.who == who {
					n++
				}
			}
			return n >= 3
		}
	}
	a, b := e.id("a"), e.id("b")
	sa, err := scheduler(a)
	if err != nil {
		return err
	}
	if err := until(e.ctx, &ran, "three runs of a", runsOf(a)); err != nil {
		return err
	}
	sb, err := scheduler(b)
	if err != nil {
		return err
	}
	if err := sa.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop of a: %w", err)
	}
	if err := until(e.ctx, &ran, "three runs of b", runsOf(b)); err != nil {
		return err
	}
	if err := sb.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop of b: %w", err)
	}
	// Read only now: on a session store the reader's contention joins the queue.
	reader, err := e.slotRecorder(mutex, e.id("reader"))
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	var f findings
	for i := 1; i < len(runs); i++ {
		p, r := runs[i-1], runs[i]
		if !r.at.After(p.at) {
			f.addf("run %d (%s) of slot %v, not after run %d's (%s) of %v", i, r.who, r.at, i-1, p.who, p.at)
		}
		if r.token < p.token {
			f.addf("run %d (%s) with token %d, less than run %d's (%s) %d", i, r.who, r.token, i-1, p.who, p.token)
		}
	}
	last := runs[len(runs)-1]
	want := backend.Slot{At: last.at, Token: last.token}
	got, err := reader.LastSlot(e.ctx)
	switch {
	case err != nil:
		f.addf("LastSlot: %v", err)
	case sameSlot(got, want):
	// b's Stop may end its tenure while the store records b's next claim: the slot is
	// taken and not run (a run starts only while believed), so a later slot with b's
	// token may be the last one recorded.
	case got.Token == want.Token && got.At.After(want.At):
	default:
		f.addf("LastSlot = %s, want the last run's %s (or a later slot of its tenure)", fmtSlot(got), fmtSlot(want))
	}
	return f.join()
}

// seesOwner waits until s names owner as the mutex's owner: its attempt found owner
// leading, so the store counts it among the waiters. A service signals no such change, so
// it is polled.
func seesOwner(ctx context.Context, s *simba.Service, owner string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.Owner().ID != owner {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s to see %s lead", s.ContenderID(), owner)
		}
	}
	return nil
}
