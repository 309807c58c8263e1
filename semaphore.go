package simba

import (
	"context"

	"github.com/simba-go/simba/backend"
)

// Semaphore hands out a fixed number of permits of a name across processes, first come,
// first served; each permit held is a Lease of its own.
type Semaphore struct {
	pool *pool
}

// NewSemaphore returns a semaphore of permits for name on b, which must keep them
// (backend.Holder). A count other than its holders' and waiters' is refused (ErrRefused).
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

// Acquire blocks until it holds a permit, as Locker.Acquire does.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return s.pool.acquire(ctx, false, "")
}

// TryAcquire makes one attempt: ErrHeld if no permit is free for it.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.pool.acquire(ctx, true, "")
}

// Close releases the permits held and ends the acquisitions under way; see the package doc.
func (s *Semaphore) Close() error { return s.pool.close() }
