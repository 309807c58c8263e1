package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba"
)

// Op is one operation of a run. Which operations a seed makes depends on the seed only;
// what an operation acts on is decided when it runs (Release takes the N-th hold there
// is, if any), so that any subset of a seed's operations can be run again.
type Op struct {
	Kind  OpKind
	Proc  int           // the process
	Mutex int           // the mutex, by index
	N     int           // a choice: which hold or call, which holder, which fault, a flag
	D     time.Duration // a deadline (0: none), a fault's, a pause's or a sleep's length
}

// OpKind says what an Op does.
type OpKind int

// The operations, and how often a seed picks each.
const (
	OpSleep OpKind = iota
	OpLockerAcquire
	OpLockerTry
	OpLockerRelease
	OpLockerClose
	OpMutexesAcquire
	OpMutexesTry
	OpMutexesRelease
	OpMutexesClose
	OpMutexesCrowd
	OpHandOverRace
	OpServiceStart
	OpServiceStop
	OpServiceRun
	OpServiceClose
	OpSchedulerStart
	OpSchedulerStop
	OpCancel
	OpFault
	OpPause
	OpCrash
	OpSemAcquire
	OpSemTry
	OpSemRelease
	OpRWLock
	OpRWRLock
	OpRWRelease
	OpRWDowngrade
	OpHoldsClose
	opKinds
)

var opNames = [opKinds]string{"sleep", "locker-acquire", "locker-try", "locker-release", "locker-close",
	"mutexes-acquire", "mutexes-try", "mutexes-release", "mutexes-close", "mutexes-crowd", "hand-over-race", "service-start", "service-stop",
	"service-run", "service-close", "scheduler-start", "scheduler-stop", "cancel", "fault", "pause", "crash",
	"semaphore-acquire", "semaphore-try", "semaphore-release", "rw-lock", "rw-rlock", "rw-release", "rw-downgrade", "holds-close"}

var opWeights = [opKinds]int{24, 10, 5, 10, 1, 12, 6, 12, 1, 3, 4, 3, 3, 2, 1, 2, 2, 5, 4, 3, 1, 6, 3, 6, 4, 5, 7, 3, 1}

func (k OpKind) String() string { return opNames[k] }

func (o Op) String() string {
	if o.Kind == OpSleep {
		return fmt.Sprintf("sleep %v", o.D)
	}
	return fmt.Sprintf("%s p%d m%d n%d %v", o.Kind, o.Proc, o.Mutex, o.N, o.D)
}

// Ops returns the operations of seed.
func Ops(seed uint64, steps, procs int) []Op {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	total := 0
	for _, w := range opWeights {
		total += w
	}
	ops := make([]Op, steps)
	for i := range ops {
		pick := rng.IntN(total)
		kind := OpKind(0)
		for pick >= opWeights[kind] {
			pick -= opWeights[kind]
			kind++
		}
		o := Op{Kind: kind, Proc: rng.IntN(procs), Mutex: rng.IntN(2), N: rng.IntN(1 << 20)}
		switch kind {
		case OpSleep:
			o.D = ms(rng, 10, 2000)
		case OpFault:
			o.D = ms(rng, 100, 3000)
		case OpPause:
			o.D = ms(rng, 300, 6000)
		default:
			if rng.IntN(4) > 0 { // a quarter of the calls have no deadline
				o.D = ms(rng, 20, 5000)
			}
		}
		ops[i] = o
	}
	return ops
}

func ms(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond
}

// apply runs o. Operations on a paused process do nothing: its goroutines do not run.
func (w *world) apply(o Op) {
	if o.Kind == OpSleep {
		time.Sleep(o.D)
		return
	}
	p := w.procs[o.Proc]
	if p.paused() {
		return
	}
	if o.Kind >= OpSemAcquire {
		w.applyHold(p, o)
		return
	}
	i, m := o.Mutex, w.names[o.Mutex]
	switch o.Kind {
	case OpLockerAcquire, OpLockerTry:
		l, id, once := p.lockers[i], p.lockerIDs[i], o.Kind == OpLockerTry
		acquire := l.Acquire
		if once {
			acquire = l.TryAcquire
		}
		w.want(m)
		w.spawn(p, m, fmt.Sprintf("%s of p%d on %s", o.Kind, p.id, m), o.D, !once, func(ctx context.Context) error {
			got, err := acquire(ctx)
			if err != nil {
				return err
			}
			rec := &lease{proc: p, inc: p.incarnation, kind: "locker", mutex: m, token: got.Token(), owner: id, ctx: got.Context(), lease: got}
			w.mu.Lock()
			if p.lockers[i] == l && !p.closed {
				p.owned[i] = rec
			} else {
				rec.done = true // closed meanwhile
			}
			w.mu.Unlock()
			w.handOut(rec)
			return nil
		})
	case OpLockerRelease:
		w.mu.Lock()
		rec := p.owned[i]
		p.owned[i] = nil
		if rec != nil {
			rec.done = true
		}
		w.mu.Unlock()
		if rec != nil {
			w.spawn(p, m, fmt.Sprintf("release of p%d's locker lease on %s", p.id, m), o.D, false, rec.lease.Release)
		}
	case OpLockerClose:
		w.mu.Lock()
		old, id := p.lockers[i], p.lockerIDs[i]
		if rec := p.owned[i]; rec != nil {
			rec.done = true
		}
		p.owned[i] = nil
		p.newLocker(i)
		w.mu.Unlock()
		w.closeAsync(p, "Locker.Close of p"+fmt.Sprint(p.id), old.Close, id)
	case OpMutexesAcquire, OpMutexesTry:
		w.mutexesAcquire(p, o, m)
	case OpMutexesCrowd:
		// A crowd of one process: Acquires queue for the mutex, a TryAcquire comes last,
		// all at once.
		for k := range 1 + o.N%3 {
			w.mutexesAcquire(p, Op{Kind: OpMutexesAcquire, N: 3 * k}, m)
		}
		w.mutexesAcquire(p, Op{Kind: OpMutexesTry, D: o.D}, m)
	case OpHandOverRace:
		w.handOverRace(p, o)
	case OpMutexesRelease:
		w.mu.Lock()
		var rec *lease
		if len(p.holds) > 0 {
			k := o.N % len(p.holds)
			rec = p.holds[k]
			p.holds = slices.Delete(p.holds, k, k+1)
			rec.done = true
		}
		w.mu.Unlock()
		if rec != nil {
			w.spawn(p, m, fmt.Sprintf("release of a Mutexes hold of p%d on %s", p.id, rec.mutex), o.D, false, rec.lease.Release)
		}
	case OpMutexesClose:
		w.mu.Lock()
		old := p.mutexes
		for _, rec := range p.holds {
			rec.done = true
		}
		p.newMutexes()
		w.mu.Unlock()
		w.closeAsync(p, "Mutexes.Close of p"+fmt.Sprint(p.id), old.Close, old.ContenderID())
	case OpServiceStart, OpSchedulerStart:
		a := p.actor(o.Kind == OpServiceStart, i)
		a.quits = o.N%5 == 0
		w.want(m)
		w.spawn(p, m, fmt.Sprintf("Start of %s", a.id), o.D, false, func(ctx context.Context) error {
			err := a.start(ctx)
			if err == nil {
				w.mu.Lock()
				a.running = true
				w.mu.Unlock()
			}
			return err
		})
	case OpServiceStop, OpSchedulerStop:
		a := p.actor(o.Kind == OpServiceStop, i)
		w.spawn(p, m, fmt.Sprintf("Stop of %s", a.id), o.D, false, func(ctx context.Context) error {
			err := a.stop(ctx)
			w.stopped(a, err, false)
			return err
		})
	case OpServiceRun:
		a := p.services[i]
		w.mu.Lock()
		busy := a.run != nil && !a.run.done
		w.mu.Unlock()
		if busy {
			return
		}
		w.want(m)
		c := w.spawn(p, m, fmt.Sprintf("Run of %s", a.id), o.D, false, a.svc.Run)
		w.mu.Lock()
		c.deadline = time.Time{} // Run stops after its context ends
		a.run, a.closed = c, false
		w.mu.Unlock()
	case OpServiceClose:
		a := p.services[i]
		w.spawn(p, m, fmt.Sprintf("Close of %s", a.id), 0, false, func(context.Context) error {
			err := a.svc.Close()
			w.stopped(a, err, true)
			if err == nil {
				w.closedClean(fmt.Sprintf("Close of %s", a.id), a.id)
			}
			return err
		})
		p.renewService(i)
	case OpCancel:
		w.mu.Lock()
		var mine []*call
		for _, c := range w.calls {
			if c.proc == p && !c.done {
				mine = append(mine, c)
			}
		}
		w.mu.Unlock()
		if len(mine) > 0 {
			mine[o.N%len(mine)].cancel()
		}
	case OpFault:
		kind := faultKind(1 + o.N%int(faultKinds-1))
		until := time.Now().Add(o.D)
		p.link.breakFor(kind, until)
		w.disturb(until)
		w.trace("fault %s on p%d until +%v", kind, p.id, o.D)
	case OpPause:
		p.clock.Pause()
		p.link.pause()
		p.resumeAt = time.Now().Add(o.D)
		w.disturb(p.resumeAt)
	case OpCrash:
		w.crash(p)
	}
}

// handOverRace races a hand-over, on a mutex no other operation touches (raceMutex) and
// with objects of its own: a Locker of another process holds the mutex while p's new
// Mutexes queues an Acquire for it; then the holder releases and p makes a TryAcquire,
// whose attempt may be the one that finds the mutex free (when p missed the release's
// notification, always). Once the TryAcquire returned, the waiter must have been served
// if p owns the mutex. The order in which the goroutines woken by that attempt run is the
// race; the operation runs it up to raceRounds times.
func (w *world) handOverRace(p *process, o Op) {
	q := w.procs[(p.id+1)%len(w.procs)]
	for range raceRounds {
		if q.paused() || !w.raceRound(p, q, o) {
			return
		}
	}
}

// raceRounds is how many times a hand-over race runs in one operation.
const raceRounds = 8

// raceRound runs one hand-over race, and reports whether it found nothing wrong.
func (w *world) raceRound(p, q *process, o Op) bool {
	w.closeRace(p)
	w.closeRace(q)
	synctest.Wait()
	m := raceMutex
	id := p.contenderID(fmt.Sprintf("race-%d", w.nextID()))
	mx, err := simba.NewMutexes(p.link, options[simba.MutexesOption](p, simba.WithContenderID(id))...)
	if err != nil {
		panic(err)
	}
	lid := q.contenderID(fmt.Sprintf("race-%d", w.nextID()))
	l, err := simba.NewLocker(q.link, m, options[simba.LockerOption](q, simba.WithContenderID(lid))...)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	p.raceMutexes, q.raceLocker = mx, l
	w.mu.Unlock()
	var held *lease
	w.spawn(q, m, "race: Locker.TryAcquire of p"+fmt.Sprint(q.id), 0, false, func(ctx context.Context) error {
		got, err := l.TryAcquire(ctx)
		if err == nil {
			held = w.raceHandOut(q, "locker", lid, got)
		}
		return err
	})
	synctest.Wait()
	if held == nil {
		return false
	}
	take := func(once bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			acquire := mx.Acquire
			if once {
				acquire = mx.TryAcquire
			}
			got, err := acquire(ctx, m)
			if err == nil {
				w.raceHandOut(p, "mutexes", id, got)
			}
			return err
		}
	}
	waiter := w.spawn(p, m, "race: Mutexes.Acquire of p"+fmt.Sprint(p.id), 0, true, take(false))
	synctest.Wait()
	w.mu.Lock()
	held.done = true
	w.mu.Unlock()
	missed := o.N%2 == 0
	if missed { // p misses the release's notification: its TryAcquire finds the mutex free
		p.link.breakFor(deaf, time.Now().Add(time.Millisecond))
		w.disturb(time.Now())
	}
	w.spawn(q, m, "race: release of p"+fmt.Sprint(q.id), 0, false, held.lease.Release)
	if missed {
		synctest.Wait()
	}
	w.spawn(p, m, "race: Mutexes.TryAcquire of p"+fmt.Sprint(p.id), o.D, false, take(true))
	synctest.Wait()
	owner := w.storeOwner(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if owner == id && !waiter.done {
		w.violate("the waiter for %s sleeps while its process, p%d, owns the mutex and nobody there holds it", m, p.id)
		return false
	}
	return true
}

// raceHandOut registers a lease of the hand-over race. It is given back when the race's
// objects are closed.
func (w *world) raceHandOut(p *process, kind, owner string, got *simba.Lease) *lease {
	rec := &lease{proc: p, inc: p.incarnation, kind: kind, mutex: raceMutex, token: got.Token(), owner: owner, ctx: got.Context(), lease: got}
	w.mu.Lock()
	if w.raceClosing[owner] {
		rec.done = true // granted before its object's Close began, which gives it back
	} else {
		p.raceLeases = append(p.raceLeases, rec)
	}
	w.mu.Unlock()
	w.handOut(rec)
	return rec
}

// closeRace closes the objects of p's last hand-over race.
func (w *world) closeRace(p *process) {
	w.mu.Lock()
	for _, rec := range p.raceLeases {
		rec.done = true
	}
	p.raceLeases = nil
	mx, l := p.raceMutexes, p.raceLocker
	p.raceMutexes, p.raceLocker = nil, nil
	if mx != nil {
		w.raceClosing[mx.ContenderID()] = true
	}
	if l != nil {
		w.raceClosing[l.ContenderID()] = true
	}
	w.mu.Unlock()
	if mx != nil {
		w.closeAsync(p, "race: Mutexes.Close of p"+fmt.Sprint(p.id), mx.Close, mx.ContenderID())
	}
	if l != nil {
		w.closeAsync(p, "race: Locker.Close of p"+fmt.Sprint(p.id), l.Close, l.ContenderID())
	}
}

// mutexesAcquire runs a Mutexes Acquire, AcquireAs (a named holder, reentrant) or
// TryAcquire. A TryAcquire that fails while nobody else holds or wants the mutex, and
// nothing disturbs the run, breaks the rule that it waits for a stop under way.
func (w *world) mutexesAcquire(p *process, o Op, m string) {
	mx := p.mutexes
	id := mx.ContenderID()
	once := o.Kind == OpMutexesTry
	holder := ""
	if !once && o.N%3 > 0 {
		holder = fmt.Sprintf("h%d", o.N%3)
	}
	brief := o.N%4 == 3 // released at once, by the goroutine that acquired: a short critical section
	free := once && w.nobodyElse(m, id)
	epoch := w.want(m)
	what := fmt.Sprintf("%s of p%d on %s (holder %q)", o.Kind, p.id, m, holder)
	w.spawn(p, m, what, o.D, !once, func(ctx context.Context) error {
		var (
			got *simba.Lease
			err error
		)
		switch {
		case once:
			got, err = mx.TryAcquire(ctx, m)
		case holder == "":
			got, err = mx.Acquire(ctx, m)
		default:
			got, err = mx.AcquireAs(ctx, m, holder)
		}
		if err != nil {
			w.mu.Lock()
			if free && ctx.Err() == nil && w.epoch[m] == epoch && !time.Now().Before(w.calmAt) {
				w.violate("%s failed although nobody else held or wanted %s: %v", what, m, err)
			}
			w.mu.Unlock()
			return err
		}
		rec := &lease{proc: p, inc: p.incarnation, kind: "mutexes", mutex: m, token: got.Token(), owner: id, ctx: got.Context(), lease: got}
		w.mu.Lock()
		if p.mutexes == mx && !p.closed && !brief {
			p.holds = append(p.holds, rec)
		} else {
			rec.done = true // closed meanwhile, or released below
		}
		w.mu.Unlock()
		w.handOut(rec)
		if brief {
			_ = got.Release(ctx) // its store errors are the store's; its deadline is the call's
		}
		return nil
	})
}

// nobodyElse reports whether nobody but the registry id holds or wants m: no call under
// way for it, no hold not given back, no running service or scheduler of it, and the store
// names no other owner; and nothing disturbs the run.
func (w *world) nobodyElse(m, id string) bool {
	owner := w.storeOwner(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Now().Before(w.calmAt) || (owner != "" && owner != id) {
		return false
	}
	for _, c := range w.calls {
		if !c.done && c.mutex == m {
			return false
		}
	}
	for _, l := range w.leases {
		if l.mutex == m && !l.done {
			return false
		}
	}
	for _, p := range w.procs {
		if p.paused() {
			return false
		}
		for _, a := range append(p.services, p.scheds...) {
			if a.mutex == m && a.running {
				return false
			}
		}
	}
	return true
}

// want notes that someone begins to want m, and returns m's epoch after it.
func (w *world) want(m string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.epoch[m]++
	return w.epoch[m]
}

// spawn runs f as call what of process p, about mutex m, with a context that ends after d
// (none when d is 0). waits marks an Acquire that waits for the mutex.
func (w *world) spawn(p *process, m, what string, d time.Duration, waits bool, f func(ctx context.Context) error) *call {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	c := &call{what: what, proc: p, mutex: m, began: time.Now(), waits: waits}
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
		c.deadline = c.began.Add(d)
	} else if waits {
		ctx, cancel = context.WithCancel(ctx) // OpCancel can end it
	}
	c.ctx, c.cancel = ctx, cancel
	w.mu.Lock()
	w.nextCall++
	c.id = w.nextCall
	w.calls = append(w.calls, c)
	w.mu.Unlock()
	w.trace("call %d: %s (deadline %v)", c.id, what, d)
	go func() {
		err := f(ctx)
		w.finish(c, err)
		w.trace("call %d returned: %v", c.id, err)
		cancel()
	}()
	return c
}

// closeAsync runs a Close and checks that, once it returned without error, the store
// names none of ids any more (unless a fault made the release fail silently).
func (w *world) closeAsync(p *process, what string, closeFn func() error, ids ...string) {
	w.spawn(p, "", what, 0, false, func(context.Context) error {
		err := closeFn()
		if err == nil {
			w.closedClean(what, ids...)
		}
		return err
	})
}

// closedClean checks that the store names none of ids as owner.
func (w *world) closedClean(what string, ids ...string) {
	owners := make([]string, len(w.names))
	for i, m := range w.names {
		owners[i] = w.storeOwner(m)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Now().Before(w.calmAt) {
		return
	}
	for i, o := range owners {
		if o != "" && slices.Contains(ids, o) {
			w.violate("after %s returned, the store still names %s the owner of %s", what, o, w.names[i])
		}
	}
}

// stopped records a Stop (closed false) or Close of a service or scheduler that returned
// err: unless it found the service not running, the service has stopped (a release that
// is still under way included). A Run must return once a Close returned.
func (w *world) stopped(a *actor, err error, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !errors.Is(err, simba.ErrNotRunning) && !errors.Is(err, simba.ErrClosed) {
		a.running = false
	}
	a.closed = a.closed || closed
	for _, l := range w.leases {
		if l.owner == a.id {
			l.done = true
		}
	}
}

// crash kills p: its backend stops answering (nothing is released: owner records lapse),
// its objects are closed, and a new incarnation boots.
func (w *world) crash(p *process) {
	w.disturb(time.Now())
	_ = p.link.backend.Close()
	w.mu.Lock()
	for _, l := range w.leases {
		if l.proc == p && l.inc == p.incarnation {
			l.done = true
		}
	}
	w.mu.Unlock()
	w.closeAll(p)
	p.incarnation++
	p.boot()
	w.mu.Lock()
	p.closed = false
	w.mu.Unlock()
}

// closeAll closes every simba object of p's incarnation, each on a call of its own.
func (w *world) closeAll(p *process) {
	w.mu.Lock()
	p.closed = true
	w.mu.Unlock()
	for i := range w.names {
		l, svc, sched := p.lockers[i], p.services[i], p.scheds[i]
		w.spawn(p, "", "Locker.Close", 0, false, func(context.Context) error { return l.Close() })
		w.spawn(p, "", "Close of "+svc.id, 0, false, func(context.Context) error { err := svc.svc.Close(); w.stopped(svc, err, true); return err })
		w.spawn(p, "", "Close of "+sched.id, 0, false, func(context.Context) error { err := sched.sched.Close(); w.stopped(sched, err, true); return err })
	}
	mx := p.mutexes
	w.spawn(p, "", "Mutexes.Close", 0, false, func(context.Context) error { return mx.Close() })
	w.closeHolds(p)
	w.closeRace(p)
}

// actor returns p's service (service true) or scheduler of mutex i.
func (p *process) actor(service bool, i int) *actor {
	if service {
		return p.services[i]
	}
	return p.scheds[i]
}

func (a *actor) start(ctx context.Context) error {
	if a.svc != nil {
		return a.svc.Start(ctx)
	}
	return a.sched.Start(ctx)
}

func (a *actor) stop(ctx context.Context) error {
	if a.svc != nil {
		return a.svc.Stop(ctx)
	}
	return a.sched.Stop(ctx)
}

// renewService gives p a new service for mutex i, after the old one's Close.
func (p *process) renewService(i int) {
	m := p.w.names[i]
	id := p.contenderID(fmt.Sprintf("svc-%s-%d", m, p.w.nextID()))
	a := &actor{kind: "service", mutex: m, id: id}
	svc, err := simba.NewService(p.link, simba.ContenderFuncs{MutexName: m, ID: id,
		Acquired: func(ctx context.Context, st simba.State) { p.acquired(a, ctx, st) },
	}, options[simba.ServiceOption](p)...)
	if err != nil {
		panic(err)
	}
	a.svc = svc
	p.services[i] = a
}

// resume ends p's pause: the timers that came due, the notifications that came and the
// calls that waited run one at a time, in an order the seed picks, each to its end.
func (w *world) resume(p *process, settle func()) {
	due := p.clock.Resume()
	held := p.link.takeHeld()
	events := make([]func(), 0, len(due)+len(held)+1)
	for _, d := range due {
		events = append(events, d.Fire)
	}
	for _, f := range held {
		events = append(events, func() { go f() })
	}
	events = append(events, p.link.unfreeze)
	w.rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	p.resumeAt = time.Time{}
	w.trace("resume p%d: %d timers, %d notifications", p.id, len(due), len(held))
	for _, e := range events {
		e()
		settle()
	}
}
