package simba

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLocalHandOvers is how many times in a row a tenure passes from one local holder
// to the next before Mutexes gives the mutex back to the store, if others wait for it.
const DefaultLocalHandOvers = 16

// giveBackPause is how long a Mutexes queue that gave its mutex back waits before it
// contends again, so that a waiter of another process, woken by the release, acquires
// first.
const giveBackPause = 10 * time.Millisecond

// WithLocalHandOvers sets how many local hand-overs one store tenure of Mutexes may serve
// before the mutex goes back to the store, so that contenders of other processes get
// their turn. Default 16; must be >= 0 (0: every release goes back to the store). Only
// NewMutexes accepts it.
func WithLocalHandOvers(n int) Option {
	return func(c *config) { c.localHandOvers, c.localHandOversSet = n, true }
}

// Mutexes lets the goroutines of one process share mutexes on one backend: for each mutex
// name there is one contender on the store, and goroutines that want the mutex wait in a
// local FIFO queue, each with its own deadline (its context). When a holder releases while
// others wait and the tenure is still valid, the next one gets the mutex at once, without
// a store round trip.
//
// Fairness: local hand-overs alone would let a busy process keep the mutex forever. After
// WithLocalHandOvers (default 16) hand-overs in one tenure, Mutexes gives the mutex back
// to the store if contenders of other processes wait for it: known from stores that keep
// a wait list (simba.WaitList: memory, Redis), assumed for the others. It then pauses for
// 10ms, so that the other process's waiter, woken by the release, acquires first, and
// contends again like any other process. When the store says nobody else waits, local
// hand-overs go on and the question is asked again after the next WithLocalHandOvers. When
// no one waits locally, the mutex is released on the store at once.
//
// Holds are reentrant for an explicit holder identity (AcquireAs): a holder that holds a
// mutex may acquire it again, the holds are counted, and the mutex goes to the next
// holder only when the count is back to zero. Go has no goroutine identity; the holder is
// whatever string the caller uses to name the work that holds (a request ID, a job ID).
//
// Every holder of one tenure sees the tenure's fencing token: tokens fence processes, and
// the queue orders the holders within a process. A holder's lease context is its own: it
// ends at its Release, or for everyone when the tenure is lost.
//
// The registry keeps an entry only while a mutex is held or awaited: names used once leave
// nothing behind. Mutexes is safe for concurrent use; Close releases everything.
type Mutexes struct {
	backend Backend
	cfg     config
	id      string

	mu      sync.Mutex
	entries map[string]*localMutex
	closed  bool
	anon    atomic.Uint64 // numbers the holders of plain Acquire calls
}

// NewMutexes returns a registry of mutexes on b. Options are those of services (TTL,
// transition, logger, contender ID: one ID serves every mutex of the registry) and
// WithLocalHandOvers.
func NewMutexes(b Backend, opts ...Option) (*Mutexes, error) {
	cfg, err := checkedConfig(b, opts, forMutexes)
	if err != nil {
		return nil, err
	}
	id := cfg.ownID()
	if err := ValidateContenderID(id); err != nil {
		return nil, err
	}
	if v, ok := b.(Validator); ok {
		if err := v.ValidateContenderID(id); err != nil {
			return nil, err
		}
	}
	return &Mutexes{backend: b, cfg: cfg, id: id, entries: map[string]*localMutex{}}, nil
}

// ContenderID returns the contender ID the registry's contenders use.
func (m *Mutexes) ContenderID() string { return m.id }

// Len returns the number of mutexes currently held or awaited through the registry.
func (m *Mutexes) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Waiting returns how many goroutines of this process wait for mutex in its local queue.
func (m *Mutexes) Waiting(mutex string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[mutex]; e != nil {
		return e.waiters.Len()
	}
	return 0
}

// Acquire blocks until the caller holds mutex or ctx ends, as Locker.Acquire does; each
// call is a holder of its own (not reentrant).
func (m *Mutexes) Acquire(ctx context.Context, mutex string) (*Lease, error) {
	return m.acquire(ctx, mutex, "", false)
}

// TryAcquire holds mutex if that is possible without waiting: it is free in this process
// and one attempt on the store succeeds (or the tenure is already this process's).
func (m *Mutexes) TryAcquire(ctx context.Context, mutex string) (*Lease, error) {
	return m.acquire(ctx, mutex, "", true)
}

// AcquireAs is Acquire for a named holder, and reentrant: if holder already holds mutex,
// it returns at once with a further hold; each hold is released separately, and the mutex
// is given up only when the last one is. holder must not be blank.
func (m *Mutexes) AcquireAs(ctx context.Context, mutex, holder string) (*Lease, error) {
	if err := validateText("holder", holder); err != nil {
		return nil, err
	}
	return m.acquire(ctx, mutex, holder, false)
}

// ReleaseAs releases the most recent unreleased hold of holder on mutex: the same as
// calling Release on that hold's Lease. It returns an error matching ErrNotOwner when
// holder holds nothing on mutex, which includes releasing more often than acquiring and
// releasing another holder's hold.
func (m *Mutexes) ReleaseAs(ctx context.Context, mutex, holder string) error {
	m.mu.Lock()
	e := m.entries[mutex]
	var l *Lease
	if e != nil && e.holder == holder && holder != "" {
		l = e.handles[len(e.handles)-1]
	}
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: %q holds nothing on mutex %q", ErrNotOwner, holder, mutex)
	}
	return l.Release(ctx)
}

// Close gives up every mutex of the registry: waiters return errors matching ErrClosed,
// holders' lease contexts end, and each mutex is released on the store. Later calls fail
// with ErrClosed. Close is idempotent.
func (m *Mutexes) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	entries := make([]*localMutex, 0, len(m.entries))
	for _, e := range m.entries {
		entries = append(entries, e)
		for el := e.waiters.Front(); el != nil; el = el.Next() {
			el.Value.(*waiter).fail(ErrClosed)
		}
		e.waiters.Init()
		e.holder, e.handles = "", nil
	}
	m.mu.Unlock()
	var errs []error
	for _, e := range entries {
		errs = append(errs, e.settle())
	}
	return errors.Join(errs...)
}

func (m *Mutexes) acquire(ctx context.Context, mutex, holder string, once bool) (*Lease, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotAcquired, err)
	}
	if err := validateNames(m.backend, mutex, m.id, true); err != nil {
		return nil, err
	}
	if holder == "" {
		holder = "\x00anonymous-" + strconv.FormatUint(m.anon.Add(1), 10) // never a valid holder name
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	e := m.entries[mutex]
	if e == nil {
		e = m.newEntry(mutex)
		m.entries[mutex] = e
	}
	if e.holder == holder { // reentrant
		l := e.hold()
		m.mu.Unlock()
		return l, nil
	}
	w := &waiter{holder: holder, done: make(chan struct{})}
	w.elem = e.waiters.PushBack(w)
	if e.grantable() && e.waiters.Front() == w.elem {
		e.grantNext()
	}
	m.mu.Unlock()

	_ = e.settle() // a failed start fails w, and every other waiter
	if once {
		return e.awaitOnce(ctx, w)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	return e.taken(ctx, w)
}

func (m *Mutexes) newEntry(mutex string) *localMutex {
	e := &localMutex{m: m, name: mutex}
	e.waiters.Init()
	e.svc = newService(m.backend, localContender{e}, nil, mutex, m.id, m.cfg)
	return e
}

// localMutex is one mutex of a registry: its store contender and its local queue. Fields
// are guarded by m.mu unless noted.
type localMutex struct {
	m    *Mutexes
	name string
	svc  *Service // the store contender; started while the mutex is held or awaited

	holder    string       // the holder now, or ""
	handles   []*Lease     // the holder's unreleased holds, oldest first
	holdStop  func()       // ends the current holder's lease contexts
	waiters   list.List    // *waiter, oldest first
	tenure    *localTenure // the store tenure, while this process believes it owns it
	handOvers int          // local hand-overs in this tenure
	giveBack  bool         // fairness: release on the store, then contend again
	deciding  bool         // the releasing holder asks the store whether others wait

	running  bool // svc is started
	settling bool // a goroutine is starting or stopping svc
	dirty    bool // the state changed while settling
}

type localTenure struct {
	ctx   context.Context
	owner Owner
}

// waiter is one goroutine waiting for a mutex.
type waiter struct {
	holder string
	elem   *list.Element
	done   chan struct{} // closed when granted or failed
	lease  *Lease        // set when granted
	err    error         // set when failed
}

func (w *waiter) fail(err error) {
	w.err = err
	close(w.done)
}

func (e *localMutex) tenureLive() bool { return e.tenure != nil && e.tenure.ctx.Err() == nil }

// grantable reports whether the mutex can go to the oldest waiter now. Called with m.mu
// held.
func (e *localMutex) grantable() bool {
	return e.holder == "" && !e.deciding && e.tenureLive() && e.waiters.Len() > 0
}

// grantNext gives the mutex to the oldest waiter, and to every other waiter of the same
// holder. Called with m.mu held, the mutex free, the tenure live and a waiter queued.
func (e *localMutex) grantNext() {
	first := e.waiters.Front().Value.(*waiter)
	e.holder = first.holder
	ctx, cancel := context.WithCancelCause(e.tenure.ctx)
	e.holdStop = func() { cancel(context.Canceled) }
	for el := e.waiters.Front(); el != nil; {
		next := el.Next()
		if w := el.Value.(*waiter); w.holder == first.holder {
			e.waiters.Remove(el)
			w.lease = e.newLease(ctx)
			close(w.done)
		}
		el = next
	}
}

// hold returns a further hold for the current holder. Called with m.mu held.
func (e *localMutex) hold() *Lease {
	return e.newLease(e.handles[0].ctx)
}

func (e *localMutex) newLease(ctx context.Context) *Lease {
	l := &Lease{mutex: e.name, owner: e.tenure.owner, ctx: ctx}
	l.give = func(context.Context) error { return e.release(l) }
	e.handles = append(e.handles, l)
	return l
}

// taken returns the lease w was granted, or the reason it was not, after w stopped
// waiting.
func (e *localMutex) taken(ctx context.Context, w *waiter) (*Lease, error) {
	m := e.m
	m.mu.Lock()
	select {
	case <-w.done:
		m.mu.Unlock()
		if w.err != nil {
			return nil, errors.Join(ErrNotAcquired, w.err)
		}
		return w.lease, nil
	default:
	}
	e.waiters.Remove(w.elem)
	e.dirty = true
	m.mu.Unlock()
	_ = e.settle()
	return nil, errors.Join(ErrNotAcquired, ctx.Err())
}

// awaitOnce waits for the outcome of one store attempt (or a grant) and leaves the queue
// if it brought nothing.
func (e *localMutex) awaitOnce(ctx context.Context, w *waiter) (*Lease, error) {
	e.m.mu.Lock()
	attempted := (<-chan struct{})(nil)
	if r := e.svc.currentRun(); r != nil {
		attempted = r.attempted
	}
	e.m.mu.Unlock()
	if attempted != nil {
		select {
		case <-attempted:
		case <-w.done:
		case <-ctx.Done():
		}
	}
	// The tenure's OnAcquired comes through the dispatcher; grant now if it has not yet.
	e.m.mu.Lock()
	if e.holder == "" && e.tenure == nil {
		if t := e.svc.currentTenure(); t != nil {
			e.tenure = t
			if e.grantable() && e.waiters.Front() == w.elem {
				e.grantNext()
			}
		}
	}
	e.m.mu.Unlock()
	l, err := e.taken(ctx, w)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: mutex %q is held by another holder or process", ErrNotAcquired, e.name)
	}
	return l, err
}

// release gives one hold of lease l back.
func (e *localMutex) release(l *Lease) error {
	m := e.m
	m.mu.Lock()
	i := -1
	for j, h := range e.handles {
		if h == l {
			i = j
		}
	}
	if i < 0 { // released by Close
		m.mu.Unlock()
		return nil
	}
	e.handles = append(e.handles[:i], e.handles[i+1:]...)
	if len(e.handles) > 0 {
		m.mu.Unlock()
		return nil
	}
	e.holder = ""
	e.holdStop()
	if e.grantable() && e.handOvers >= m.cfg.localHandOvers {
		// Fairness: give the mutex back if others wait, or if the store cannot tell.
		e.deciding = true
		m.mu.Unlock()
		waiting, known := e.svc.othersWaiting(context.Background())
		m.mu.Lock()
		e.deciding = false
		if known && !waiting {
			e.handOvers = 0
		} else {
			e.giveBack = true
		}
	}
	if !e.giveBack && e.grantable() {
		e.handOvers++
		e.grantNext()
		m.mu.Unlock()
		return nil
	}
	e.dirty = true
	m.mu.Unlock()
	return e.settle()
}

// settle starts or stops the store contender until it matches what the queue needs: running
// while the mutex is held or awaited, stopped otherwise, and stopped once to give the mutex
// back for fairness. One goroutine settles at a time; others mark the state dirty. An
// entry that needs nothing leaves the registry.
func (e *localMutex) settle() error {
	m := e.m
	m.mu.Lock()
	if e.settling {
		e.dirty = true
		m.mu.Unlock()
		return nil
	}
	e.settling = true
	var errs []error
	for {
		e.dirty = false
		needed := !m.closed && (e.holder != "" || e.waiters.Len() > 0)
		switch {
		case e.running && (!needed || e.giveBack):
			m.mu.Unlock()
			err := e.svc.Stop(context.Background())
			m.mu.Lock()
			e.running = false
			e.tenure = nil
			if err != nil {
				errs = append(errs, err)
			}
			continue
		case !e.running && needed:
			var pause time.Duration
			if e.giveBack {
				pause, e.giveBack = giveBackPause, false
			}
			m.mu.Unlock()
			err := e.svc.startAfter(context.Background(), pause)
			m.mu.Lock()
			if err != nil {
				for el := e.waiters.Front(); el != nil; el = el.Next() {
					el.Value.(*waiter).fail(err)
				}
				e.waiters.Init()
				errs = append(errs, err)
				continue
			}
			e.running = true
			continue
		case e.dirty:
			continue
		}
		break
	}
	e.settling = false
	if !e.running && e.holder == "" && e.waiters.Len() == 0 && m.entries[e.name] == e {
		delete(m.entries, e.name)
	}
	m.mu.Unlock()
	return errors.Join(errs...)
}

// localContender receives the store tenure of a localMutex.
type localContender struct{ e *localMutex }

func (c localContender) Mutex() string       { return c.e.name }
func (c localContender) ContenderID() string { return c.e.m.id }

func (c localContender) OnAcquired(ctx context.Context, s State) {
	e := c.e
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if e.tenure != nil && e.tenure.ctx == ctx {
		return // already taken up by a TryAcquire
	}
	e.tenure = &localTenure{ctx: ctx, owner: s.After}
	e.handOvers = 0
	if e.grantable() {
		e.grantNext()
	}
}

func (c localContender) OnReleased(State) {
	e := c.e
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	e.tenure = nil
}
