package simba_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/goroutine"
)

// faultyBackend wraps a backend (the memory store's) and lets a test break its calls: a
// stalled call blocks, ignoring its context, until the test lets it go (a server that is
// SIGSTOPped); a hanging call blocks until its context ends (a server that does not
// answer, to a client that honours deadlines); a failing call returns an error without
// reaching the store (a closed port, a refused login).
type faultyBackend struct {
	simba.Backend
	keeps bool // a stalled call still returns when its context ends (keepingBackend)

	mu      sync.Mutex
	stalled map[string]chan struct{} // op -> closed when the stall ends
	failing map[string]error         // op -> the error it returns
	hanging map[string]bool
	calls   map[string]int
	callers map[string]uint64 // op -> the goroutine that made its last call
}

// The operations a faultyBackend can break.
const (
	opStart   = "start"
	opAcquire = "acquire"
	opRelease = "release"
	opWaiters = "waiters" // WaitList.OthersWaiting
	opLookup  = "lookup"  // LeaseContention.Lookup
	opAnswer  = "answer"  // an Acquire's answer, once the store has given it
)

// newFaultyStore returns a new memory store and a faultyBackend on it.
func newFaultyStore() (*memory.Store, *faultyBackend) {
	store := memory.NewStore()
	b, _ := memory.New(store)
	return store, newFaultyBackend(b)
}

// keepingBackend is a faultyBackend that keeps its calls' deadlines
// (backend.DeadlineKeeper): its stalled calls return when their context ends, so simba
// makes the calls a caller waits for on the caller's goroutine.
type keepingBackend struct{ *faultyBackend }

func (keepingBackend) KeepsDeadlines() bool { return true }

// faultyKind is a kind of faultyBackend: one that keeps deadlines or not.
type faultyKind struct {
	name string
	new  func() (*memory.Store, *faultyBackend, simba.Backend) // the backend to use, and its faults
}

// faultyKinds are both kinds: the root's calls differ between them.
var faultyKinds = []faultyKind{
	{"ignores deadlines", func() (*memory.Store, *faultyBackend, simba.Backend) {
		store, f := newFaultyStore()
		return store, f, f
	}},
	{"keeps deadlines", func() (*memory.Store, *faultyBackend, simba.Backend) {
		store, f := newFaultyStore()
		f.keeps = true
		return store, f, keepingBackend{f}
	}},
}

// eachFaultyKind runs test for each kind of faultyBackend, in a synctest bubble.
func eachFaultyKind(t *testing.T, test func(t *testing.T, store *memory.Store, f *faultyBackend, b simba.Backend)) {
	for _, kind := range faultyKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, f, b := kind.new()
				test(t, store, f, b)
			})
		})
	}
}

func newFaultyBackend(b simba.Backend) *faultyBackend {
	return &faultyBackend{Backend: b, stalled: map[string]chan struct{}{}, failing: map[string]error{}, hanging: map[string]bool{}, calls: map[string]int{}, callers: map[string]uint64{}}
}

// stall makes every later call of op block until unstall.
func (f *faultyBackend) stall(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stalled[op] == nil {
		f.stalled[op] = make(chan struct{})
	}
}

// unstall lets the stalled calls of op go on.
func (f *faultyBackend) unstall(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch := f.stalled[op]; ch != nil {
		close(ch)
		delete(f.stalled, op)
	}
}

// fail makes later calls of op return err (nil: succeed again).
func (f *faultyBackend) fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[op] = err
}

// hang makes later calls of op block until their context ends (false: answer again).
func (f *faultyBackend) hang(op string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hanging[op] = on
}

func (f *faultyBackend) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// caller returns the goroutine that made the last call of op.
func (f *faultyBackend) caller(op string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.callers[op]
}

// enter applies the faults of op to one call.
func (f *faultyBackend) enter(ctx context.Context, op string) error {
	f.mu.Lock()
	f.calls[op]++
	f.callers[op] = goroutine.ID()
	ch, err, hang := f.stalled[op], f.failing[op], f.hanging[op]
	f.mu.Unlock()
	if ch != nil && f.keeps {
		select { // a stalled server, to a client that keeps deadlines
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("no answer: %w", ctx.Err())
		}
	} else if ch != nil {
		<-ch // a stalled server ignores the client's deadline
	}
	if hang {
		<-ctx.Done()
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
	return err
}

// Holds forwards to the wrapped backend.
func (f *faultyBackend) Holds(k backend.Kind) bool {
	h, ok := f.Backend.(backend.Holder)
	return ok && h.Holds(k)
}

func (f *faultyBackend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := f.enter(ctx, opStart); err != nil {
		return nil, err
	}
	c, err := f.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return &faultyContention{LeaseContention: c.(backend.LeaseContention), f: f}, nil
}

type faultyContention struct {
	backend.LeaseContention
	f *faultyBackend
}

func (c *faultyContention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := c.f.enter(ctx, opAcquire); err != nil {
		return backend.Record{}, err
	}
	rec, err := c.LeaseContention.Acquire(ctx)
	if err := c.f.enter(ctx, opAnswer); err != nil {
		return backend.Record{}, err
	}
	return rec, err
}

func (c *faultyContention) Release(ctx context.Context) error {
	if err := c.f.enter(ctx, opRelease); err != nil {
		return err
	}
	return c.LeaseContention.Release(ctx)
}

func (c *faultyContention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := c.f.enter(ctx, opLookup); err != nil {
		return backend.Record{}, err
	}
	return c.LeaseContention.Lookup(ctx)
}

func (c *faultyContention) OthersWaiting(ctx context.Context) (bool, error) {
	if err := c.f.enter(ctx, opWaiters); err != nil {
		return false, err
	}
	return c.LeaseContention.(backend.WaitList).OthersWaiting(ctx)
}
