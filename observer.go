package simba

import (
	"github.com/simba-go/simba/backend"

	"context"
	"errors"
	"strconv"
	"time"
)

// Observer is told what services, Lockers, Schedulers and Mutexes do, for metrics and
// tracing: every store call with its latency and outcome, every tenure's beginning and
// end with its cause, and every acquisition with its wait. Set it with WithObserver;
// the adapters in observe/simbaprom and observe/simbaotel (modules of their own)
// implement it.
//
// Calls are synchronous, made on the goroutine where the event happens: the goroutine
// that talks to the store, a timer's goroutine, or the caller of Start, Stop, Acquire or
// Release. Some are made while internal locks of the service are held. An Observer must
// therefore return quickly and never block, must not call back into the service, Locker,
// Scheduler or Mutexes that reports to it (that may deadlock), and must be safe for
// concurrent use: one Observer serves any number of them, and their events arrive
// concurrently. Events of one service arrive in the order they happened. A panicking
// Observer is not recovered.
//
// Without WithObserver no event is built: the hot paths cost one nil check each.
type Observer interface {
	// OnCall is told of a store call when its answer or failure arrives.
	OnCall(Call)
	// OnTenureBegan is told that a contender began to believe it owns a mutex.
	OnTenureBegan(Tenure)
	// OnTenureEnded is told that the belief ended; Tenure.Cause says why.
	OnTenureEnded(Tenure)
	// OnAcquire is told of every Acquire and TryAcquire of a Locker or Mutexes when it
	// returns, with the caller's context (a span recorded for it belongs to the caller's
	// trace).
	OnAcquire(context.Context, Acquisition)
}

// ObserverFuncs adapts plain functions to the Observer interface. Nil functions are
// skipped.
type ObserverFuncs struct {
	// Call is called by OnCall.
	Call func(Call)
	// TenureBegan is called by OnTenureBegan.
	TenureBegan func(Tenure)
	// TenureEnded is called by OnTenureEnded.
	TenureEnded func(Tenure)
	// Acquire is called by OnAcquire.
	Acquire func(context.Context, Acquisition)
}

var _ Observer = ObserverFuncs{}

// OnCall calls f.Call if it is set.
func (f ObserverFuncs) OnCall(c Call) {
	if f.Call != nil {
		f.Call(c)
	}
}

// OnTenureBegan calls f.TenureBegan if it is set.
func (f ObserverFuncs) OnTenureBegan(t Tenure) {
	if f.TenureBegan != nil {
		f.TenureBegan(t)
	}
}

// OnTenureEnded calls f.TenureEnded if it is set.
func (f ObserverFuncs) OnTenureEnded(t Tenure) {
	if f.TenureEnded != nil {
		f.TenureEnded(t)
	}
}

// OnAcquire calls f.Acquire if it is set.
func (f ObserverFuncs) OnAcquire(ctx context.Context, a Acquisition) {
	if f.Acquire != nil {
		f.Acquire(ctx, a)
	}
}

// WithObserver sets the Observer that is told of store calls, tenures and acquisitions.
// Default: none (no event is built); must not be nil. Every constructor accepts it.
func WithObserver(o Observer) Option {
	return option(func(c *config) { c.observer, c.observerSet = o, true })
}

// Op names what a store call asked for.
type Op uint8

// The store calls a service makes.
const (
	// OpStart opens the contention (Backend.StartContend) at Start or at an acquisition.
	OpStart Op = iota + 1
	// OpAcquire tries to acquire the mutex (backend.LeaseContention.Acquire, not owning).
	OpAcquire
	// OpRenew renews the TTL of the tenure the contender believes in (backend.LeaseContention.Acquire
	// sent while owning).
	OpRenew
	// OpLookup reads the owner for a retriever (backend.LeaseContention.Lookup).
	OpLookup
	// OpRelease gives the mutex up (backend.LeaseContention.Release).
	OpRelease
	// OpStop ends the contention (backend.Contention.StopContend).
	OpStop
)

// String returns the lower-case name of the operation ("start", "acquire", "renew",
// "lookup", "release", "stop"), fit for a metric label.
func (o Op) String() string {
	switch o {
	case OpStart:
		return "start"
	case OpAcquire:
		return "acquire"
	case OpRenew:
		return "renew"
	case OpLookup:
		return "lookup"
	case OpRelease:
		return "release"
	case OpStop:
		return "stop"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Role says what a contender is for, so that an Observer can tell leadership apart from a
// critical section.
type Role uint8

// The roles.
const (
	// RoleLeader is a Service's or a Scheduler's: long-running leadership, one per mutex
	// and process.
	RoleLeader Role = iota + 1
	// RoleLock is a Locker's or Mutexes': a lease held for a critical section.
	RoleLock
	// RoleObserver is a retrieval service's (Observe, Lookup): it contends for nothing.
	RoleObserver
)

// String returns "leader", "lock" or "observer", fit for a metric label.
func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleLock:
		return "lock"
	case RoleObserver:
		return "observer"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Call is one store call of a service, as an Observer is told of it.
type Call struct {
	// Mutex is the mutex name.
	Mutex string
	// Contender is the contender's ID; empty for a retriever.
	Contender string
	// Role is what the contender is for. A leader's first call is its start-up (OpStart),
	// made before it can lead: an Observer can set up what it keeps per mutex then.
	Role Role
	// Op is what the call asked for.
	Op Op
	// Latency is the time from sending the call to its answer or failure.
	Latency time.Duration
	// Owner is the owner the answer named (OpAcquire, OpRenew, OpLookup); empty when
	// there is none, for other operations and on failure.
	Owner string
	// Token is the fencing token the answer showed, or zero.
	Token uint64
	// Err is the call's error, nil when the store answered. A call cut off at the call
	// timeout matches ErrTimeout; one cut off by Stop matches context.Canceled.
	Err error
}

// Tenure is the beginning or the end of a contender's belief that it owns a mutex, as an
// Observer is told of it.
type Tenure struct {
	// Mutex is the mutex name.
	Mutex string
	// Contender is the contender's ID.
	Contender string
	// Role is RoleLeader for a Service's or Scheduler's tenure (leadership), RoleLock for a
	// Locker's or Mutexes'.
	Role Role
	// Owner is the owner record: as acquired when the tenure began, as last renewed when
	// it ended. Owner.Token is the tenure's fencing token.
	Owner Owner
	// Granted is set at the beginning of a tenure that the store handed over to the
	// contender as it waited (backend.Participant.Grant), rather than one that answered a call of
	// its own.
	Granted bool
	// Held is, at the end, how long the belief lasted; zero at the beginning.
	Held time.Duration
	// Cause is, at the end, why belief ended, and the cause of the tenure context
	// (context.Cause): context.Canceled when the contender gave the mutex up (Stop,
	// Close, Lease.Release); ErrOwnerChanged when the store named another owner or none;
	// ErrLeaseExpired when the local TTL end passed without a successful renewal, joined
	// with the last store error when renewals failed. The last two match
	// ErrOwnershipLost. Nil at the beginning.
	Cause error
}

// Acquisition is one Acquire or TryAcquire of a Locker or Mutexes, as an Observer is told
// of it when it returns.
type Acquisition struct {
	// Mutex is the mutex name.
	Mutex string
	// Contender is the contender's ID (the Locker's, or the Mutexes').
	Contender string
	// Try is set for TryAcquire.
	Try bool
	// Wait is the time from the call to its return.
	Wait time.Duration
	// Token is the fencing token of the lease handed out; zero on failure.
	Token uint64
	// Err is the acquisition's error (matching ErrNotAcquired, ErrClosed, ...); nil when
	// a lease was handed out.
	Err error
}

// attemptOp is the Op of an attempt of the contend loop.
func attemptOp(id string, renewing bool) Op {
	switch {
	case id == "":
		return OpLookup
	case renewing:
		return OpRenew
	}
	return OpAcquire
}

// observeCall tells the Observer of a store call sent at sent. Callers check that there is
// an Observer first, so that nothing is built without one.
func (s *Service) observeCall(op Op, sent time.Time, rec backend.Record, err error) {
	c := Call{Mutex: s.mutex, Contender: s.id, Role: s.role, Op: op, Latency: s.cfg.now().Sub(sent), Err: err}
	if err == nil {
		c.Owner, c.Token = rec.Owner, rec.Token
	}
	s.cfg.observer.OnCall(c)
}

// call makes a store call of op that answers no record (a release, a stop) with ctx, the
// call context derived from caller's (nil: none), and tells the Observer of it.
func (s *Service) call(ctx, caller context.Context, op Op, f func(context.Context) error) error {
	sent := s.cfg.now()
	err := callError(f(ctx), ctx, caller, s.cfg.callTimeout)
	if s.cfg.observer != nil {
		s.observeCall(op, sent, backend.Record{}, err)
	}
	return err
}

// observeAcquire tells the Observer of an acquisition that began at began, with the
// caller's ctx, and returned lease or err. Callers check that there is an Observer first.
func (c *config) observeAcquire(ctx context.Context, mutex, id string, try bool, began time.Time, lease *Lease, err error) {
	a := Acquisition{Mutex: mutex, Contender: id, Try: try, Wait: c.now().Sub(began), Err: err}
	if lease != nil {
		a.Token = lease.Token()
	}
	c.observer.OnAcquire(ctx, a)
}

// Outcome names the outcome of the call for a metric label or span attribute: "ok",
// "timeout" (cut off at the call timeout, ErrTimeout) or "error".
func (c Call) Outcome() string {
	switch {
	case c.Err == nil:
		return "ok"
	case errors.Is(c.Err, ErrTimeout):
		return "timeout"
	}
	return "error"
}

// Reason names Cause for a metric label or span attribute: "released" (Stop, Close,
// Lease.Release: context.Canceled), "owner_changed" (ErrOwnerChanged), "store_error"
// (the local TTL end passed while renewals failed), "expired" (it passed without a
// failure, as after a pause of the process), or "" at the beginning of a tenure.
func (t Tenure) Reason() string {
	switch {
	case t.Cause == nil:
		return ""
	case errors.Is(t.Cause, context.Canceled):
		return "released"
	case errors.Is(t.Cause, ErrOwnerChanged):
		return "owner_changed"
	case t.Cause == ErrLeaseExpired: //nolint:errorlint // the bare sentinel: no store error joined
		return "expired"
	case errors.Is(t.Cause, ErrLeaseExpired):
		return "store_error"
	}
	return "unknown"
}
