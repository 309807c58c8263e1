// Package observe is what simba tells an Observer, for metrics and tracing: every store
// call with its latency and outcome, every tenure's beginning and end with its cause, and
// every acquisition with its wait. Set one with simba.WithObserver; the adapters
// observe/simbaprom and observe/simbaotel (modules of their own) implement it.
//
// Calls are synchronous, made where the event happens (the goroutine that talks to the
// store, a timer's, the caller of Start, Stop, Acquire or Release), some while simba holds
// internal locks. An Observer must therefore return quickly, never block, never call back
// into what reports to it, and be safe for concurrent use: one Observer serves any number
// of services, whose events arrive concurrently (those of one service in order). A
// panicking Observer is not recovered. Without one, no event is built.
package observe

import (
	"context"
	"strconv"
	"time"
)

// Observer is told what services, Lockers, Schedulers and Mutexes do.
type Observer interface {
	// OnCall is told of a store call when its answer or failure arrives.
	OnCall(Call)
	// OnTenureBegan is told that a contender began to believe it owns a mutex.
	OnTenureBegan(Tenure)
	// OnTenureEnded is told that the belief ended; Tenure.Cause says why.
	OnTenureEnded(Tenure)
	// OnAcquire is told of every acquisition (Locker, Mutexes, Semaphore, RWMutex) when it
	// returns, with the caller's context: a span recorded for it belongs to the caller's
	// trace.
	OnAcquire(context.Context, Acquisition)
}

// Funcs adapts plain functions to the Observer interface; nil functions are skipped.
type Funcs struct {
	Call        func(Call)
	TenureBegan func(Tenure)
	TenureEnded func(Tenure)
	Acquire     func(context.Context, Acquisition)
}

var _ Observer = Funcs{}

// OnCall calls f.Call if it is set.
func (f Funcs) OnCall(c Call) {
	if f.Call != nil {
		f.Call(c)
	}
}

// OnTenureBegan calls f.TenureBegan if it is set.
func (f Funcs) OnTenureBegan(t Tenure) {
	if f.TenureBegan != nil {
		f.TenureBegan(t)
	}
}

// OnTenureEnded calls f.TenureEnded if it is set.
func (f Funcs) OnTenureEnded(t Tenure) {
	if f.TenureEnded != nil {
		f.TenureEnded(t)
	}
}

// OnAcquire calls f.Acquire if it is set.
func (f Funcs) OnAcquire(ctx context.Context, a Acquisition) {
	if f.Acquire != nil {
		f.Acquire(ctx, a)
	}
}

// Op names what a store call asked for.
type Op uint8

// The store calls.
const (
	OpStart   Op = iota + 1 // open the contention, at Start or at an acquisition
	OpAcquire               // acquire the mutex, not owning it
	OpRenew                 // renew the tenure the contender believes in
	OpLookup                // read the owner, for a retriever
	OpRelease               // give the mutex up
	OpStop                  // end the contention
)

// String returns "start", "acquire", "renew", "lookup", "release" or "stop", fit for a
// metric label.
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

// Role says what a contender is for: leadership or a critical section.
type Role uint8

// The roles.
const (
	RoleLeader   Role = iota + 1 // a Service's or a Scheduler's: leadership
	RoleLock                     // a Locker's or Mutexes': a lease for a critical section
	RoleObserver                 // a retrieval service's (Observe, Lookup): no contention
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

// Kind is what the name of an event names: a mutex, a semaphore or a read-write lock.
type Kind uint8

// The kinds; the zero Kind is a mutex's.
const (
	KindMutex     Kind = iota // a Service's, Scheduler's, Locker's or Mutexes' mutex
	KindSemaphore             // a Semaphore's permit
	KindRWLock                // an RWMutex's read or write hold
)

// String returns "mutex", "semaphore" or "rwlock", fit for a metric label.
func (k Kind) String() string {
	switch k {
	case KindMutex:
		return "mutex"
	case KindSemaphore:
		return "semaphore"
	case KindRWLock:
		return "rwlock"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Call is one store call of a service.
type Call struct {
	Mutex     string
	Kind      Kind   // what Mutex names
	Contender string // empty for a retriever
	// Role is what the contender is for. A leader's first call is its start-up (OpStart),
	// made before it can lead: the moment to set up what is kept per mutex.
	Role    Role
	Op      Op
	Latency time.Duration // from sending the call to its answer or failure
	Owner   string        // the owner the answer named; empty without one
	Token   uint64        // the fencing token the answer showed, or zero
	// Err is the call's error, nil when the store answered; one cut off at the call
	// timeout matches simba.ErrTimeout, one cut off by Stop context.Canceled.
	Err error
	// Outcome is "ok", "timeout" (cut off at the call timeout) or "error", fit for a label.
	Outcome string
}

// Tenure is the beginning or the end of a contender's belief that it owns a mutex.
type Tenure struct {
	Mutex     string
	Kind      Kind // what Mutex names: a semaphore's or read-write lock's tenure is one hold
	Contender string
	Role      Role          // RoleLeader (leadership) or RoleLock (a lease)
	Token     uint64        // the tenure's fencing token, or zero
	Granted   bool          // at the beginning: handed over by the store as the contender waited
	Held      time.Duration // at the end: how long the belief lasted
	// Cause is, at the end, why belief ended, as the tenure context's context.Cause:
	// context.Canceled when given up, simba.ErrOwnerChanged or simba.ErrLeaseExpired
	// (joined with the last store error if renewals failed) when lost.
	Cause error
	// Reason names Cause for a label: "released", "owner_changed", "expired" (the local
	// TTL end passed without a failure, as after a pause), "store_error" (it passed while
	// renewals failed); "" at the beginning.
	Reason string
}

// Acquisition is one Acquire or TryAcquire of a Locker or Mutexes, or one acquisition
// of a Semaphore's permit or an RWMutex's hold, when it returns.
type Acquisition struct {
	Mutex     string
	Kind      Kind // what Mutex names
	Contender string
	Try       bool          // TryAcquire
	Wait      time.Duration // from the call to its return
	Token     uint64        // the fencing token of the lease handed out; zero on failure
	Err       error         // nil when a lease was handed out
}
