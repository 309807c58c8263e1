package simba

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/observe"
)

// Locker is one contender for a mutex, holding one Lease at a time (ErrAlreadyHeld):
// goroutines use one each, or share Mutexes.
type Locker struct {
	svc     *Service      // started for every acquisition; one at a time
	closing chan struct{} // closed by Close: ends an acquisition waiting to retry its start-up
	idle    func()        // if set, called once a lease has been given back (a Semaphore's pool)

	mu       sync.Mutex
	busy     bool   // an acquisition is under way or a lease is outstanding
	lease    *Lease // the outstanding lease
	closed   bool
	storeErr error // the store's last error in the last acquisition; nil if it acquired
}

// NewLocker returns a Locker for mutex on b.
func NewLocker(b Backend, mutex string, opts ...LockerOption) (*Locker, error) {
	cfg, err := configure(b, opts, LockerOption.applyLocker)
	if err != nil {
		return nil, err
	}
	id := cfg.ownID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	return &Locker{svc: newService(b, observe.RoleLock, hooks{}, mutex, id, cfg), closing: make(chan struct{})}, nil
}

// Mutex returns the name of the mutex.
func (l *Locker) Mutex() string { return l.svc.mutex }

// ContenderID returns the locker's contender ID.
func (l *Locker) ContenderID() string { return l.svc.id }

// Acquire blocks until the locker owns the mutex or ctx ends (ErrNotAcquired), waiting out
// an outage; it fails at once on a refusal.
func (l *Locker) Acquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, false) }

// TryAcquire makes one attempt: ErrHeld if another holds the mutex, else an
// ErrNotAcquired wrapping the store's error.
func (l *Locker) TryAcquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, true) }

// acquire is Acquire (once: TryAcquire), told to the observe.Observer if there is one.
func (l *Locker) acquire(ctx context.Context, once bool) (*Lease, error) {
	cfg := &l.svc.cfg
	if cfg.observer == nil || ctx == nil {
		return l.obtain(ctx, once)
	}
	began := cfg.now()
	lease, err := l.obtain(ctx, once)
	l.svc.observeAcquire(ctx, once, began, lease, err)
	return lease, err
}

func (l *Locker) obtain(ctx context.Context, once bool) (*Lease, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, describe(ErrNotAcquired, l.svc.named(), err)
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, ErrClosed
	case l.busy:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: %s, contender %q", ErrAlreadyHeld, l.svc.named(), l.ContenderID())
	}
	l.busy = true
	l.mu.Unlock()
	lease, err := l.contend(ctx, once)
	l.mu.Lock()
	if err == nil && l.closed {
		// Close began while the acquisition was under way, found no lease to release and
		// is ending the lifecycle: the lease is not handed out, only to end under its
		// holder, but given back, and the acquisition ends as Close says.
		l.mu.Unlock()
		_ = lease.giveBack(ctx)
		return nil, ErrClosed
	}
	defer l.mu.Unlock()
	if err != nil {
		l.busy = false
		return nil, err
	}
	l.lease = lease
	return lease, nil
}

// contend starts lifecycles of the locker's service until one yields a tenure that is
// still believed when it is handed out, ctx ends, or (once) one attempt was made.
func (l *Locker) contend(ctx context.Context, once bool) (lease *Lease, err error) {
	var storeErr error // the store's last error, for the error returned and for Health
	defer func() {
		l.mu.Lock()
		l.storeErr = storeErr
		l.mu.Unlock()
	}()
	for failures := 1; ; failures++ {
		lc, err := l.svc.begin(ctx, runSpec{single: true, once: once})
		if err != nil {
			if retry := l.startFailed(ctx, once, failures, err, &storeErr); retry != nil {
				return nil, retry
			}
			continue
		}
		lease, again, err := l.await(ctx, lc, once, &storeErr)
		if !again {
			return lease, err
		}
	}
}

// startFailed decides, after the failed start-up of an acquisition's lifecycle, whether
// to retry it (nil, after a backoff) or to give up (the error to return). An outage is
// retried; a refusal, a closed backend, bad input, or a single attempt are not.
func (l *Locker) startFailed(ctx context.Context, once bool, failures int, err error, storeErr *error) error {
	svc := l.svc
	switch {
	case ctx.Err() != nil:
		return describe(ErrNotAcquired, "", err, *storeErr)
	case errors.Is(err, ErrInvalidArgument):
		return describe(ErrNotAcquired, "", err)
	case once || errors.Is(err, ErrClosed) || errors.Is(err, ErrRefused):
		*storeErr = err
		return describe(ErrNotAcquired, "", err)
	}
	*storeErr = err
	d := svc.period.retry(failures, false)
	svc.log.Warn("simba: start failed; retrying", "err", err, "retry_in", d)
	if err := sleep(ctx, svc, d, l.closing); err != nil {
		if errors.Is(err, ErrClosed) {
			return ErrClosed
		}
		return describe(ErrNotAcquired, "", err, *storeErr)
	}
	return nil
}

// await waits for the outcome of an acquisition's lifecycle lc: its first tenure (or,
// once, its first attempt), the end of its hopes, or ctx's end. It hands out a lease, or
// stops lc and returns why not, or asks for another lifecycle (again) when the tenure
// lapsed before it could be handed out.
func (l *Locker) await(ctx context.Context, lc *lifecycle, once bool, storeErr *error) (_ *Lease, again bool, _ error) {
	select {
	case <-lc.decided.ch: // acquired (once: attempted), or hopeless: waiting longer cannot help
	case <-lc.halted.ch:
	case <-ctx.Done():
	}
	t, owner, err := lc.outcome()
	if err != nil {
		*storeErr = err
	}
	// Belief is checked here, where the lease is handed out: a tenure whose local end has
	// passed (the process paused after it began) is not handed out.
	if t != nil && t.live() && ctx.Err() == nil {
		*storeErr = nil
		return l.newLease(lc, t), false, nil
	}
	if ctx.Err() == nil {
		_ = l.svc.Stop(ctx) // what is left is released by ctx's deadline, or goes on in the background
	} else {
		_ = l.svc.stopFrom(ctx, false) // the release goes on in the background
	}
	again, err = l.notAcquired(ctx, t != nil, once, owner, *storeErr)
	return nil, again, err
}

// notAcquired says why an acquisition that hands out no lease ended, given whether a
// tenure began (and lapsed before it could be handed out), the owner last seen and the
// store's last error; again asks for another lifecycle.
func (l *Locker) notAcquired(ctx context.Context, lapsed, once bool, owner Owner, last error) (again bool, err error) {
	named := l.svc.named()
	switch {
	case ctx.Err() != nil && last == nil && owner.ID != "":
		return false, describe(ErrHeld, l.svc.heldBy(owner.ID), ctx.Err())
	case ctx.Err() != nil:
		return false, describe(ErrNotAcquired, named, ctx.Err(), last)
	case l.isClosed():
		return false, ErrClosed
	case lapsed && once:
		return false, describe(ErrNotAcquired, named+": the tenure lapsed before it could be handed out", ErrOwnershipLost)
	case lapsed:
		return true, nil // contend again
	case errors.Is(last, ErrClosed):
		return false, describe(ErrNotAcquired, named+": the backend is closed", last)
	case errors.Is(last, ErrRefused):
		return false, describe(ErrNotAcquired, named, last)
	case last != nil:
		return false, describe(ErrNotAcquired, named+": the store did not answer", last)
	}
	return false, describe(ErrHeld, l.svc.heldBy(owner.ID))
}

// newLease hands out tenure t of lifecycle lc.
func (l *Locker) newLease(lc *lifecycle, t *tenure) *Lease {
	return &Lease{mutex: l.Mutex(), owner: t.record(), ctx: t.ctx, locker: l, lc: lc}
}

// giveBack gives back the lease of lifecycle lc: it stops the service, which releases the
// mutex on the store.
func (l *Locker) giveBack(ctx context.Context, lc *lifecycle) error {
	err := l.svc.Stop(ctx)
	l.mu.Lock()
	l.busy, l.lease = false, nil
	l.mu.Unlock()
	if l.idle != nil {
		defer l.idle()
	}
	if errors.Is(err, ErrNotRunning) || err == ErrClosed { // the service's state, not a store's error
		// Stopped by Close, which releases what is left (and a second Close may have
		// closed the service under the first one's release): the lease is released.
		// Not running, or closed, the lifecycle is halted or about to be.
		select {
		case <-lc.halted.ch:
			return nil
		case <-ctx.Done():
		}
	}
	return err
}

// Close releases the lease held and ends an acquisition under way; see the package doc.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.svc.Close()
	}
	l.closed = true
	close(l.closing)
	lease := l.lease
	l.mu.Unlock()
	var err error
	if lease != nil {
		if rerr := lease.Release(context.Background()); rerr != nil && !errors.Is(rerr, ErrNotOwner) {
			err = rerr
		}
	}
	if cerr := l.svc.Close(); err == nil {
		err = cerr
	}
	return err
}

// Health returns the locker's state; Err is of the acquisition under way, or the last.
func (l *Locker) Health() Health {
	h := l.svc.Health()
	l.mu.Lock()
	defer l.mu.Unlock()
	h.Status = StatusRunning
	if l.closed {
		h.Status = StatusInitial
	}
	if h.Err == nil && l.svc.Status() != StatusRunning {
		h.Err = l.storeErr
	}
	return h
}

func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// sleep waits for d on svc's clock, or returns ctx's error when ctx ends first, or
// ErrClosed when closed (nil: never) is closed first.
func sleep(ctx context.Context, svc *Service, d time.Duration, closed <-chan struct{}) error {
	done := make(chan struct{})
	t := svc.cfg.clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	}
}
