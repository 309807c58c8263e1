// Package memory is simba's embedded backend: an in-process store with the semantics of the
// server stores, so that every API works with no server. It is the default in examples and
// the fastest backend in tests.
//
// A Store holds the owner records; a Backend is one client of a Store. Several Backends on
// one Store stand in for several processes sharing a server: each contends with its own
// calls, and one can be closed (a process that dies) while the others go on.
//
// Storage: one record per mutex with owner ID, acquiredAt, ttlAt, transitionAt, token and
// owner value (Participant.Value, replaced with the token at every new tenure), as in the
// SQL table, and a FIFO list of waiting contenders, as in the Redis waiting set.
// Acquire takes a free mutex (its transition window has ended) or renews the caller's own;
// Release frees the caller's mutex and wakes the oldest waiter at once, so a hand-over
// costs no polling delay. HandOff (backend.HandOffer) gives the owner's mutex to a waiting
// contender, with a new token, by a Participant.Grant, and queues the caller last.
//
// Slots (backend.SlotRecorder): per mutex, the last slot a Scheduler started, its instant
// in Unix nanoseconds and its tenure's token, apart from the owner record. Nothing removes
// it: it stays in the Store, a few bytes per mutex, uncounted by Len.
//
// Clock: the local monotonic clock (time.Now), the only clock there is in one process.
//
// Fencing token: a counter of the Store, incremented for every new tenure of any mutex, so
// tokens of one mutex strictly increase even after its record was dropped. A record
// whose owner has released, and that no one waits for, is dropped from the Store.
package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/closing"
)

// Store is an in-process mutex store. Share one Store between Backends to simulate several
// processes on one server. The zero Store is not usable; call NewStore. A Store must not
// be copied.
type Store struct {
	mu      sync.Mutex
	records map[string]*record
	groups  map[groupKey]*group // semaphores and read-write locks (holds.go)
	slots   map[groupKey]slot   // per mutex, the last slot a Scheduler started (slots.go)
	tokens  uint64              // the last fencing token handed out
}

// record is one mutex's owner record and the contentions waiting for or watching it.
type record struct {
	owner        string
	acquiredAt   time.Time
	ttlAt        time.Time
	transitionAt time.Time
	token        uint64
	value        string        // the owner's value, set with token: the tenure's
	waiters      []*contention // contenders that found the mutex owned, oldest first
	watchers     []*contention // retrievers
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{records: make(map[string]*record), groups: make(map[groupKey]*group), slots: make(map[groupKey]slot)}
}

// Len returns the number of records the store holds: mutexes with a live owner or with
// waiting contenders or watching retrievers, semaphores and read-write locks with holders
// or waiters. A test can use it to see that nothing is left behind.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	n := len(s.records)
	for _, g := range s.groups {
		g.prune(now)
		if len(g.holders) > 0 || len(g.waiters) > 0 {
			n++
		}
	}
	return n
}

// Backend is one client of a Store. It is safe for concurrent use.
type Backend struct {
	store  *Store
	closed atomic.Bool
	open   closing.Set // the Participant.Closed of open contentions
}

var (
	_ simba.Backend          = (*Backend)(nil)
	_ backend.DeadlineKeeper = (*Backend)(nil)
)

// New returns a backend on store.
func New(store *Store) (*Backend, error) {
	if store == nil || store.records == nil {
		return nil, simba.InvalidArgument("store", nil, "must be a Store from NewStore")
	}
	return &Backend{store: store}, nil
}

// Close disconnects the backend from its store, as if its process had died: later calls of
// its contentions fail with simba.ErrClosed and nothing is released, so owner records
// lapse after ttl + transition; acquisitions waiting for their turn end at once
// (Participant.Closed). StopContend still works. Close is idempotent.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.open.Close()
	return nil
}

// KeepsValues reports that the backend keeps owner values (Participant.Value) for
// mutexes; see backend.ValueKeeper.
func (b *Backend) KeepsValues(k backend.Kind) bool { return k == backend.Mutex }

// KeepsDeadlines reports that the backend's calls return by their context's deadline:
// they never block; see backend.DeadlineKeeper.
func (b *Backend) KeepsDeadlines() bool { return true }

// StartContend registers a participant; see simba.Backend.
func (b *Backend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	c := &contention{
		backend:    b,
		mutex:      p.Mutex,
		id:         p.ContenderID,
		ttl:        p.TTL,
		transition: p.Transition,
		wake:       p.Wake,
		grant:      p.Grant,
		hold:       p.Hold,
		value:      p.Value,
	}
	forget, ok := b.open.Add(p.Closed)
	if !ok {
		return nil, fmt.Errorf("simba/memory: %w", simba.ErrClosed)
	}
	c.forget = forget
	if c.id == "" {
		s := b.store
		s.mu.Lock()
		r := s.record(c.mutex)
		r.watchers = append(r.watchers, c)
		s.mu.Unlock()
	}
	return c, nil
}

func (b *Backend) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return fmt.Errorf("simba/memory: %w", simba.ErrClosed)
	}
	return nil
}

// contention is one participant's contention on the store.
type contention struct {
	backend         *Backend
	mutex, id       string
	ttl, transition time.Duration
	wake            func()
	grant           func(backend.Record, time.Time) // may be nil (a Participant without one)
	hold            backend.Hold                    // a semaphore's or read-write lock's (holds.go); zero for a mutex
	value           string                          // the owner value of the participant's tenures
	asked           bool                            // a hold's: Acquire has been called (holds.go)
	forget          func()                          // forgets the participant's Closed: at StopContend
}

var (
	_ backend.LeaseContention = (*contention)(nil)
	_ backend.WaitList        = (*contention)(nil)
)

func (c *contention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := c.backend.check(ctx); err != nil {
		return backend.Record{}, err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if c.hold.Kind != backend.Mutex {
		return s.acquireHold(c, now)
	}
	r := s.record(c.mutex)
	free := r.transitionAt.Before(now)
	mine := r.owner == c.id && r.transitionAt.After(now)
	switch {
	case free || mine:
		if free {
			s.take(r, c, now)
		}
		r.extend(c, now)
	case !slices.Contains(r.waiters, c):
		r.waiters = append(r.waiters, c)
	}
	return r.answer(now), nil
}

func (c *contention) Release(ctx context.Context) error {
	if err := c.backend.check(ctx); err != nil {
		return err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.hold.Kind != backend.Mutex {
		s.releaseHold(c, time.Now())
		return nil
	}
	r, ok := s.records[c.mutex]
	if !ok {
		return nil
	}
	r.waiters = remove(r.waiters, c)
	if r.owner == c.id {
		*r = record{waiters: r.waiters, watchers: r.watchers}
		if len(r.waiters) > 0 {
			next := r.waiters[0]
			r.waiters = r.waiters[1:]
			next.wake()
		}
		r.wakeWatchers()
	}
	s.drop(c.mutex, r, time.Now())
	return nil
}

func (c *contention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := c.backend.check(ctx); err != nil {
		return backend.Record{}, err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if c.hold.Kind != backend.Mutex {
		return s.lookupHold(c, now), nil
	}
	r, ok := s.records[c.mutex]
	if !ok {
		return backend.Record{}, nil
	}
	return r.answer(now), nil
}

func (c *contention) OthersWaiting(ctx context.Context) (bool, error) {
	if err := c.backend.check(ctx); err != nil {
		return false, err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.hold.Kind != backend.Mutex {
		g, ok := s.groups[groupKey{c.hold.Kind, c.mutex}]
		return ok && slices.ContainsFunc(g.waiters, func(w *waiter) bool { return w.c != c }), nil
	}
	r, ok := s.records[c.mutex]
	if !ok {
		return false, nil
	}
	for _, w := range r.waiters {
		if w != c {
			return true, nil
		}
	}
	return false, nil
}

func (c *contention) StopContend(context.Context) error {
	c.forget()
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.hold.Kind != backend.Mutex {
		s.leaveHold(c, time.Now())
		return nil
	}
	r, ok := s.records[c.mutex]
	if !ok {
		return nil
	}
	r.waiters = remove(r.waiters, c)
	r.watchers = remove(r.watchers, c)
	s.drop(c.mutex, r, time.Now())
	return nil
}

// record returns the mutex's record, creating it. Called with s.mu held.
func (s *Store) record(mutex string) *record {
	r, ok := s.records[mutex]
	if !ok {
		r = &record{}
		s.records[mutex] = r
	}
	return r
}

// take makes c the owner of r with a new tenure (a new token, c's value) from now, and
// tells r's watchers. Called with s.mu held.
func (s *Store) take(r *record, c *contention, now time.Time) {
	s.tokens++
	r.token, r.value, r.acquiredAt, r.owner = s.tokens, c.value, now, c.id
	r.waiters = remove(r.waiters, c)
	r.wakeWatchers()
}

// extend sets the TTL and transition ends of owner c's tenure from now.
func (r *record) extend(c *contention, now time.Time) {
	r.ttlAt = now.Add(c.ttl)
	r.transitionAt = r.ttlAt.Add(c.transition)
}

// drop deletes a record that protects no one and that no one waits for or watches.
// Called with s.mu held.
func (s *Store) drop(mutex string, r *record, now time.Time) {
	if len(r.waiters) == 0 && len(r.watchers) == 0 && (r.owner == "" || r.transitionAt.Before(now)) {
		delete(s.records, mutex)
	}
}

// answer returns the record as durations from now. An owner whose transition window has
// ended is no owner.
func (r *record) answer(now time.Time) backend.Record {
	if r.owner == "" || r.transitionAt.Before(now) {
		return backend.Record{}
	}
	return backend.Record{
		Owner:      r.owner,
		TTL:        r.ttlAt.Sub(now),
		Transition: r.transitionAt.Sub(now),
		Held:       now.Sub(r.acquiredAt),
		Token:      r.token,
		Value:      r.value,
	}
}

func (r *record) wakeWatchers() {
	for _, w := range r.watchers {
		w.wake()
	}
}

func remove(list []*contention, c *contention) []*contention {
	if i := slices.Index(list, c); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}
