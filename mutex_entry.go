package simba

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"time"
)

// entry is one mutex of a Mutexes registry: its contender on the store, its local holder
// and its queue of waiters. Its fields are guarded by m.mu.
//
// The store side of an entry is a state machine; handle is the one place where its state
// changes, and advance takes the steps a state calls for (each on a worker goroutine of
// the registry, which reports back with an event; one at a time, so a step that a state
// calls for while the last one is still under way waits for its event):
//
//	idle        -> starting     the queue needs the mutex (after a pause, when it gave it back)
//	starting    -> waiting      started                            (event started)
//	starting    -> owning       a tenure began before start returned (event acquired)
//	starting    -> backingOff   start failed, an Acquire still waits (event started)
//	starting    -> idle         start failed, nobody waits          (event started)
//	backingOff  -> idle         the backoff is over                 (event backedOff)
//	waiting     -> owning       a tenure began                      (event acquired)
//	owning      -> waiting      the tenure ended, or lapsed when looked at
//	owning      -> deciding     the hand-over limit is reached while others queue
//	deciding    -> owning       the store says nobody else waits    (event decided)
//	deciding    -> stopping     others wait, or the store cannot tell: give the mutex back
//	deciding    -> waiting      the tenure ended meanwhile
//	waiting, owning -> stopping nobody needs the mutex any more
//	stopping    -> idle         stopped                             (event stopped)
//
// The mutex is granted to local waiters only while owning, and only after its tenure is
// checked against the clock. An idle entry that nobody needs leaves the registry.
type entry struct {
	m    *Mutexes
	name string
	svc  *Service

	state     entryState
	changed   chan struct{} // closed and replaced at every change of state
	work      *work         // the worker's action under way; nil when none
	tenure    *tenure       // the store tenure, while owning or deciding
	fresh     bool          // the tenure has not been granted yet
	handOvers int           // local hand-overs since the tenure began or the store was asked
	cleared   bool          // the store said nobody else waits: the next hand-over may go on
	giveBack  bool          // the mutex goes back to the store: stop, pause, contend again
	failures  int           // start-ups failed in a row
	lastErr   error         // the last start-up's error; nil after a successful one

	holder  string    // the holder now, or ""
	holds   []*Lease  // the holder's unreleased holds, oldest first
	endHold func()    // ends the current holder's lease contexts
	waiters list.List // *waiter, oldest first
}

type entryState int

const (
	entryIdle entryState = iota
	entryStarting
	entryWaiting
	entryOwning
	entryDeciding
	entryStopping
	entryBackingOff
)

func (s entryState) String() string {
	return [...]string{"idle", "starting", "waiting", "owning", "deciding", "stopping", "backing off"}[s]
}

// event is something that happened to an entry.
type event struct {
	kind    eventKind
	err     error   // started, stopped, hopeless
	tenure  *tenure // acquired
	waiting bool    // decided: others wait for the mutex
	known   bool    // decided: the store could tell
}

type eventKind int

const (
	evQueue     eventKind = iota // the queue or the hold changed
	evStarted                    // the worker's start returned (err)
	evStopped                    // the worker's stop returned (err)
	evBackedOff                  // the worker's backoff is over
	evAcquired                   // the contender began a tenure
	evReleased                   // the contender's tenure ended
	evDecided                    // the worker asked the store whether others wait
	evHopeless                   // the contender found the backend closed, or refused (err)
	evClose                      // the registry closes
)

// work is an action of a worker goroutine.
type work struct {
	done chan struct{} // closed when the action has returned
	err  error         // its error; read after done
	stop bool          // the action stops the store contender
}

// handle applies ev to the entry, then takes the steps the new state calls for. It is the
// one place where the entry's state changes. Called with m.mu held.
func (e *entry) handle(ev event) {
	switch ev.kind {
	case evQueue, evReleased: // advance looks at the queue and the tenure
	case evStarted:
		e.started(ev.err)
	case evBackedOff:
		e.enter(entryIdle)
	case evAcquired:
		switch {
		case e.state == entryStarting || e.state == entryWaiting:
			e.adopt(ev.tenure)
			e.enter(entryOwning)
		case e.state == entryOwning && e.tenure != ev.tenure:
			e.adopt(ev.tenure) // the next tenure, come before the end of the last was delivered
		}
	case evDecided:
		if e.state == entryDeciding {
			e.decided(ev.waiting, ev.known)
		}
	case evStopped:
		if ev.err != nil && e.m.closed {
			e.m.errs = append(e.m.errs, ev.err)
		}
		e.tenure = nil
		e.enter(entryIdle)
	case evHopeless:
		e.m.storeErr = ev.err
		// No tenure can come from a closed backend, nor from a store that refuses the
		// client: the waiters fail, as a Locker's acquisition does; a holder keeps its hold
		// until its tenure lapses.
		e.failQueue(false, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", e.name), ev.err))
	case evClose:
		e.failQueue(false, ErrClosed)
		if e.holder != "" {
			e.endHold()
			e.holder, e.holds = "", nil
		}
	}
	e.advance()
}

// started applies the outcome of the worker's start-up (err nil: started). Called by
// handle only.
func (e *entry) started(err error) {
	if err == nil {
		e.failures, e.lastErr = 0, nil
		if e.state == entryStarting {
			e.enter(entryWaiting)
		}
		return
	}
	e.failures++
	e.lastErr, e.m.storeErr = err, err
	// A closed backend or a refusal is no outage to wait out: every waiter fails, as a
	// Locker's acquisition does. Otherwise only single attempts fail, and the others wait
	// while the start-up is retried (an ID another holder of this process still contends
	// with is refused until that one is done).
	hopeless := errors.Is(err, ErrClosed) || errors.Is(err, ErrRefused)
	e.failQueue(!hopeless, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", e.name), err))
	if e.needed() {
		e.enter(entryBackingOff)
		e.spawn(e.backOff)
	} else {
		e.enter(entryIdle)
	}
}

// decided applies the store's answer to whether others wait: the hand-overs may go on, or
// the mutex goes back to the store. Called by handle only.
func (e *entry) decided(waiting, known bool) {
	if known && !waiting {
		e.handOvers, e.cleared = 0, true
	} else {
		e.giveBack = true
	}
	e.enter(entryOwning)
}

// advance takes the steps that the state, the tenure and the queue call for. Called by
// handle only.
func (e *entry) advance() {
	if e.tenure != nil && !e.tenure.live() { // looks at the clock: a lapsed tenure is over
		e.tenure = nil
		if e.state == entryOwning || e.state == entryDeciding {
			e.enter(entryWaiting)
		}
	}
	e.serve()
	if e.work != nil {
		return // one action at a time: a tenure can come before its start-up returns
	}
	e.step()
}

// serve hands the owned mutex to the next local waiter, or asks the store first whether
// others wait once the hand-overs reach their limit. Called by advance only.
func (e *entry) serve() {
	if e.state != entryOwning || e.holder != "" || e.waiters.Len() == 0 || e.giveBack {
		return
	}
	switch {
	case e.fresh || e.cleared || e.handOvers < e.m.cfg.localHandOvers:
		e.grant()
	case e.work == nil:
		e.enter(entryDeciding)
		e.spawn(e.decide)
	}
}

// step starts the worker's next action on the store, or lets an idle entry go. Called by
// advance only, while no action is under way.
func (e *entry) step() {
	needed := e.needed()
	switch {
	case e.state == entryIdle && needed:
		var pause time.Duration
		if e.giveBack {
			pause, e.giveBack = giveBackPause, false
		}
		e.enter(entryStarting)
		e.spawn(func() event { return e.start(pause) })
	case (e.state == entryWaiting || e.state == entryOwning) && (!needed || e.giveBack):
		e.enter(entryStopping)
		e.spawn(e.stop)
	case e.state == entryIdle && e.m.entries[e.name] == e:
		delete(e.m.entries, e.name)
	}
}

func (e *entry) enter(st entryState) {
	if e.state == st {
		return
	}
	e.state = st
	close(e.changed)
	e.changed = make(chan struct{})
}

// needed reports whether the entry needs its store contender: the mutex is held or
// awaited, and the registry is open.
func (e *entry) needed() bool {
	return !e.m.closed && (e.holder != "" || e.waiters.Len() > 0)
}

func (e *entry) adopt(t *tenure) {
	e.tenure, e.fresh, e.handOvers, e.cleared = t, true, 0, false
}

// grant gives the mutex to the oldest waiter, and to every other waiter of the same
// holder. Called while owning, the mutex free locally, the tenure live and a waiter
// queued.
func (e *entry) grant() {
	first := e.waiters.Front().Value.(*waiter)
	ctx, cancel := e.tenure.derive()
	owner := e.tenure.record()
	e.holder = first.holder
	e.endHold = func() { cancel(context.Canceled) }
	e.m.storeErr = nil
	if e.fresh {
		e.fresh = false
	} else {
		e.handOvers++
	}
	e.cleared = false
	for el := e.waiters.Front(); el != nil; {
		next := el.Next()
		if w := el.Value.(*waiter); w.holder == first.holder {
			e.waiters.Remove(el)
			w.lease = e.newLease(ctx, owner)
			close(w.done)
		}
		el = next
	}
}

// failQueue fails the waiters with err: only TryAcquire's (once), or all.
func (e *entry) failQueue(onceOnly bool, err error) {
	for el := e.waiters.Front(); el != nil; {
		next := el.Next()
		if w := el.Value.(*waiter); w.once || !onceOnly {
			e.waiters.Remove(el)
			w.fail(err)
		}
		el = next
	}
}

// spawn runs action on a worker goroutine of the registry, which then hands its event to
// handle. Called with m.mu held, while no other action of the entry is under way.
func (e *entry) spawn(action func() event) {
	w := &work{done: make(chan struct{}), stop: e.state == entryStopping}
	e.work = w
	e.m.workers.Go(func() {
		ev := action()
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		e.work = nil
		w.err = ev.err
		close(w.done)
		e.handle(ev)
	})
}

// The worker actions.

func (e *entry) start(pause time.Duration) event {
	_, err := e.svc.begin(e.m.ctx, runSpec{delay: pause, hopeless: e.hopeless})
	if err != nil {
		// A start-up the store has not answered goes on in the service's background (the
		// registry closed meanwhile, or the store ignored the call timeout): it ends before
		// the entry moves on, so that the registry's Close, which waits for its workers,
		// waits for it, and a retry does not pile another start-up on it.
		e.svc.settle()
	}
	return event{kind: evStarted, err: err}
}

// hopeless hands the entry an evHopeless, on a goroutine of the registry: the entry's
// lifecycle found the backend closed or refusing (runSpec.hopeless, called with the
// service's lock held, before the lifecycle halts and so before the registry's Close is
// done waiting).
func (e *entry) hopeless(err error) {
	e.m.workers.Go(func() {
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		e.handle(event{kind: evHopeless, err: err})
	})
}

func (e *entry) stop() event {
	err := e.svc.Stop(context.Background())
	if err != nil && !errors.Is(err, ErrNotRunning) {
		return event{kind: evStopped, err: err}
	}
	return event{kind: evStopped}
}

func (e *entry) decide() event {
	waiting, known := e.svc.othersWaiting(context.Background())
	return event{kind: evDecided, waiting: waiting, known: known}
}

func (e *entry) backOff() event {
	m := e.m
	m.mu.Lock()
	d := e.svc.backoff(e.failures)
	m.mu.Unlock()
	e.svc.log.Warn("simba: start failed; retrying", "err", e.lastErrLocked(), "retry_in", d)
	_ = sleep(m.ctx, e.svc, d, nil)
	return event{kind: evBackedOff}
}

func (e *entry) lastErrLocked() error {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	return e.lastErr
}

// The holders' side.

func (e *entry) newLease(ctx context.Context, owner Owner) *Lease {
	l := &Lease{mutex: e.name, owner: owner, ctx: ctx}
	l.give = func(ctx context.Context) error { return e.release(ctx, l) }
	e.holds = append(e.holds, l)
	return l
}

// reenter returns a further hold for the current holder, unless its tenure is lost.
// Called with m.mu held.
func (e *entry) reenter() (*Lease, error) {
	h := e.holds[0]
	if h.ctx.Err() != nil {
		return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q: the tenure of holder %q's holds has ended; release them first", e.name, e.holder), ErrOwnershipLost)
	}
	return e.newLease(h.ctx, h.owner), nil
}

// taken returns the lease w was granted, or the reason it was not, once w stopped waiting
// (granted, failed, or its ctx ended).
func (e *entry) taken(ctx context.Context, w *waiter) (*Lease, error) {
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.finished() {
		return w.outcome()
	}
	e.waiters.Remove(w.elem)
	last := e.lastErr
	if last == nil {
		last = e.svc.Err()
	}
	m.storeErr = last
	e.handle(event{kind: evQueue})
	return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", e.name), ctx.Err(), last)
}

// tryOnce waits for the outcome of one store attempt made after w was queued (or a
// grant), unless the mutex is held or awaited in this process already.
func (e *entry) tryOnce(ctx context.Context, w *waiter) (*Lease, error) {
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for !w.finished() {
		switch {
		case ctx.Err() != nil:
			return e.refuse(w, ErrNotAcquired, "", ctx.Err())
		case e.holder != "" || e.waiters.Front() != w.elem:
			return e.refuse(w, ErrHeld, "is held or awaited by another holder of this process")
		case e.state == entryOwning || e.state == entryDeciding:
			return e.refuse(w, ErrNotAcquired, "is being given back to the store")
		case e.state == entryBackingOff:
			return e.refuse(w, ErrNotAcquired, "cannot be reached on the store", e.lastErr)
		case e.state == entryWaiting:
			if err := e.attemptFor(ctx, w); err != nil {
				return nil, err
			}
		default: // idle, starting, stopping: wait for the store side to settle
			changed := e.changed
			m.mu.Unlock()
			select {
			case <-changed:
			case <-w.done:
			case <-ctx.Done():
			}
			m.mu.Lock()
		}
	}
	return w.outcome()
}

// attemptFor makes one store attempt for TryAcquire's waiter w, while the entry waits for
// its turn on the store: a tenure it begins is granted to the oldest waiter, w. It returns
// the refusal to return when w was not granted. Called with m.mu held, which it lets go
// during the attempt.
func (e *entry) attemptFor(ctx context.Context, w *waiter) error {
	m := e.m
	m.mu.Unlock()
	err := e.svc.attemptNow(ctx)
	t := e.svc.believed()
	m.mu.Lock()
	if t != nil {
		e.handle(event{kind: evAcquired, tenure: t}) // grants the oldest waiter: w
	}
	switch {
	case w.finished():
		return nil
	case err != nil:
		m.storeErr = err
		_, err = e.refuse(w, ErrNotAcquired, "was not acquired: the store did not answer", err)
		return err
	}
	_, err = e.refuse(w, ErrHeld, fmt.Sprintf("is owned by %q", e.svc.Owner().ID))
	return err
}

// refuse takes TryAcquire's waiter w out of the queue and returns why it was not granted.
// Called with m.mu held.
func (e *entry) refuse(w *waiter, why error, detail string, causes ...error) (*Lease, error) {
	e.waiters.Remove(w.elem)
	e.handle(event{kind: evQueue})
	return nil, describe(why, fmt.Sprintf("mutex %q %s", e.name, detail), causes...)
}

// release gives hold l back. When it was the holder's last, the mutex goes to the next
// waiter, or back to the store; release then waits, until ctx ends, for the store to hear
// of it.
func (e *entry) release(ctx context.Context, l *Lease) error {
	m := e.m
	m.mu.Lock()
	i := -1
	for j, h := range e.holds {
		if h == l {
			i = j
		}
	}
	if i < 0 { // released by Close
		m.mu.Unlock()
		return nil
	}
	e.holds = append(e.holds[:i], e.holds[i+1:]...)
	if len(e.holds) > 0 {
		m.mu.Unlock()
		return nil
	}
	e.holder = ""
	e.endHold()
	e.handle(event{kind: evQueue})
	// Nobody else wants the mutex: wait for the entry to give it up on the store (after
	// the action under way, such as a start-up whose tenure came first).
	var err error
	for !e.needed() && e.work != nil {
		w := e.work
		m.mu.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
			return fmt.Errorf("simba: release %q: the release on the store is still under way: %w", e.name, ctx.Err())
		}
		m.mu.Lock()
		if w.stop {
			err = w.err
		}
	}
	m.mu.Unlock()
	return err
}
