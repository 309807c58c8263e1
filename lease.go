package simba

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Lease holds a mutex, semaphore or read-write lock; it renews until Release.
type Lease struct {
	mutex    string
	owner    Owner
	ctx      context.Context
	released atomic.Bool
	give     func(ctx context.Context) error // gives the hold back; nil for a Locker's
	locker   *Locker                         // a Locker's lease: its lifecycle lc gives it back
	lc       *lifecycle
}

// Token returns the tenure's fencing token.
func (l *Lease) Token() uint64 { return l.owner.Token }

// Owner returns the owner record as acquired; Context tells if it is held.
func (l *Lease) Owner() Owner { return l.owner }

// Context returns the tenure context, ended by Release or a loss (cause ErrOwnershipLost);
// check it right before acting.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is short for Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Release gives the hold up. Its error matches ErrNotOwner on a second call, and
// ErrOwnershipLost after a loss: the critical section may have overlapped another's.
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
	lost := errors.Is(context.Cause(l.ctx), ErrOwnershipLost) // read first: it checks the local end
	err := l.giveBack(ctx)
	if lost {
		return describe(ErrOwnershipLost, fmt.Sprintf("lease of %q lost before release", l.mutex), err)
	}
	return err
}

// giveBack gives the hold back: through the Locker that handed it out (no closure made
// per acquisition), or give.
func (l *Lease) giveBack(ctx context.Context) error {
	if l.locker != nil {
		return l.locker.giveBack(ctx, l.lc)
	}
	return l.give(ctx)
}
