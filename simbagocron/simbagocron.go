// Package simbagocron runs gocron v2 jobs (github.com/go-co-op/gocron/v2) on one instance
// of a service at a time, through simba: an Elector for leader-only schedulers and a
// Locker for per-job locks. It is a module of its own, so that simba does not depend on
// gocron.
//
// Which one:
//
//   - Elector (gocron.WithDistributedElector): one instance leads, and only the leader's
//     scheduler runs jobs. Leadership is a simba.Service you run (Start, Stop, Close); it
//     survives between runs, so a job is never run twice for one slot because two
//     instances' clocks differ. Prefer it.
//   - Locker (gocron.WithDistributedLocker, gocron.WithDistributedJobLocker): every
//     instance schedules every job, and each run first takes a mutex named after the job;
//     an instance that cannot take it at once skips the run.
//
// A slot is locked by holding the job's mutex, not by naming the slot: gocron v2 passes
// Lock the job's name and the job's context only, not the time the run was scheduled
// for, and a slot read off each instance's clock would differ between instances near a
// slot's start (and a DurationJob's slots differ from one instance to the next). So a run's
// mutex stays held until the run has ended and the minimum hold (WithMinHold, default
// 500ms) has passed since Lock, as ShedLock's lockAtLeastFor does: instances whose
// schedulers fire for the same slot a little later find it held and skip it. Released
// when the run ends, the mutex would let an instance that fires a few milliseconds later
// (start jitter, lock latency, clock difference) run a short job's slot again.
//
// A slot can still run twice when another instance fires for it more than the hold after
// the first instance took the mutex (or, for a run longer than the hold, after the run
// ended): when the instances' clocks differ, plus their start jitter and the store's
// latency, by more than the hold; when the hold ends early, because the Locker is closed
// or the lease is lost (a store outage longer than the TTL); and for a DurationJob whose
// instances started at different times, since gocron counts its slots from each
// scheduler's start: align them with gocron.WithStartAt, or use a CronJob. A hold longer
// than the period less that difference skips slots instead: the mutex is still held,
// everywhere, when the next slot fires.
//
// gocron drops Lock's error and logs nothing by default. The Locker logs the errors that
// no retry cures at Error (WithLogger; slog.Default() unless set): a store that refused
// the client (simba.ErrRefused), a job name the store does not accept, a closed Locker;
// an outage at Warn; another instance's hold (simba.ErrHeld) at Debug.
//
// Neither stops a run that is under way when leadership or the lock is lost: pass the
// fencing token (Service.Owner().Token) to what the job writes, as simba's documentation
// explains.
package simbagocron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/simba-go/simba"
)

// ErrNotLeader is returned by Elector.IsLeader on an instance that does not lead: gocron
// then skips the run.
var ErrNotLeader = errors.New("simbagocron: not the leader")

// Elector is a gocron.Elector that says this instance leads while its simba.Service
// believes it owns the mutex. It is safe for concurrent use.
type Elector struct {
	svc *simba.Service
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector that reads leadership from svc, a contending service
// (simba.NewService) whose lifecycle the caller runs: the Elector only asks it. svc may
// have callbacks of its own (to learn when leadership begins and ends).
func NewElector(svc *simba.Service) (*Elector, error) {
	switch {
	case svc == nil:
		return nil, simba.InvalidArgument("service", nil, "must not be nil")
	case svc.ContenderID() == "":
		return nil, simba.InvalidArgument("service", svc.Mutex(), "must contend: a retrieval service never leads")
	}
	return &Elector{svc: svc}, nil
}

// IsLeader returns nil while the service believes it owns its mutex, and an error
// matching ErrNotLeader otherwise (also while it is not running).
func (e *Elector) IsLeader(context.Context) error {
	if e.svc.IsOwner() {
		return nil
	}
	return fmt.Errorf("%w of %q", ErrNotLeader, e.svc.Mutex())
}

// Locker is a gocron.Locker that takes, for each run of a job, the simba mutex named after
// the job (gocron passes the job's name; name jobs with gocron.WithName, with names valid
// on your store: ZooKeeper refuses '/', which gocron's default names, Go function names,
// contain), and holds it until the run has ended and the minimum hold has passed. One
// Locker shares its mutexes among the jobs of one process (simba.Mutexes): one contender
// per mutex on the store. It is safe for concurrent use; Close it when the scheduler has
// shut down.
type Locker struct {
	mutexes *simba.Mutexes
	minHold time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close: ends the holds under way
	holds   sync.WaitGroup
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker on b.
func NewLocker(b simba.Backend, opts ...Option) (*Locker, error) {
	cfg := config{minHold: DefaultMinHold, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := simba.NewMutexes(b, cfg.mutexOptions()...)
	if err != nil {
		return nil, err
	}
	return &Locker{mutexes: m, minHold: cfg.minHold, log: cfg.logger, closing: make(chan struct{})}, nil
}

// Lock takes the mutex named key if that is possible without waiting (Mutexes.TryAcquire):
// the instance that holds it runs the job, the others skip the run. The error matches
// simba.ErrHeld when another instance holds the mutex, and simba.ErrRefused when the
// store refused the client (logged at Error).
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lease, err := l.mutexes.TryAcquire(ctx, key)
	if err != nil {
		l.skipped(ctx, key, err)
		return nil, err
	}
	return &lock{locker: l, job: key, lease: lease, holdEnd: time.Now().Add(l.minHold)}, nil
}

// Close ends the holds under way (see WithMinHold), releases every mutex the Locker holds
// and waits for its goroutines.
func (l *Locker) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.closing)
	}
	l.mu.Unlock()
	l.holds.Wait()
	return l.mutexes.Close()
}

// skipped logs why Lock failed. gocron drops the error, and its default logger prints
// nothing, so a failure that no retry cures would skip every run in silence: it is logged
// at Error, an outage at Warn. Another instance's hold (simba.ErrHeld) is the normal case:
// Debug.
func (l *Locker) skipped(ctx context.Context, job string, err error) {
	switch {
	case ctx != nil && ctx.Err() != nil: // the job was removed or the scheduler shut down
	case errors.Is(err, simba.ErrHeld):
		l.log.DebugContext(ctx, "simbagocron: held elsewhere; the run is skipped", "job", job, "err", err)
	case errors.Is(err, simba.ErrRefused), errors.Is(err, simba.ErrInvalidArgument), errors.Is(err, simba.ErrClosed):
		l.log.ErrorContext(ctx, "simbagocron: cannot lock; the run is skipped", "job", job, "err", err)
	default:
		l.log.WarnContext(ctx, "simbagocron: the store failed; the run is skipped", "job", job, "err", err)
	}
}

// holdOn releases lease once wait has passed, or at once when the lease is lost or the
// Locker closes, on a goroutine that Close joins. It returns false after Close.
func (l *Locker) holdOn(ctx context.Context, job string, lease *simba.Lease, wait time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.holds.Add(1)
	go func() {
		defer l.holds.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-lease.Done():
		case <-l.closing:
		}
		_ = l.release(context.WithoutCancel(ctx), job, lease)
	}()
	return true
}

// release releases lease and logs its error, which gocron drops: a lease lost before
// its release may have let another instance run the job meanwhile.
func (l *Locker) release(ctx context.Context, job string, lease *simba.Lease) error {
	err := lease.Release(ctx)
	if err != nil {
		l.log.WarnContext(ctx, "simbagocron: releasing the lock failed", "job", job, "err", err)
	}
	return err
}

// lock is one held run.
type lock struct {
	locker   *Locker
	job      string
	lease    *simba.Lease
	holdEnd  time.Time // the end of the minimum hold, on the monotonic clock
	unlocked atomic.Bool
}

// Unlock releases the mutex once the minimum hold since Lock has passed: at once if it
// has, else later, in the background, returning at once. A lease lost during the run is
// released at once, and reported with an error matching simba.ErrOwnershipLost.
func (k *lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		return simba.InvalidArgument("ctx", nil, "must not be nil")
	}
	if !k.unlocked.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: the lock of job %q is already unlocked", simba.ErrNotOwner, k.job)
	}
	wait := time.Until(k.holdEnd)
	if wait > 0 && k.lease.Context().Err() == nil && k.locker.holdOn(ctx, k.job, k.lease, wait) {
		return nil
	}
	return k.locker.release(ctx, k.job, k.lease)
}
