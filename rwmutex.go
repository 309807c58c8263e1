package simba

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/backend"
)

// RWMutex is a read-write lock of a name across processes, served first come, first
// served: a waiting writer keeps later readers out. Each hold is a Lease of its own, and
// the tokens of one lock grow with every hold, read or write.
type RWMutex struct {
	readers, writers *pool
}

// NewRWMutex returns a read-write lock for name on b, which must keep them (backend.Holder).
func NewRWMutex(b Backend, name string, opts ...LockerOption) (*RWMutex, error) {
	cfg, err := configure(b, opts, LockerOption.applyLocker)
	if err != nil {
		return nil, err
	}
	readers, err := newPool(b, name, backend.Hold{Kind: backend.RWLock, Shared: true}, cfg, "/r")
	if err != nil {
		return nil, err
	}
	writers, err := newPool(b, name, backend.Hold{Kind: backend.RWLock}, cfg, "/w")
	if err != nil {
		return nil, err
	}
	return &RWMutex{readers: readers, writers: writers}, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.readers.name }

// Lock blocks until it holds the lock alone, as Locker.Acquire does.
func (m *RWMutex) Lock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, false) }

// TryLock makes one attempt to hold the lock alone: ErrHeld if it is held.
func (m *RWMutex) TryLock(ctx context.Context) (*WriteLease, error) { return m.lock(ctx, true) }

func (m *RWMutex) lock(ctx context.Context, once bool) (*WriteLease, error) {
	l, err := m.writers.acquire(ctx, once, "")
	if err != nil {
		return nil, err
	}
	return &WriteLease{Lease: l, m: m}, nil
}

// RLock blocks until it holds the lock for reading, as Locker.Acquire does.
func (m *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return m.readers.acquire(ctx, false, "")
}

// TryRLock makes one attempt to read: ErrHeld if a writer holds the lock or waits.
func (m *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return m.readers.acquire(ctx, true, "")
}

// Close releases the holds and ends the acquisitions under way; see the package doc.
func (m *RWMutex) Close() error { return errors.Join(m.writers.close(), m.readers.close()) }

// WriteLease is a write hold of an RWMutex.
type WriteLease struct {
	*Lease
	m *RWMutex
}

// Downgrade turns the write hold into a read hold (larger token, no writer in between);
// on failure the write hold is kept: ErrOwnershipLost if it was lost.
func (w *WriteLease) Downgrade(ctx context.Context) (*Lease, error) {
	if w == nil || w.Lease == nil {
		return nil, fmt.Errorf("%w: nil lease", ErrNotOwner)
	}
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if w.released.Load() {
		return nil, fmt.Errorf("%w: write lease of %q already released", ErrNotOwner, w.mutex)
	}
	lost := func() error {
		return describe(ErrOwnershipLost, fmt.Sprintf("read-write lock %q: the write hold was lost before the downgrade", w.mutex), context.Cause(w.ctx))
	}
	if w.ctx.Err() != nil {
		return nil, lost()
	}
	// The read hold is taken beside the write hold, ahead of those waiting; the write hold
	// is released only once the read hold stands.
	r, err := w.m.readers.acquire(ctx, true, w.owner.ID)
	if err != nil {
		return nil, err
	}
	// The read hold was admitted while the write hold was believed throughout (its context
	// checks the local TTL end as it is read): no writer can have come in between.
	if w.ctx.Err() != nil {
		_ = r.Release(ctx)
		return nil, lost()
	}
	_ = w.Release(ctx) // a failed release goes on in the background; the read hold stands
	return r, nil
}
