package tck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"
)

// checks is the suite, in order; the non-parallel ones run first and alone.
var checks = []check{
	{name: "goroutine_leaks", run: checkLeaks},
	{name: "lifecycle", parallel: true, run: checkLifecycle},
	{name: "restart", parallel: true, run: checkRestart},
	{name: "guard", parallel: true, run: checkGuard},
	{name: "ten_contenders", parallel: true, run: checkTenContenders},
	{name: "handover_on_stop", parallel: true, run: checkHandOverOnStop},
	{name: "yield", parallel: true, run: checkYield},
	{name: "stop_releases_on_store", parallel: true, run: checkStopReleases},
	{name: "takeover_after_vanish", parallel: true, run: checkTakeover},
	{name: "locker_exclusion", parallel: true, run: checkLockerExclusion},
	{name: "locker_errors", parallel: true, run: checkLockerErrors},
	{name: "lease_lost", parallel: true, run: checkLeaseLost},
	{name: "scheduler", parallel: true, run: checkScheduler},
	{name: "scheduler_stop_waits", parallel: true, run: checkSchedulerStopWaits},
	{name: "fencing", parallel: true, run: checkFencing},
	{name: "stale_lifecycle", parallel: true, run: checkStaleLifecycle},
	{name: "panicking_callback", parallel: true, run: checkPanickingCallback},
	{name: "retriever", parallel: true, run: checkRetriever},
	{name: "lookup", parallel: true, run: checkLookup},
	{name: "owner_value", parallel: true, run: checkOwnerValue},
	{name: "slots", parallel: true, run: checkSlots},
	{name: "wait_list", parallel: true, run: checkWaitList},
	{name: "hand_off", parallel: true, run: checkHandOff},
	{name: "service_hand_off", parallel: true, run: checkServiceHandOff},
	{name: "scheduler_slots", parallel: true, run: checkSchedulerSlots},
	{name: "closed_under_waiter", parallel: true, run: checkClosedUnderWaiter},
	{name: "semaphore_permits", parallel: true, run: checkSemaphorePermits},
	{name: "semaphore_order", parallel: true, run: checkSemaphoreOrder},
	{name: "semaphore_holder_vanishes", parallel: true, run: checkSemaphoreHolderVanishes},
	{name: "semaphore_count", parallel: true, run: checkSemaphoreCount},
	{name: "rwlock_readers", parallel: true, run: checkRWReaders},
	{name: "rwlock_writer_first", parallel: true, run: checkRWWriterFirst},
	{name: "rwlock_downgrade", parallel: true, run: checkRWDowngrade},
}

// duel is two contenders of one mutex, each on its own backend.
type duel struct {
	a      *arena
	ma, mb *member
	pa, pb *probe
	sa, sb *simba.Service
	mutex  string
}

// newDuel creates the two contenders; a's callbacks panic when aPanics.
func (e *env) newDuel(aPanics bool) (*duel, error) {
	d := &duel{a: newArena(), mutex: e.mutex(), pa: e.backend(), pb: e.backend()}
	var ca, cb simba.Contender
	d.ma, ca = d.a.join(d.mutex, e.id("a"))
	d.ma.panics = aPanics
	d.mb, cb = d.a.join(d.mutex, e.id("b"))
	var err error
	if d.sa, err = e.service(d.pa, ca); err != nil {
		return nil, err
	}
	if d.sb, err = e.service(d.pb, cb); err != nil {
		return nil, err
	}
	return d, nil
}

// start starts a, waits until it owns the mutex, then starts b, which waits.
func (d *duel) start(ctx context.Context) error {
	if err := start(ctx, d.sa); err != nil {
		return err
	}
	if err := d.ma.waitAcquired(ctx, 1); err != nil {
		return err
	}
	return start(ctx, d.sb)
}

// locker returns a Locker for mutex on b with the suite's options and a fresh ID, closed
// when the check ends: Close joins what its acquisitions left to finish in the
// background, which would otherwise log to a test that has ended.
func (e *env) locker(b backend.Backend, mutex, role string) (*simba.Locker, error) {
	l, err := simba.NewLocker(b, mutex, options[simba.LockerOption](e, simba.WithContenderID(e.id(role)))...)
	if err != nil {
		return nil, err
	}
	e.cleanup(func() { _ = l.Close() })
	return l, nil
}

// succeed acquires with l within ctx, checks that the new tenure's token is greater than
// prev, and releases.
func succeed(ctx context.Context, l *simba.Locker, prev uint64) error {
	next, err := l.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("the next contender could not acquire: %w", err)
	}
	var errs []error
	if next.Token() <= prev {
		errs = append(errs, fmt.Errorf("successor's token %d not greater than %d", next.Token(), prev))
	}
	if err := next.Release(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("Release: %w", err))
	}
	return errors.Join(errs...)
}

// findings collects what a check found wrong, in order; the check returns them at its end.
type findings []error

// add records err as a finding.
func (f *findings) add(err error) {
	*f = append(*f, err)
}

// addf records a finding.
func (f *findings) addf(format string, args ...any) {
	f.add(fmt.Errorf(format, args...))
}

// expect records a finding for each error of want that err does not match.
func (f *findings) expect(what string, err error, want ...error) {
	for _, w := range want {
		if !errors.Is(err, w) {
			f.addf("%s: got %v, want an error matching %v", what, err, w)
		}
	}
}

// status records a finding unless s is in status want.
func (f *findings) status(s *simba.Service, want simba.Status) {
	if got := s.Status(); got != want {
		f.addf("status %s, want %s", got, want)
	}
}

// join returns the findings followed by more, nil if there are none.
func (f findings) join(more ...error) error {
	return errors.Join(append(f, more...)...)
}

// startOwner starts a new contender of mutex on b, recording into a, and waits until it
// owns the mutex.
func (e *env) startOwner(b backend.Backend, a *arena, mutex, role string) (*member, *simba.Service, error) {
	m, c := a.join(mutex, e.id(role))
	s, err := e.service(b, c)
	if err != nil {
		return nil, nil, err
	}
	if err := start(e.ctx, s); err != nil {
		return nil, nil, fmt.Errorf("Start: %w", err)
	}
	if err := m.waitAcquired(e.ctx, 1); err != nil {
		return nil, nil, err
	}
	return m, s, nil
}

// checkLifecycle: Start and Stop move the status between initial and running, calls in the
// wrong state fail with their sentinel errors, OnReleased is delivered before Stop or Close
// returns, Close is idempotent and final, and of two concurrent Stops one wins.
func checkLifecycle(e *env) error {
	var f findings
	mutex := e.mutex()
	a := newArena()
	if err := lifecycleStartStopClose(e, &f, a, mutex); err != nil {
		return err
	}
	if err := lifecycleCloseWhileRunning(e, &f, a, mutex); err != nil {
		return err
	}
	if err := lifecycleConcurrentStops(e, &f, a, mutex); err != nil {
		return err
	}
	return f.join(a.err())
}

// lifecycleStartStopClose takes one service through Start, Stop and Close, with the calls
// each state refuses.
func lifecycleStartStopClose(e *env, f *findings, a *arena, mutex string) error {
	m, c := a.join(mutex, e.id("c"))
	s, err := e.service(e.backend(), c)
	if err != nil {
		return err
	}
	f.status(s, simba.StatusInitial)
	f.expect("Stop before Start", s.Stop(e.ctx), simba.ErrNotRunning)
	var nilCtx context.Context
	f.expect("Start(nil)", s.Start(nilCtx), simba.ErrInvalidArgument)
	if err := start(e.ctx, s); err != nil {
		return fmt.Errorf("Start: %w", err)
	}
	f.status(s, simba.StatusRunning)
	f.expect("Start while running", s.Start(e.ctx), simba.ErrAlreadyStarted)
	if err := m.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	if !s.IsOwner() {
		f.addf("IsOwner false after OnAcquired of the only contender")
	}
	if err := s.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop: %w", err)
	}
	if _, rel := m.counts(); rel != 1 {
		f.addf("OnReleased delivered %d times before Stop returned, want 1", rel)
	}
	f.status(s, simba.StatusInitial)
	if s.IsOwner() {
		f.addf("IsOwner true after Stop")
	}
	f.expect("Stop twice", s.Stop(e.ctx), simba.ErrNotRunning)
	if err := s.Close(); err != nil {
		f.addf("Close after Stop: %w", err)
	}
	if err := s.Close(); err != nil {
		f.addf("Close twice: %w", err)
	}
	f.expect("Start after Close", s.Start(e.ctx), simba.ErrClosed)
	f.expect("Stop after Close", s.Stop(e.ctx), simba.ErrClosed)
	return nil
}

// lifecycleCloseWhileRunning: Close stops a running service and delivers OnReleased first.
func lifecycleCloseWhileRunning(e *env, f *findings, a *arena, mutex string) error {
	m, s, err := e.startOwner(e.backend(), a, mutex, "c")
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		f.addf("Close while running: %w", err)
	}
	if _, rel := m.counts(); rel != 1 {
		f.addf("Close delivered OnReleased %d times, want 1", rel)
	}
	f.status(s, simba.StatusInitial)
	return nil
}

// lifecycleConcurrentStops: of two concurrent Stops, one succeeds and the other finds the
// service not running; OnReleased is delivered once.
func lifecycleConcurrentStops(e *env, f *findings, a *arena, mutex string) error {
	m, s, err := e.startOwner(e.backend(), a, mutex, "c")
	if err != nil {
		return err
	}
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- s.Stop(e.ctx) }()
	}
	r1, r2 := <-results, <-results
	if (r1 == nil) == (r2 == nil) || !(errors.Is(r1, simba.ErrNotRunning) || errors.Is(r2, simba.ErrNotRunning)) {
		f.addf("concurrent Stops returned %v and %v, want one nil and one ErrNotRunning", r1, r2)
	}
	if _, rel := m.counts(); rel != 1 {
		f.addf("concurrent Stops delivered OnReleased %d times, want 1", rel)
	}
	return nil
}

// checkRestart: a stopped service starts again and acquires a new tenure with a greater
// token; callbacks alternate across lifecycles.
func checkRestart(e *env) error {
	mutex := e.mutex()
	a := newArena()
	m, c := a.join(mutex, e.id("c"))
	s, err := e.service(e.backend(), c)
	if err != nil {
		return err
	}
	var tokens []uint64
	for i := 1; i <= 3; i++ {
		if err := start(e.ctx, s); err != nil {
			return fmt.Errorf("Start #%d: %w", i, err)
		}
		if err := m.waitAcquired(e.ctx, i); err != nil {
			return err
		}
		tokens = append(tokens, a.tokenOf(m.id))
		if err := s.Stop(e.ctx); err != nil {
			return fmt.Errorf("Stop #%d: %w", i, err)
		}
	}
	var errs []error
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			errs = append(errs, fmt.Errorf("restart %d got token %d, not greater than %d", i, tokens[i], tokens[i-1]))
		}
	}
	if acq, rel := m.counts(); acq != 3 || rel != 3 {
		errs = append(errs, fmt.Errorf("3 lifecycles delivered %d OnAcquired and %d OnReleased, want 3 and 3", acq, rel))
	}
	return errors.Join(append(errs, a.err())...)
}

// checkGuard: an owner keeps the mutex across at least five renewals with no callbacks and
// the same token.
func checkGuard(e *env) error {
	const renewals = 5
	a := newArena()
	p := e.backend()
	m, s, err := e.startOwner(p, a, e.mutex(), "owner")
	if err != nil {
		return err
	}
	// An owner renews every ttl - lead (two thirds of the TTL); allow twice that.
	ctx, cancel := e.within(2*renewals*e.cfg.ttl + e.cfg.slack())
	defer cancel()
	if p.isLease() {
		err = until(ctx, &p.changed, fmt.Sprintf("%d renewals", renewals), func() bool {
			return len(p.ownTokens(m.id)) >= renewals+1
		})
		if err != nil {
			return err
		}
	} else if err := e.pause(renewals * e.cfg.ttl); err != nil {
		return err
	}
	var errs []error
	if acq, rel := m.counts(); acq != 1 || rel != 0 {
		errs = append(errs, fmt.Errorf("renewals delivered %d OnAcquired and %d OnReleased, want 1 and 0", acq, rel))
	}
	if !s.IsOwner() {
		errs = append(errs, errors.New("not the owner after renewals"))
	}
	toks := p.ownTokens(m.id)
	for _, tok := range toks {
		if tok != toks[0] {
			errs = append(errs, fmt.Errorf("token changed within one tenure: %v", toks))
			break
		}
	}
	if tok := s.Owner().Token; p.isLease() && tok != toks[0] {
		errs = append(errs, fmt.Errorf("Owner().Token %d, want the tenure's %d", tok, toks[0]))
	}
	if err := s.Stop(e.ctx); err != nil {
		errs = append(errs, fmt.Errorf("Stop: %w", err))
	}
	return errors.Join(append(errs, a.err())...)
}

// checkTenContenders: ten contenders on one mutex for ten TTLs, the owner stopped and
// restarted every two and a half TTLs: at most one believer at any time, an owner found
// again after every change, callbacks alternating.
func checkTenContenders(e *env) error {
	const n = 10
	mutex := e.mutex()
	a := newArena()
	services := make(map[string]*simba.Service, n)
	members := make([]*member, 0, n)
	for i := range n {
		m, c := a.join(mutex, e.id(fmt.Sprintf("c%d", i)))
		s, err := e.service(e.backend(), c)
		if err != nil {
			return err
		}
		services[m.id] = s
		members = append(members, m)
	}
	for _, s := range services {
		if err := start(e.ctx, s); err != nil {
			return fmt.Errorf("Start: %w", err)
		}
	}
	end := time.Now().Add(10 * e.cfg.ttl)
	changes := 0
	for time.Now().Before(end) {
		ctx, cancel := e.within(e.cfg.takeoverBound())
		_, err := a.waitHolder(ctx)
		cancel()
		if err != nil {
			return errors.Join(fmt.Errorf("after %d changes: %w", changes, err), a.err())
		}
		if err := e.pause(5 * e.cfg.ttl / 2); err != nil {
			return err
		}
		// Stop the owner (whoever it is now) and start it again as a contender.
		holder := a.currentHolder()
		if holder == "" {
			continue
		}
		s := services[holder]
		if err := s.Stop(e.ctx); err != nil {
			return fmt.Errorf("Stop %s: %w", holder, err)
		}
		if err := start(e.ctx, s); err != nil {
			return fmt.Errorf("restart %s: %w", holder, err)
		}
		changes++
	}
	var errs []error
	for _, s := range services {
		if err := s.Stop(e.ctx); err != nil {
			errs = append(errs, fmt.Errorf("Stop: %w", err))
		}
	}
	for _, m := range members {
		if acq, rel := m.counts(); acq != rel {
			errs = append(errs, fmt.Errorf("%s: %d OnAcquired but %d OnReleased after Stop", m.id, acq, rel))
		}
	}
	if got := a.tenureCount(); got < changes {
		errs = append(errs, fmt.Errorf("%d tenures for %d forced changes", got, changes))
	}
	e.t.Logf("ten contenders: %d tenures in %v", a.tenureCount(), 10*e.cfg.ttl)
	return errors.Join(append(errs, a.err())...)
}

// checkHandOverOnStop: when the owner stops, a waiting contender takes over; the latency
// is logged (fast with wake-ups, at most a contend period without).
func checkHandOverOnStop(e *env) error {
	d, err := e.newDuel(false)
	if err != nil {
		return err
	}
	if err := d.start(e.ctx); err != nil {
		return err
	}
	// b makes its first, failed attempt and waits.
	if err := d.pb.waitAttempt(e.ctx); err != nil {
		return err
	}
	began := time.Now()
	if err := d.sa.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop owner: %w", err)
	}
	bound := e.cfg.takeoverBound()
	ctx, cancel := e.within(bound)
	defer cancel()
	if err := d.mb.waitAcquired(ctx, 1); err != nil {
		return fmt.Errorf("no hand-over within %v after Stop: %w", bound, err)
	}
	e.t.Logf("hand-over on Stop took %v", time.Since(began))
	var errs []error
	if tb, ta := d.a.tokenOf(d.mb.id), d.a.tokenOf(d.ma.id); tb <= ta {
		errs = append(errs, fmt.Errorf("successor's token %d not greater than %d", tb, ta))
	}
	if err := d.sb.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, d.a.err())...)
}

// checkYield: when the owner yields, a waiting contender takes over (after the owner's
// OnReleased, with a greater token), and the yielder goes on contending: it leads again
// once the other stops.
func checkYield(e *env) error {
	d, err := e.newDuel(false)
	if err != nil {
		return err
	}
	if err := d.start(e.ctx); err != nil {
		return err
	}
	if err := d.pb.waitAttempt(e.ctx); err != nil {
		return err
	}
	var f findings
	f.expect("Yield by a contender that does not lead", d.sb.Yield(e.ctx), simba.ErrNotOwner)
	began := time.Now()
	if err := d.sa.Yield(e.ctx); err != nil {
		return fmt.Errorf("Yield: %w", err)
	}
	bound := e.cfg.takeoverBound()
	ctx, cancel := e.within(bound)
	defer cancel()
	if err := d.mb.waitAcquired(ctx, 1); err != nil {
		return fmt.Errorf("no hand-over within %v after Yield: %w", bound, err)
	}
	e.t.Logf("hand-over on Yield took %v", time.Since(began))
	if tb, ta := d.a.tokenOf(d.mb.id), d.a.tokenOf(d.ma.id); tb <= ta {
		f.addf("successor's token %d not greater than %d", tb, ta)
	}
	f.status(d.sa, simba.StatusRunning)
	if err := d.sb.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop: %w", err)
	}
	ctx, cancel = e.within(bound)
	defer cancel()
	if err := d.ma.waitAcquired(ctx, 2); err != nil {
		f.add(fmt.Errorf("the yielder did not lead again within %v after the other stopped: %w", bound, err))
	}
	return f.join(d.sa.Stop(e.ctx), d.a.err())
}

// checkStopReleases: once Stop returns, the store no longer names the contender: a single
// acquire attempt by someone else succeeds at once.
func checkStopReleases(e *env) error {
	mutex := e.mutex()
	a := newArena()
	m, c := a.join(mutex, e.id("a"))
	s, err := e.service(e.backend(), c)
	if err != nil {
		return err
	}
	other, err := e.locker(e.backend(), mutex, "b")
	if err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := start(e.ctx, s); err != nil {
			return err
		}
		if err := m.waitAcquired(e.ctx, i); err != nil {
			return err
		}
		if err := s.Stop(e.ctx); err != nil {
			return fmt.Errorf("Stop: %w", err)
		}
		lease, err := untilAnswered(e.ctx, other.TryAcquire)
		if err != nil {
			return fmt.Errorf("after Stop returned, another contender could not acquire (the store was not released): %w", err)
		}
		if err := lease.Release(e.ctx); err != nil {
			return fmt.Errorf("Release: %w", err)
		}
	}
	return a.err()
}

// checkTakeover: when the owner vanishes without releasing, it stops believing by its local
// TTL end, and a waiter acquires within ttl + transition + jitter + slack, with a greater
// token.
func checkTakeover(e *env) error {
	d, err := e.newDuel(false)
	if err != nil {
		return err
	}
	if err := d.start(e.ctx); err != nil {
		return err
	}
	vanished := time.Now()
	if err := d.pa.vanish(); err != nil {
		return err
	}
	var errs []error
	lossBound := e.cfg.ttl + e.cfg.slack()
	ctx, cancel := e.within(lossBound)
	defer cancel()
	if err := d.ma.waitReleased(ctx, 1); err != nil {
		errs = append(errs, fmt.Errorf("vanished owner still believed %v later: %w", lossBound, err))
	} else {
		e.t.Logf("vanished owner stopped believing after %v", time.Since(vanished))
	}
	bound := e.cfg.takeoverBound()
	ctx2, cancel2 := context.WithDeadline(e.ctx, vanished.Add(bound))
	defer cancel2()
	if err := d.mb.waitAcquired(ctx2, 1); err != nil {
		errs = append(errs, fmt.Errorf("no take-over within %v of the owner vanishing: %w", bound, err))
	} else {
		e.t.Logf("take-over after vanish took %v (bound %v)", time.Since(vanished), bound)
		if tb, ta := d.a.tokenOf(d.mb.id), d.a.tokenOf(d.ma.id); tb <= ta {
			errs = append(errs, fmt.Errorf("successor's token %d not greater than the vanished owner's %d", tb, ta))
		}
	}
	_ = d.sa.Stop(e.ctx) // its store calls fail; the lease has lapsed anyway
	if err := d.sb.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, d.a.err())...)
}

// checkLockerExclusion: eight goroutines, each with a Locker on its own backend, take turns;
// an in-section counter catches any overlap and tokens increase in acquisition order.
func checkLockerExclusion(e *env) error {
	const goroutines, rounds = 8, 3
	mutex := e.mutex()
	var (
		inSection atomic.Int32
		mu        sync.Mutex
		lastToken uint64
		errs      []error
	)
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	lockers := make([]*simba.Locker, goroutines)
	for i := range lockers {
		l, err := e.locker(e.backend(), mutex, fmt.Sprintf("g%d", i))
		if err != nil {
			return err
		}
		lockers[i] = l
	}
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Go(func() {
			for range rounds {
				lease, err := l.Acquire(e.ctx)
				if err != nil {
					report(fmt.Errorf("Acquire: %w", err))
					return
				}
				if n := inSection.Add(1); n != 1 {
					report(fmt.Errorf("overlap: %d holders in the critical section", n))
				}
				mu.Lock()
				if lease.Token() <= lastToken {
					errs = append(errs, fmt.Errorf("token %d not greater than the previous holder's %d", lease.Token(), lastToken))
				}
				lastToken = lease.Token()
				mu.Unlock()
				select {
				case <-time.After(2 * time.Millisecond):
				case <-lease.Done():
					report(fmt.Errorf("lease lost while held: %v", context.Cause(lease.Context())))
				}
				inSection.Add(-1)
				if err := lease.Release(e.ctx); err != nil {
					report(fmt.Errorf("Release: %w", err))
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkLockerErrors: the Locker's error identities.
func checkLockerErrors(e *env) error {
	mutex := e.mutex()
	var f findings
	l1, err := e.locker(e.backend(), mutex, "l1")
	if err != nil {
		return err
	}
	p2 := e.backend()
	l2, err := e.locker(p2, mutex, "l2")
	if err != nil {
		return err
	}
	held, err := l1.Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	err = e.keep(l1.Acquire(e.ctx))
	f.expect("Acquire while holding", err, simba.ErrAlreadyHeld)
	err = e.keep(untilAnswered(e.ctx, l2.TryAcquire))
	f.expect("TryAcquire of a held mutex", err, simba.ErrNotAcquired)

	timeout := e.cfg.ttl / 5
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	deadline, _ := ctx.Deadline()
	began := time.Now()
	err = e.keep(l2.Acquire(ctx))
	cancel()
	f.expect("Acquire past its deadline", err, simba.ErrNotAcquired, context.DeadlineExceeded)
	// Measured against the deadline itself: began comes a moment after it was set.
	if early := time.Until(deadline); early > 0 {
		f.addf("Acquire with a %v deadline gave up %v before it", timeout, early)
	} else {
		e.t.Logf("Acquire with a %v deadline returned after %v", timeout, time.Since(began))
	}

	starts := p2.startCount()
	cancelled, cancelNow := context.WithCancel(e.ctx)
	cancelNow()
	err = e.keep(l2.Acquire(cancelled))
	f.expect("Acquire with a cancelled context", err, simba.ErrNotAcquired, context.Canceled)
	if p2.startCount() != starts {
		f.addf("Acquire with a cancelled context touched the store")
	}
	var nilCtx context.Context
	err = e.keep(l2.Acquire(nilCtx))
	f.expect("Acquire(nil)", err, simba.ErrInvalidArgument)

	if err := held.Release(e.ctx); err != nil {
		f.addf("Release: %w", err)
	}
	f.expect("Release twice", held.Release(e.ctx), simba.ErrNotOwner)
	var none *simba.Lease
	f.expect("Release of a nil lease", none.Release(e.ctx), simba.ErrNotOwner)

	// The released mutex is free at once: a single attempt acquires it.
	tctx, cancelTry := context.WithTimeout(e.ctx, e.cfg.ttl/5)
	defer cancelTry()
	if err := succeed(tctx, l2, held.Token()); err != nil {
		f.addf("after release: %w", err)
	}
	return f.join()
}

// checkLeaseLost: the lease's context ends, with cause ErrOwnershipLost, when its holder
// vanishes, by its local TTL end; Release then reports the loss.
func checkLeaseLost(e *env) error {
	mutex := e.mutex()
	p := e.backend()
	l, err := e.locker(p, mutex, "holder")
	if err != nil {
		return err
	}
	lease, err := l.Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	vanished := time.Now()
	if err := p.vanish(); err != nil {
		return err
	}
	bound := e.cfg.ttl + e.cfg.slack()
	var errs []error
	select {
	case <-lease.Done():
		e.t.Logf("lease context ended %v after the holder vanished", time.Since(vanished))
		if cause := context.Cause(lease.Context()); !errors.Is(cause, simba.ErrOwnershipLost) {
			errs = append(errs, fmt.Errorf("lease context cause %v, want ErrOwnershipLost", cause))
		}
	case <-time.After(bound):
		errs = append(errs, fmt.Errorf("lease context still live %v after the holder vanished", bound))
	}
	if err := lease.Release(e.ctx); !errors.Is(err, simba.ErrOwnershipLost) {
		errs = append(errs, fmt.Errorf("Release of a lost lease: got %v, want ErrOwnershipLost", err))
	}
	other, err := e.locker(e.backend(), mutex, "next")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(e.ctx, vanished.Add(e.cfg.takeoverBound()))
	defer cancel()
	if err := succeed(ctx, other, lease.Token()); err != nil {
		errs = append(errs, fmt.Errorf("after the holder vanished: %w", err))
	}
	return errors.Join(errs...)
}

// checkScheduler: scheduled work runs only on the leader, never twice at once, and stops
// when the leader vanishes; another scheduler takes over.
func checkScheduler(e *env) error {
	runs := newRunLog(3)
	probes, scheds, err := startSchedulers(e, runs)
	if err != nil {
		return err
	}
	leader, err := runs.waitRuns(e.ctx, "three runs of one scheduler", 3, -1)
	if err != nil {
		return err
	}
	runs.onlyLeaderRan(leader)
	vanished := time.Now()
	if err := probes[leader].vanish(); err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(e.ctx, vanished.Add(e.cfg.takeoverBound()))
	defer cancel()
	successor, err := runs.waitRuns(ctx, "another scheduler to run twice", 2, leader)
	if err != nil {
		return runs.join(err)
	}
	e.t.Logf("scheduler %d took over %v after %d vanished", successor, time.Since(vanished), leader)
	runs.noRunsAfter(leader, vanished, e.cfg.ttl)
	for i, s := range scheds {
		if i == leader {
			continue
		}
		if err := s.Stop(e.ctx); err != nil {
			runs.add(err)
		}
	}
	return runs.join()
}

// startSchedulers starts runs.schedulers schedulers of a new mutex, each on a backend of
// its own, whose work records into runs.
func startSchedulers(e *env, runs *runLog) ([]*probe, []*simba.Scheduler, error) {
	mutex := e.mutex()
	period := e.cfg.ttl / 5
	probes := make([]*probe, runs.schedulers)
	scheds := make([]*simba.Scheduler, runs.schedulers)
	for i := range runs.schedulers {
		probes[i] = e.backend()
		s, err := simba.NewScheduler(probes[i], mutex, simba.Schedule{Period: period}, runs.work(i),
			options[simba.SchedulerOption](e, simba.WithContenderID(e.id(fmt.Sprintf("s%d", i))))...)
		if err != nil {
			return nil, nil, err
		}
		scheds[i] = s
		e.cleanup(func() { _ = s.Close() })
	}
	for _, s := range scheds {
		if err := start(e.ctx, s); err != nil {
			return nil, nil, err
		}
	}
	return probes, scheds, nil
}

// runLog records when the work of each of several schedulers of one mutex ran, and what
// was found wrong, such as two runs at once.
type runLog struct {
	schedulers int
	running    atomic.Int32
	changed    signal

	mu   sync.Mutex
	runs map[int][]time.Time
	errs findings
}

func newRunLog(schedulers int) *runLog {
	return &runLog{schedulers: schedulers, runs: map[int][]time.Time{}}
}

// work returns scheduler i's work: it records its run.
func (r *runLog) work(i int) func(context.Context, simba.Owner) {
	return func(context.Context, simba.Owner) {
		if k := r.running.Add(1); k != 1 {
			r.add(fmt.Errorf("%d scheduled runs at once", k))
		}
		defer r.running.Add(-1)
		r.mu.Lock()
		r.runs[i] = append(r.runs[i], time.Now())
		r.mu.Unlock()
		r.changed.notify()
	}
}

func (r *runLog) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *runLog) count(i int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs[i])
}

// waitRuns waits until a scheduler other than except has run at least n times and
// returns it.
func (r *runLog) waitRuns(ctx context.Context, what string, n, except int) (int, error) {
	found := -1
	err := until(ctx, &r.changed, what, func() bool {
		for i := range r.schedulers {
			if i != except && r.count(i) >= n {
				found = i
				return true
			}
		}
		return false
	})
	return found, err
}

// onlyLeaderRan records a finding for every other scheduler that has run.
func (r *runLog) onlyLeaderRan(leader int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.schedulers {
		if i != leader && len(r.runs[i]) > 0 {
			r.errs.addf("scheduler %d ran while %d led", i, leader)
		}
	}
}

// noRunsAfter records a finding for every run of scheduler i later than ttl after it
// vanished, past its local TTL end.
func (r *runLog) noRunsAfter(i int, vanished time.Time, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.runs[i] {
		if at.After(vanished.Add(ttl)) {
			r.errs.addf("vanished leader ran %v after it vanished, past its local TTL end", at.Sub(vanished))
		}
	}
}

// join returns the findings followed by more, nil if there are none.
func (r *runLog) join(more ...error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs.join(more...)
}

// checkSchedulerStopWaits: Stop cancels the running work's context and returns only after
// the work has returned.
func checkSchedulerStopWaits(e *env) error {
	started := make(chan struct{}, 1)
	var returned atomic.Bool
	work := func(ctx context.Context, _ simba.Owner) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		returned.Store(true)
	}
	s, err := simba.NewScheduler(e.backend(), e.mutex(), simba.Schedule{Period: time.Hour}, work,
		options[simba.SchedulerOption](e, simba.WithContenderID(e.id("s")))...)
	if err != nil {
		return err
	}
	e.cleanup(func() { _ = s.Close() })
	if err := start(e.ctx, s); err != nil {
		return err
	}
	select {
	case <-started:
	case <-e.ctx.Done():
		return errors.New("scheduled work never started")
	}
	if err := s.Stop(e.ctx); err != nil {
		return err
	}
	if !returned.Load() {
		return errors.New("Stop returned before the running work returned")
	}
	return nil
}

// checkFencing: tokens strictly increase over a sequence of tenures of different
// contenders and stay the same within one.
func checkFencing(e *env) error {
	mutex := e.mutex()
	var errs []error
	var last uint64
	lockers := make([]*simba.Locker, 3)
	for i := range lockers {
		l, err := e.locker(e.backend(), mutex, fmt.Sprintf("l%d", i))
		if err != nil {
			return err
		}
		lockers[i] = l
	}
	for round := range 6 {
		lease, err := lockers[round%len(lockers)].Acquire(e.ctx)
		if err != nil {
			return fmt.Errorf("Acquire: %w", err)
		}
		if lease.Token() <= last {
			errs = append(errs, fmt.Errorf("tenure %d got token %d, not greater than %d", round, lease.Token(), last))
		}
		last = lease.Token()
		if err := lease.Release(e.ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkStaleLifecycle: an acquisition whose answer arrives after Stop began is not delivered
// and is released on the store; reports and wake-ups of an ended lifecycle change nothing
// in a later one.
func checkStaleLifecycle(e *env) error {
	mutex := e.mutex()
	a := newArena()
	m, c := a.join(mutex, e.id("a"))
	p := e.backend()
	s, err := e.service(p, c)
	if err != nil {
		return err
	}
	var f findings
	// Lifecycle 1: an ordinary tenure.
	if err := start(e.ctx, s); err != nil {
		return err
	}
	if err := m.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	if err := s.Stop(e.ctx); err != nil {
		return err
	}
	if p.isLease() {
		if err := lateAnswerIsUndone(e, &f, s, m, p, mutex); err != nil {
			return err
		}
	}
	// The last lifecycle: the first one's hooks must not reach it.
	if err := start(e.ctx, s); err != nil {
		return err
	}
	if err := m.waitAcquired(e.ctx, 2); err != nil {
		return f.join(err)
	}
	old := p.participant(0)
	old.Report(backend.Record{Owner: "tck-ghost", Token: 1 << 62, TTL: time.Hour, Transition: time.Hour}, time.Now())
	old.Report(backend.Record{}, time.Now())
	old.Wake()
	if !s.IsOwner() {
		f.addf("a report of an ended lifecycle ended the current tenure")
	}
	if s.Owner().ID == "tck-ghost" {
		f.addf("a report of an ended lifecycle changed the owner")
	}
	if err := s.Stop(e.ctx); err != nil {
		f.add(err)
	}
	if acq, rel := m.counts(); acq != 2 || rel != 2 {
		f.addf("%d OnAcquired and %d OnReleased, want 2 each", acq, rel)
	}
	return f.join(a.err())
}

// lateAnswerIsUndone runs a lifecycle of s whose acquire's answer arrives only after Stop
// began: the acquisition must be neither delivered to m nor left on the store.
func lateAnswerIsUndone(e *env, f *findings, s *simba.Service, m *member, p *probe, mutex string) error {
	p.lateNext.Store(true)
	if err := start(e.ctx, s); err != nil {
		return err
	}
	err := until(e.ctx, &p.changed, "the late acquire to be under way", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.lateWaiting
	})
	if err != nil {
		return err
	}
	if err := s.Stop(e.ctx); err != nil {
		return fmt.Errorf("Stop with a late acquisition in flight: %w", err)
	}
	if acq, _ := m.counts(); acq != 1 {
		f.addf("a late acquisition of an ended lifecycle was delivered (%d OnAcquired)", acq)
	}
	other, err := e.locker(e.backend(), mutex, "b")
	if err != nil {
		return err
	}
	l, err := untilAnswered(e.ctx, other.TryAcquire)
	if err != nil {
		f.addf("a late acquisition of an ended lifecycle was left on the store: %w", err)
	} else if err := l.Release(e.ctx); err != nil {
		f.add(err)
	}
	return nil
}

// checkPanickingCallback: callbacks that panic are recovered; the owner keeps renewing,
// Stop still works and hands over.
func checkPanickingCallback(e *env) error {
	d, err := e.newDuel(true)
	if err != nil {
		return err
	}
	if err := d.start(e.ctx); err != nil {
		return err
	}
	// Across two TTLs the owner must renew: its belief would end at its local TTL end.
	if err := e.pause(2 * e.cfg.ttl); err != nil {
		return err
	}
	var errs []error
	if !d.sa.IsOwner() {
		errs = append(errs, errors.New("after a panicking OnAcquired the owner did not keep the mutex"))
	}
	if err := d.sa.Stop(e.ctx); err != nil {
		errs = append(errs, fmt.Errorf("Stop after panicking callbacks: %w", err))
	}
	ctx, cancel := e.within(e.cfg.takeoverBound())
	defer cancel()
	if err := d.mb.waitAcquired(ctx, 1); err != nil {
		errs = append(errs, fmt.Errorf("no hand-over after the panicking owner stopped: %w", err))
	}
	if err := d.sb.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, d.a.err())...)
}

// checkRetriever: a retriever sees every change of owner and nothing after Stop.
func checkRetriever(e *env) error {
	d, err := e.newDuel(false)
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		seen   []simba.State
		change signal
	)
	r := simba.RetrieverFunc{MutexName: d.mutex, Notify: func(s simba.State) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		change.notify()
	}}
	rs, err := simba.NewRetrievalService(e.backend(), r, options[simba.Option](e)...)
	if err != nil {
		return err
	}
	e.cleanup(func() { _ = rs.Close() })
	if err := start(e.ctx, rs); err != nil {
		return err
	}
	sees := func(id string) error {
		ctx, cancel := e.within(e.cfg.takeoverBound())
		defer cancel()
		return until(ctx, &change, "the retriever to see "+id, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) > 0 && seen[len(seen)-1].After.ID == id
		})
	}
	if err := d.start(e.ctx); err != nil {
		return err
	}
	if err := sees(d.ma.id); err != nil {
		return err
	}
	if err := d.sa.Stop(e.ctx); err != nil {
		return err
	}
	if err := d.mb.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	if err := sees(d.mb.id); err != nil {
		return err
	}
	if got := rs.Owner().ID; got != d.mb.id {
		return fmt.Errorf("retriever's Owner() is %q, want %q", got, d.mb.id)
	}
	var errs []error
	mu.Lock()
	for _, s := range seen {
		if !s.Changed() {
			errs = append(errs, fmt.Errorf("retriever notified of a non-change %v", s))
		}
	}
	mu.Unlock()
	if err := rs.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if err := d.sb.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	mu.Lock()
	if len(seen) != n {
		errs = append(errs, errors.New("retriever notified after Stop"))
	}
	mu.Unlock()
	return errors.Join(append(errs, d.a.err())...)
}

// checkLookup: simba.Lookup reads the owner once, without a service: nobody, then a
// Locker's (with the lease's token, where the store tells it to a reader), then nobody
// again once the lease is released.
func checkLookup(e *env) error {
	mutex := e.mutex()
	b := e.backend()
	look := func(when string) (simba.Owner, error) {
		o, err := untilAnswered(e.ctx, func(ctx context.Context) (simba.Owner, error) {
			return simba.Lookup(ctx, b, mutex, options[simba.Option](e)...)
		})
		if err != nil {
			return o, fmt.Errorf("Lookup %s: %w", when, err)
		}
		return o, nil
	}
	if o, err := look("before any use"); err != nil || !o.IsZero() {
		return errors.Join(err, nonZero(o))
	}
	l, err := e.locker(e.backend(), mutex, "holder")
	if err != nil {
		return err
	}
	e.cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(e.ctx)
	if err != nil {
		return err
	}
	o, err := look("while held")
	if err != nil {
		return err
	}
	var errs []error
	if o.ID != l.ContenderID() {
		errs = append(errs, fmt.Errorf("Lookup while held names %q, want %q", o.ID, l.ContenderID()))
	}
	if o.Token != 0 && o.Token != lease.Token() {
		errs = append(errs, fmt.Errorf("Lookup while held tells token %d, the lease has %d", o.Token, lease.Token()))
	}
	if !o.HasOwner(time.Now()) {
		errs = append(errs, fmt.Errorf("Lookup while held: the record %v has lapsed already", o))
	}
	if err := lease.Release(e.ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if o, err := look("after release"); err != nil || !o.IsZero() {
		errs = append(errs, err, nonZero(o))
	}
	return errors.Join(errs...)
}

// nonZero returns an error when a lookup that should find no owner found o.
func nonZero(o simba.Owner) error {
	if o.IsZero() {
		return nil
	}
	return fmt.Errorf("Lookup found %v, want no owner", o)
}

// useEveryWay is one round of the leak check on a new mutex: a retriever watches while a
// service owns it, a Locker gives up waiting, then acquires and releases, and a scheduler
// runs once.
func useEveryWay(e *env, backends [4]*probe) error {
	mutex := e.mutex()
	a := newArena()
	m, c := a.join(mutex, e.id("c"))
	s, err := e.service(backends[0], c)
	if err != nil {
		return err
	}
	rs, err := simba.NewRetrievalService(backends[1], simba.RetrieverFunc{MutexName: mutex}, options[simba.Option](e)...)
	if err != nil {
		return err
	}
	if err := start(e.ctx, rs); err != nil {
		return err
	}
	if err := lockAfterService(e, s, m, backends[2], mutex); err != nil {
		return err
	}
	if err := scheduleOnce(e, backends[3], mutex); err != nil {
		return err
	}
	if err := rs.Stop(e.ctx); err != nil {
		return err
	}
	return a.err()
}

// lockAfterService starts s and waits until its contender m owns mutex, lets a Locker on b
// give up waiting for it, stops s, and has the Locker acquire and release.
func lockAfterService(e *env, s *simba.Service, m *member, b *probe, mutex string) error {
	if err := start(e.ctx, s); err != nil {
		return err
	}
	if err := m.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	l, err := e.locker(b, mutex, "l")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.ttl/10)
	err = e.keep(l.Acquire(ctx)) // times out: s holds the mutex
	cancel()
	if !errors.Is(err, simba.ErrNotAcquired) {
		return fmt.Errorf("Acquire of a held mutex: %v", err)
	}
	if err := s.Stop(e.ctx); err != nil {
		return err
	}
	lease, err := l.Acquire(e.ctx)
	if err != nil {
		return err
	}
	return lease.Release(e.ctx)
}

// scheduleOnce starts a scheduler of mutex on b, waits for its work's first run and stops it.
func scheduleOnce(e *env, b *probe, mutex string) error {
	ran := make(chan struct{}, 1)
	sched, err := simba.NewScheduler(b, mutex, simba.Schedule{Period: time.Hour},
		func(context.Context, simba.Owner) {
			select {
			case ran <- struct{}{}:
			default:
			}
		}, options[simba.SchedulerOption](e, simba.WithContenderID(e.id("s")))...)
	if err != nil {
		return err
	}
	if err := start(e.ctx, sched); err != nil {
		return err
	}
	select {
	case <-ran:
	case <-e.ctx.Done():
		return errors.New("scheduler never ran")
	}
	return sched.Stop(e.ctx)
}

// checkWaitList: a backend whose contentions implement backend.WaitList tells the owner
// whether other contenders wait: no one at first, the waiter once it has tried, and no one
// again once the waiter stopped. Backends without it pass.
func checkWaitList(e *env) error {
	d, err := e.newDuel(false)
	if err != nil {
		return err
	}
	if err := start(e.ctx, d.sa); err != nil {
		return err
	}
	if err := d.ma.waitAcquired(e.ctx, 1); err != nil {
		return err
	}
	wl, ok := d.pa.waitList()
	if !ok {
		e.t.Log("the backend's contentions do not implement backend.WaitList")
		return d.sa.Stop(e.ctx)
	}
	ask := func(want bool, when string) error {
		got, err := wl.OthersWaiting(e.ctx)
		if err != nil {
			return fmt.Errorf("OthersWaiting %s: %w", when, err)
		}
		if got != want {
			return fmt.Errorf("OthersWaiting %s = %v, want %v", when, got, want)
		}
		return nil
	}
	var errs []error
	if err := ask(false, "with no other contender"); err != nil {
		errs = append(errs, err)
	}
	if err := start(e.ctx, d.sb); err != nil {
		return err
	}
	if err := d.pb.waitAttempt(e.ctx); err != nil {
		return err
	}
	if err := ask(true, "while another contender waits"); err != nil {
		errs = append(errs, err)
	}
	if err := d.sb.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	if err := ask(false, "after the waiter stopped"); err != nil {
		errs = append(errs, err)
	}
	if err := d.sa.Stop(e.ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, d.a.err())...)
}

// checkClosedUnderWaiter: a Locker that waits for its turn when its backend is closed ends
// at once with an error matching ErrClosed (Participant.Closed), not at its context's end
// or at its next attempt.
func checkClosedUnderWaiter(e *env) error {
	mutex := e.mutex()
	// The owner's lease is long, so that a waiter that only found out at its next attempt
	// (due when that lease would lapse) would still be waiting when the check gives up.
	owner, err := simba.NewLocker(e.backend(), mutex, options[simba.LockerOption](e, simba.WithContenderID(e.id("owner")),
		simba.WithTTL(time.Minute), simba.WithTransition(time.Minute))...)
	if err != nil {
		return err
	}
	defer owner.Close()
	held, err := owner.Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	defer held.Release(context.WithoutCancel(e.ctx))
	p := e.backend()
	closer, ok := p.inner.(interface{ Close() error })
	if !ok {
		return nil // a backend without Close cannot be closed under a waiter
	}
	id := e.id("waiter")
	seen, waiting := observeWaiting(p, id)
	l, err := simba.NewLocker(p, mutex, options[simba.LockerOption](e, simba.WithContenderID(id), seen)...)
	if err != nil {
		return err
	}
	defer l.Close()
	got := acquireInBackground(e.ctx, l)
	select {
	case <-waiting:
	case err := <-got:
		return fmt.Errorf("the waiter returned before it waited: %v", err)
	case <-e.ctx.Done():
		return fmt.Errorf("the waiter did not begin to wait: %w", e.ctx.Err())
	}
	if err := closer.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, simba.ErrClosed) || !errors.Is(err, simba.ErrNotAcquired) {
			return fmt.Errorf("the waiter's Acquire returned %v, want an error matching ErrClosed and ErrNotAcquired", err)
		}
	case <-time.After(5 * time.Second):
		return errors.New("the waiter still waits 5s after its backend was closed")
	}
	// Close releases nothing on the store: the owner's release may grant the mutex to the
	// closed waiter, still registered, and that grant lapses by its lease. The check waits
	// for it, leaving the store as clean as the other checks do.
	if err := held.Release(e.ctx); err != nil {
		return fmt.Errorf("owner's Release: %w", err)
	}
	return awaitNoOwner(e, mutex)
}

// awaitNoOwner polls simba.Lookup until mutex has no owner, or fails when the check's
// deadline passes.
func awaitNoOwner(e *env, mutex string) error {
	b := e.backend()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		o, err := simba.Lookup(e.ctx, b, mutex, options[simba.Option](e)...)
		if err == nil && o.IsZero() {
			return nil
		}
		select {
		case <-tick.C:
		case <-e.ctx.Done():
			return fmt.Errorf("the mutex still has an owner (%+v, %v) at the check's deadline", o, err)
		}
	}
}

// observeWaiting returns an observer option for contender id on p and a channel closed
// once the contender waits: its first look found the owner (a session store reports it
// before StartContend returns), or an attempt named the owner (a lease store).
func observeWaiting(p *probe, id string) (simba.Option, <-chan struct{}) {
	waiting := make(chan struct{})
	var once sync.Once
	return simba.WithObserver(observe.Funcs{Call: func(c observe.Call) {
		if c.Err == nil && (c.Op == observe.OpStart && !p.isLease() || c.Op == observe.OpAcquire && c.Owner != "" && c.Owner != id) {
			once.Do(func() { close(waiting) })
		}
	}}), waiting
}

// acquireInBackground acquires with l and sends the error on the returned channel; a lease
// it gets is released at once.
func acquireInBackground(ctx context.Context, l *simba.Locker) <-chan error {
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx)
		if err == nil {
			_ = lease.Release(context.WithoutCancel(ctx))
		}
		got <- err
	}()
	return got
}
