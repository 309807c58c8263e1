package simba

import (
	"context"

	"github.com/simba-go/simba/backend"
)

// Semaphore hands out up to a fixed number of permits of a name across processes: each
// Acquire holds one, as a Lease with its own context, renewal and fencing token, until
// Release. Waiters are served first come, first served, across processes. It is safe for
// concurrent use; Close it when done.
type Semaphore struct {
	pool *pool
}

// NewSemaphore returns a semaphore of permits permits for name on b, whose backend must
// keep semaphores (backend.Holder). Every process gives the same count; the store refuses
// (ErrRefused) one that gives another while the semaphore is held or awaited.
func NewSemaphore(b Backend, name string, permits int, opts ...LockerOption) (*Semaphore, error) {
	if permits < 1 {
		return nil, invalid("permits", permits, "must be >= 1")
	}
	cfg, err := configure(b, opts, LockerOption.applyLocker)
	if err != nil {
		return nil, err
	}
	p, err := newPool(b, name, backend.Hold{Kind: backend.Semaphore, Permits: permits}, cfg, "")
	if err != nil {
		return nil, err
	}
	return &Semaphore{pool: p}, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.pool.name }

// Permits returns the permit count.
func (s *Semaphore) Permits() int { return s.pool.hold.Permits }

// Acquire blocks until it holds a permit or ctx ends, as Locker.Acquire does.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return s.pool.acquire(ctx, false, "")
}

// TryAcquire makes a single attempt, as Locker.TryAcquire does: ErrHeld when no permit is
// free for it.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.pool.acquire(ctx, true, "")
}

// Close releases the permits held, ends the acquisitions under way (ErrClosed) and waits
// for the semaphore's store work. It is idempotent.
func (s *Semaphore) Close() error { return s.pool.close() }
