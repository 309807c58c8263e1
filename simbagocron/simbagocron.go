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
//     instance schedules every job, and the run takes a lock named after the job first;
//     an instance that cannot take it at once skips the run. The lock is released when the
//     run ends, so instances whose clocks differ by more than a run's length may each run
//     the same slot: gocron's own caveat for lockers.
//
// Neither stops a run that is under way when leadership or the lock is lost: pass the
// fencing token (Service.Owner().Token) to what the job writes, as simba's documentation
// explains.
package simbagocron

import (
	"context"
	"errors"
	"fmt"

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
// contain). One Locker shares its mutexes among the jobs of one process (simba.Mutexes):
// one contender per mutex on the store. It is safe for concurrent use; Close it when the
// scheduler has shut down.
type Locker struct {
	mutexes *simba.Mutexes
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker on b. opts are simba.NewMutexes' (TTL, contender ID, logger,
// observer).
func NewLocker(b simba.Backend, opts ...simba.Option) (*Locker, error) {
	m, err := simba.NewMutexes(b, opts...)
	if err != nil {
		return nil, err
	}
	return &Locker{mutexes: m}, nil
}

// Lock takes the mutex named key if that is possible without waiting (Mutexes.TryAcquire):
// the instance that holds it runs the job, the others skip the run. The error matches
// simba.ErrNotAcquired when another instance holds it.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lease, err := l.mutexes.TryAcquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return lock{lease}, nil
}

// Close releases every mutex the Locker holds and waits for its goroutines.
func (l *Locker) Close() error { return l.mutexes.Close() }

// lock is one held run.
type lock struct{ lease *simba.Lease }

// Unlock releases the mutex. A lease lost during the run is reported with an error
// matching simba.ErrOwnershipLost.
func (l lock) Unlock(ctx context.Context) error { return l.lease.Release(ctx) }
