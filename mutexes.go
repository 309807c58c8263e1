package simba

import (
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"

	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLocalHandOvers is WithLocalHandOvers' default.
const DefaultLocalHandOvers = 16

// giveBackPause is how long a Mutexes entry that gave its mutex back waits before it
// contends again, so that a waiter of another process, woken by the release, acquires
// first.
const giveBackPause = 10 * time.Millisecond

// WithLocalHandOvers sets how many local hand-overs (>= 0) a Mutexes store tenure serves
// before the mutex goes back to the store, if others wait.
func WithLocalHandOvers(n int) MutexesOption {
	return mutexesOption(func(c *config) { c.localHandOvers = n })
}

// Mutexes shares mutexes among a process's goroutines: one store contender per mutex, a
// local FIFO queue of waiters handed the tenure without a store round trip.
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

// NewMutexes returns a registry of mutexes on b, all under one contender ID.
func NewMutexes(b Backend, opts ...MutexesOption) (*Mutexes, error) {
	cfg, err := configure(b, opts, MutexesOption.applyMutexes)
	if err != nil {
		return nil, err
	}
	id := cfg.ownID()
	if err := ValidateContenderID(id); err != nil {
		return nil, err
	}
	if v, ok := b.(backend.Validator); ok {
		if err := v.ValidateContenderID(id); err != nil {
			return nil, err
		}
	}
	m := &Mutexes{backend: b, cfg: cfg, id: id, entries: map[string]*entry{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// ContenderID returns the registry's contender ID.
func (m *Mutexes) ContenderID() string { return m.id }

// Len returns the number of mutexes held or awaited through the registry.
func (m *Mutexes) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Waiting returns how many goroutines of this process wait for mutex.
func (m *Mutexes) Waiting(mutex string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[mutex]; e != nil {
		return e.waiters.Len()
	}
	return 0
}

// Acquire is Locker.Acquire for mutex, each call a holder of its own.
func (m *Mutexes) Acquire(ctx context.Context, mutex string) (*Lease, error) {
	return m.acquire(ctx, mutex, "", false)
}

// TryAcquire holds mutex if it is free locally and one store attempt succeeds.
func (m *Mutexes) TryAcquire(ctx context.Context, mutex string) (*Lease, error) {
	return m.acquire(ctx, mutex, "", true)
}

// AcquireAs is a reentrant Acquire for a named holder (a request ID): the mutex goes on
// once its every hold is released; none is given on a lost tenure.
func (m *Mutexes) AcquireAs(ctx context.Context, mutex, holder string) (*Lease, error) {
	if err := validateText("holder", holder); err != nil {
		return nil, err
	}
	return m.acquire(ctx, mutex, holder, false)
}

// ReleaseAs releases holder's latest hold on mutex (ErrNotOwner if none).
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

// Health returns the registry's state; Leading: any of its mutexes is held.
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

// Close releases every hold and fails the waiters; see the package doc.
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

// acquire is Acquire, TryAcquire (once) and AcquireAs, told to the observe.Observer if there is
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
	e.svc = newService(m.backend, observe.RoleLock, hooks{acquired: e.acquired, released: e.released}, mutex, m.id, m.cfg)
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
