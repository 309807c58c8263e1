package simba

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Locker acquires a mutex for a critical section: Acquire blocks until this contender owns
// the mutex or its context ends, and returns a Lease that owns the tenure until Release.
// While held, the lease renews itself; its Context ends as soon as ownership could have
// lapsed, so work that must not outlive ownership should use it.
//
// A Locker is one contender with one ID: it holds at most one lease at a time, and
// acquiring while it holds or acquires returns ErrAlreadyHeld. Goroutines that each want
// the mutex use a Locker each. A Locker is safe for concurrent use and needs no Close: it
// runs goroutines only while it acquires or holds.
type Locker struct {
	svc *Service // restarted for every acquisition; one at a time

	mu   sync.Mutex
	busy bool // an acquisition is under way or a lease is outstanding
}

// NewLocker returns a Locker for mutex on b. Its contender ID is a new HostContenderID
// unless WithContenderID sets one. WithInitialDelay is not accepted.
func NewLocker(b Backend, mutex string, opts ...Option) (*Locker, error) {
	cfg, err := checkedConfig(b, opts, forLocker)
	if err != nil {
		return nil, err
	}
	id := cfg.ownID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	svc := newService(b, nil, nil, mutex, id, cfg)
	svc.oneTenure = true
	return &Locker{svc: svc}, nil
}

// Mutex returns the name of the mutex.
func (l *Locker) Mutex() string { return l.svc.mutex }

// ContenderID returns the locker's contender ID.
func (l *Locker) ContenderID() string { return l.svc.id }

// Acquire blocks until the locker owns the mutex or ctx ends. Waiting costs no CPU: the
// locker contends on the contend period and at once when the store announces a release.
//
// When ctx ends first, the error matches both ErrNotAcquired and ctx's error under
// errors.Is (and wraps the store's error too if the last attempt failed), and whatever
// was acquired meanwhile is released again. An already ended ctx returns at once without
// touching the store.
func (l *Locker) Acquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, false) }

// TryAcquire makes a single attempt: it returns a Lease if the locker owns the mutex after
// one acquire call, and an error matching ErrNotAcquired otherwise, which also wraps the
// store's error when the attempt failed.
func (l *Locker) TryAcquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, true) }

func (l *Locker) acquire(ctx context.Context, once bool) (*Lease, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotAcquired, err)
	}
	l.mu.Lock()
	if l.busy {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: mutex %q, contender %q", ErrAlreadyHeld, l.Mutex(), l.ContenderID())
	}
	l.busy = true
	l.mu.Unlock()

	svc := l.svc
	if err := svc.Start(ctx); err != nil {
		l.free()
		return nil, errors.Join(ErrNotAcquired, err)
	}
	svc.mu.Lock()
	r := svc.run
	svc.mu.Unlock()
	wait := r.acquired
	if once {
		wait = r.attempted
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
	svc.mu.Lock()
	t, owner, lastErr := r.first, r.owner, r.lastErr
	var tenureCtx context.Context
	if t != nil {
		owner, tenureCtx = t.owner, t.ctx
	}
	svc.mu.Unlock()
	if t == nil {
		_ = svc.Stop(context.WithoutCancel(ctx)) // releases an acquisition still in flight
		l.free()
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(ErrNotAcquired, err, lastErr)
		}
		if lastErr != nil {
			return nil, fmt.Errorf("%w: mutex %q: the store did not answer: %w", ErrNotAcquired, l.Mutex(), lastErr)
		}
		return nil, fmt.Errorf("%w: mutex %q is owned by %q", ErrNotAcquired, l.Mutex(), owner.ID)
	}
	give := func(ctx context.Context) error {
		err := svc.Stop(ctx)
		l.free()
		return err
	}
	return &Lease{mutex: l.Mutex(), owner: owner, ctx: tenureCtx, give: give}, nil
}

func (l *Locker) free() {
	l.mu.Lock()
	l.busy = false
	l.mu.Unlock()
}

// Lease is a hold on a mutex, acquired by a Locker or from Mutexes. The tenure behind it
// renews itself until Release; its Context ends when ownership is lost or the lease is
// released. A Lease is safe for concurrent use.
type Lease struct {
	mutex    string
	owner    Owner
	ctx      context.Context
	released atomic.Bool
	give     func(ctx context.Context) error // gives the hold back
}

// Token returns the fencing token of the tenure: pass it to the resource the lock
// protects, so that it can reject writes of an owner that has been superseded.
func (l *Lease) Token() uint64 { return l.owner.Token }

// Owner returns the owner record as it was when the lease was acquired.
func (l *Lease) Owner() Owner { return l.owner }

// Context returns the tenure context. It is cancelled as soon as the lease's holder can no
// longer be sure it owns the mutex (context.Cause returns ErrOwnershipLost), or when the
// lease is released (context.Canceled). It is a lifetime context owned by the lease.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is short for Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Release gives the mutex up and stops renewing. ctx values are kept but its cancellation
// is not: the release runs under the call timeout even when ctx has ended. Release
// returns an error matching ErrNotOwner for a nil lease and when called again, and one
// matching ErrOwnershipLost when ownership had already been lost (the critical section
// may then have overlapped with another owner's; the fencing token tells the resource).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotOwner)
	}
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil")
	}
	if !l.released.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: lease of %q already released", ErrNotOwner, l.mutex)
	}
	err := l.give(ctx)
	if errors.Is(context.Cause(l.ctx), ErrOwnershipLost) {
		return errors.Join(fmt.Errorf("simba: lease of %q lost before release: %w", l.mutex, ErrOwnershipLost), err)
	}
	return err
}
