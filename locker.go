package simba

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/mutation"
)

// Locker acquires a mutex for a critical section: Acquire blocks until this contender owns
// the mutex or its context ends, and returns a Lease that owns the tenure until Release.
// While held, the lease renews itself; its Context ends as soon as ownership could have
// lapsed, so work that must not outlive ownership should use it.
//
// Every call returns by its context's deadline, whatever the store does. What is left to
// do on the store then (releasing an acquisition that may have been applied, a release
// that has not been answered) goes on in the background, bounded by the call timeout; the
// next acquisition waits for it, and Close waits for all of it.
//
// A Locker is one contender with one ID: it holds at most one lease at a time, and
// acquiring while it holds or acquires returns ErrAlreadyHeld. Goroutines that each want
// the mutex use a Locker each. A Locker is safe for concurrent use. Close it when done.
type Locker struct {
	svc     *Service      // started for every acquisition; one at a time
	closing chan struct{} // closed by Close: ends an acquisition waiting to retry its start-up

	mu       sync.Mutex
	busy     bool   // an acquisition is under way or a lease is outstanding
	lease    *Lease // the outstanding lease
	closed   bool
	storeErr error // the store's last error in the last acquisition; nil if it acquired
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
	return &Locker{svc: newService(b, RoleLock, nil, nil, mutex, id, cfg), closing: make(chan struct{})}, nil
}

// Mutex returns the name of the mutex.
func (l *Locker) Mutex() string { return l.svc.mutex }

// ContenderID returns the locker's contender ID.
func (l *Locker) ContenderID() string { return l.svc.id }

// Acquire blocks until the locker owns the mutex or ctx ends, and returns by ctx's
// deadline whatever the store does. Waiting costs no CPU: the locker contends on the
// contend period and at once when the store announces a release. When the store cannot
// be reached, Acquire retries with backoff until ctx ends or the locker is closed; when it
// refuses the locker (ErrRefused: credentials, permissions, schema), Acquire fails at once
// with the store's message.
//
// When ctx ends first, the error matches both ErrNotAcquired and ctx's error under
// errors.Is (and wraps the store's last error too, if there was one), and whatever was
// acquired meanwhile is released again in the background. An error matches a context
// error only when ctx ended; one that ended an already ended ctx returns at once without
// touching the store.
func (l *Locker) Acquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, false) }

// TryAcquire makes a single attempt: it returns a Lease if the locker owns the mutex after
// one acquire call, and an error matching ErrNotAcquired otherwise, which also wraps the
// store's error when the attempt (or the start-up before it) failed.
func (l *Locker) TryAcquire(ctx context.Context) (*Lease, error) { return l.acquire(ctx, true) }

// acquire is Acquire (once: TryAcquire), told to the Observer if there is one.
func (l *Locker) acquire(ctx context.Context, once bool) (*Lease, error) {
	cfg := &l.svc.cfg
	if cfg.observer == nil || ctx == nil {
		return l.obtain(ctx, once)
	}
	began := cfg.now()
	lease, err := l.obtain(ctx, once)
	cfg.observeAcquire(ctx, l.Mutex(), l.ContenderID(), once, began, lease, err)
	return lease, err
}

func (l *Locker) obtain(ctx context.Context, once bool) (*Lease, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", l.Mutex()), err)
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, ErrClosed
	case l.busy:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: mutex %q, contender %q", ErrAlreadyHeld, l.Mutex(), l.ContenderID())
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
		_ = lease.give(ctx)
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
func (l *Locker) contend(ctx context.Context, once bool) (lease *Lease, _ error) {
	svc := l.svc
	var lastErr error // the store's last error, for the error returned and for Health
	defer func() {
		if lease != nil {
			lastErr = nil
		}
		l.mu.Lock()
		l.storeErr = lastErr
		l.mu.Unlock()
	}()
	for failures := 1; ; failures++ {
		r, err := svc.begin(ctx, runSpec{single: true, once: once})
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, describe(ErrNotAcquired, "", err, lastErr)
		case once || errors.Is(err, ErrClosed) || errors.Is(err, ErrRefused) || errors.Is(err, ErrInvalidArgument) || mutation.On("start-once"):
			if !errors.Is(err, ErrInvalidArgument) {
				lastErr = err
			}
			return nil, describe(ErrNotAcquired, "", err)
		default:
			lastErr = err
			d := svc.period.retry(failures, false)
			svc.log.Warn("simba: start failed; retrying", "err", err, "retry_in", d)
			if err := sleep(ctx, svc, d, l.closing); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil, ErrClosed
				}
				return nil, describe(ErrNotAcquired, "", err, lastErr)
			}
			continue
		}
		wait := r.acquired
		if once {
			wait = r.attempted
		}
		select {
		case <-wait:
		case <-r.halted:
		case <-r.hopeless: // the backend is closed or refuses: waiting longer cannot help
		case <-ctx.Done():
		}
		svc.mu.Lock()
		t, owner := r.first, r.owner
		if r.lastErr != nil {
			lastErr = r.lastErr
		}
		svc.mu.Unlock()
		// Belief is checked here, where the lease is handed out: a tenure whose local end
		// has passed (the process paused after it began) is not handed out.
		if t != nil && t.live() && ctx.Err() == nil {
			return l.newLease(r, t), nil
		}
		switch {
		case mutation.On("blocking-calls"):
			_ = svc.Stop(context.WithoutCancel(ctx)) // waits for the store
		case ctx.Err() == nil:
			_ = svc.Stop(ctx) // what is left is released by ctx's deadline, or goes on in the background
		default:
			_ = svc.stopFrom(ctx, false) // the release goes on in the background
		}
		switch {
		case ctx.Err() != nil:
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", l.Mutex()), ctx.Err(), lastErr)
		case l.isClosed():
			return nil, ErrClosed
		case t != nil && once:
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q: the tenure lapsed before it could be handed out", l.Mutex()), ErrOwnershipLost)
		case t != nil:
			continue // the tenure lapsed before it could be handed out: contend again
		case errors.Is(lastErr, ErrClosed):
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q: the backend is closed", l.Mutex()), lastErr)
		case errors.Is(lastErr, ErrRefused):
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q", l.Mutex()), lastErr)
		case lastErr != nil:
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q: the store did not answer", l.Mutex()), lastErr)
		default:
			return nil, describe(ErrNotAcquired, fmt.Sprintf("mutex %q is owned by %q", l.Mutex(), owner.ID))
		}
	}
}

// newLease hands out tenure t of lifecycle r.
func (l *Locker) newLease(r *run, t *tenure) *Lease {
	lease := &Lease{mutex: l.Mutex(), owner: l.svc.tenureOwner(t), ctx: t.ctx}
	lease.give = func(ctx context.Context) error {
		err := l.svc.Stop(ctx)
		l.mu.Lock()
		l.busy, l.lease = false, nil
		l.mu.Unlock()
		if errors.Is(err, ErrNotRunning) || err == ErrClosed { // the service's state, not a store's error
			// Stopped by Close, which releases what is left (and a second Close may have
			// closed the service under the first one's release): the lease is released.
			// Not running, or closed, the lifecycle is halted or about to be.
			select {
			case <-r.halted:
				return nil
			case <-ctx.Done():
			}
		}
		return err
	}
	return lease
}

// Close releases the locker's lease if it holds one, ends an acquisition under way (it
// returns ErrClosed), makes later acquisitions fail with ErrClosed, and waits for the
// store work of the locker still under way in the background, each call bounded by the
// call timeout. It is idempotent.
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

// Health returns the locker's state now, for HealthHandler: it is running until Close,
// leads while it holds a lease, and its error is that of the acquisition under way, or
// else of the last one (nil when it acquired).
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
