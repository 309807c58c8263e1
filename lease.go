package simba

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

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

// Owner returns the owner record as it was when the lease was acquired: a snapshot, not
// renewed with the lease. Its TTLAt is the store's TTL end as of the acquisition, which
// the holder's belief ends a little before (a margin for clock drift); whether the lease
// is still held is what Context says, not Owner().InTTL.
func (l *Lease) Owner() Owner { return l.owner }

// Context returns the tenure context. It is cancelled as soon as the lease's holder can no
// longer be sure it owns the mutex (context.Cause returns an error matching
// ErrOwnershipLost: ErrOwnerChanged or ErrLeaseExpired), or when the
// lease is released (context.Canceled). It is a lifetime context owned by the lease.
//
// The context checks the local TTL end itself whenever it is read (Err, Done, Value and
// so context.Cause): after a pause of the process, the first look at it reports the loss,
// whatever the timers have done. Contexts derived from it end when it is cancelled, which
// is at that first look or when simba's timer runs, so check this context's Err right
// before acting on ownership. Nothing can catch a pause between that check and the act;
// the fencing token can (see the package documentation).
func (l *Lease) Context() context.Context { return l.ctx }

// Done is short for Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Release gives the mutex up and stops renewing. It returns by ctx's deadline; the release
// on the store, if not done by then, goes on in the background and the error matches
// ctx's. ctx's values are kept for the release. Release returns an error matching
// ErrNotOwner for a nil lease and when called again, and one matching ErrOwnershipLost
// when ownership had already been lost (the critical section may then have overlapped
// with another owner's; the fencing token tells the resource).
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
	err := l.give(ctx)
	if lost {
		return describe(ErrOwnershipLost, fmt.Sprintf("lease of %q lost before release", l.mutex), err)
	}
	return err
}
