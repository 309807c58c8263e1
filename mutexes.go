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

// giveBackPause is how long a Mutexes entry that gave its mutex back waits before it
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
// Every call returns by its context's deadline; starting and stopping the store
// contenders happens on goroutines of the registry, which Close waits for. When a store
// cannot be reached, Acquire waits (the contender retries with backoff) until its context
// ends, and TryAcquire fails at once with the store's error. On a closed backend both fail
// at once, with an error matching ErrClosed.
//
// The registry keeps an entry only while a mutex is held or awaited: names used once leave
// nothing behind. Mutexes is safe for concurrent use; Close releases everything.
type Mutexes struct {
	backend Backend
	cfg     config
	id      string
	anon    atomic.Uint64 // numbers the holders of plain Acquire calls
	workers sync.WaitGroup
	ctx     context.Context // ends at Close: cuts a worker's start-up or backoff short
	cancel  context.CancelFunc

	mu       sync.Mutex
	entries  map[string]*entry
	closed   bool
	errs     []error // store errors of the stops Close made
	storeErr error   // the store's error in the last acquisition that ended; nil if granted
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
	m := &Mutexes{backend: b, cfg: cfg, id: id, entries: map[string]*entry{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
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
// is given up only when the last one is. holder must not be blank. When the tenure of
// holder's holds has been lost, a further hold is refused with an error matching
// ErrOwnershipLost: release the lost holds first.
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
	if e != nil && e.holder == holder && holder != "" && len(e.holds) > 0 {
		l = e.holds[len(e.holds)-1]
	}
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: %q holds nothing on mutex %q", ErrNotOwner, holder, mutex)
	}
	return l.Release(ctx)
}

// Health returns the registry's state now, for HealthHandler: it is running until Close,
// leads while any of its mutexes is held, and its error is the store's last: of a
// contender that runs, or else of the last acquisition that ended (nil when granted).
func (m *Mutexes) Health() Health {
	m.mu.Lock()
	entries := make([]*entry, 0, len(m.entries))
	h := Health{Contender: m.id, Status: StatusRunning, Err: m.storeErr}
	if m.closed {
		h.Status = StatusInitial
	}
	for _, e := range m.entries {
		entries = append(entries, e)
		h.Leading = h.Leading || e.holder != ""
	}
	m.mu.Unlock()
	for _, e := range entries { // the services' own locks come after the registry's
		if err := e.svc.Err(); err != nil {
			h.Err = err
		}
		h.Overdue = max(h.Overdue, e.svc.overdue())
	}
	return h
}

// Close gives up every mutex of the registry: waiters return errors matching ErrClosed,
// holders' lease contexts end, and each mutex is released on the store. It waits for every
// goroutine of the registry, and returns the store's errors. Later calls fail with
// ErrClosed. Close is idempotent.
func (m *Mutexes) Close() error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		m.cancel()
		for _, e := range m.entries {
			e.handle(event{kind: evClose})
		}
	}
	m.mu.Unlock()
	m.workers.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.errs...)
}

// acquire is Acquire, TryAcquire (once) and AcquireAs, told to the Observer if there is
// one.
func (m *Mutexes) acquire(ctx context.Context, mutex, holder string, once bool) (*Lease, error) {
	if m.cfg.observer == nil || ctx == nil {
		return m.obtain(ctx, mutex, holder, once)
	}
	began := m.cfg.now()
	lease, err := m.obtain(ctx, mutex, holder, once)
	m.cfg.observeAcquire(ctx, mutex, m.id, once, began, lease, err)
	return lease, err
}

func (m *Mutexes) obtain(ctx context.Context, mutex, holder string, once bool) (*Lease, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", mutex), err)
	}
	if err := validateNames(m.backend, mutex, m.id, true); err != nil {
		return nil, err
	}
	anonymous := holder == ""
	if anonymous {
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
	if !anonymous && e.holder == holder {
		l, err := e.reenter()
		m.mu.Unlock()
		return l, err
	}
	w := &waiter{holder: holder, once: once, done: make(chan struct{})}
	w.elem = e.waiters.PushBack(w)
	e.handle(event{kind: evQueue})
	m.mu.Unlock()
	if once {
		return e.tryOnce(ctx, w)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	return e.taken(ctx, w)
}

func (m *Mutexes) newEntry(mutex string) *entry {
	e := &entry{m: m, name: mutex, changed: make(chan struct{})}
	e.waiters.Init()
	e.svc = newService(m.backend, RoleLock, hooks{acquired: e.acquired, released: e.released}, mutex, m.id, m.cfg)
	return e
}

// waiter is one goroutine waiting for a mutex.
type waiter struct {
	holder string
	once   bool // TryAcquire: fails rather than waits
	elem   *list.Element
	done   chan struct{} // closed when granted or failed
	lease  *Lease        // set when granted
	err    error         // set when failed
}

func (w *waiter) fail(err error) {
	w.err = err
	close(w.done)
}

// finished reports whether w has stopped waiting: granted or failed.
func (w *waiter) finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// outcome returns what w was given, once finished.
func (w *waiter) outcome() (*Lease, error) {
	if w.err != nil {
		return nil, w.err
	}
	return w.lease, nil
}

// acquired and released receive the store tenures of an entry (its hooks).
func (e *entry) acquired(t *tenure, _ State) {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	e.handle(event{kind: evAcquired, tenure: t})
}

func (e *entry) released(State) {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	e.handle(event{kind: evReleased})
}
