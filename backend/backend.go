package backend

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Backend is a store. See the package documentation for the contract.
type Backend interface {
	// StartContend opens one participant's contention for one mutex, with the start-up
	// I/O (subscriptions, schema checks, session nodes) bounded by ctx. The contention
	// lives until StopContend, independently of ctx.
	StartContend(ctx context.Context, p Participant) (Contention, error)
}

// Participant is who contends for (or, as a retriever, observes) a mutex, and how the
// backend reaches back into simba. Each func never blocks, may be called from any
// goroutine, and is ignored after StopContend.
type Participant struct {
	// Mutex is the mutex name.
	Mutex string
	// ContenderID is the contender's ID; empty for a retriever, which only observes.
	ContenderID string
	// Value is the contender's owner value, to keep with each of its tenures and answer
	// in their Records; empty: none. Only a ValueKeeper is given one.
	Value string
	// TTL is how long an acquisition or renewal holds the mutex exclusively.
	TTL time.Duration
	// Transition is the window after the TTL during which only the owner may renew.
	Transition time.Duration
	// Logger already carries the mutex and contender attributes.
	Logger *slog.Logger
	// Wake asks for an attempt (a retriever: a lookup) now rather than at the next
	// contend period, because the store announced a release, say. Calls that arrive while
	// one is pending are merged.
	Wake func()
	// Report, for a session store, tells who owns the mutex now: rec's durations count
	// from at, a local instant (time.Now). Call it for every owner learned of, and with
	// the zero Record when the owner cannot be told (disconnected: the contender stops
	// believing at once). An owner named by rec is believed until a later report, or
	// until at + rec.TTL when rec.TTL is not zero. Lease stores need not call it.
	Report func(rec Record, at time.Time)
	// WaitsOnly is set for a participant that needs to learn only when it becomes the
	// owner, not who owns the mutex meanwhile (a Locker's): a session store may look
	// only at what decides its turn (with ZooKeeper, the node before its own). It serves
	// one tenure: once it was reported the owner and lost that, StopContend follows, and
	// a session store need not queue it again.
	WaitsOnly bool
	// Once is set, with WaitsOnly, for a single attempt (TryAcquire): StopContend follows
	// the first look, and the owner it finds is what the caller is told, so a session
	// store reads the owner for it.
	Once bool
	// Grant tells that the store made this contender the owner without an answer to a
	// call of its own: the releasing owner handed the mutex to it as it waited. rec is
	// what an Acquire answer would be, counted from sent: the local instant taken before
	// the Acquire whose waiting the grant answers was sent. simba applies it as that
	// call's answer (the local TTL end is sent + rec.TTL), lets no answer to an earlier
	// call undo it, and ignores a grant older than an answer already applied. Session
	// stores never call it.
	Grant func(rec Record, sent time.Time)
	// Hold is what the participant asks for: the zero Hold is a mutex's ownership, and
	// only backends that implement Holder are given another.
	Hold Hold
	// Closed tells that the backend was closed while the contention was open: nothing
	// will be answered any more, and an acquisition waiting for its turn ends at once
	// with simba.ErrClosed. Call it at Close unless StopContend came first (more than once
	// is allowed). May be nil.
	Closed func()
}

// Kind is what a name names. A store keeps the names of each kind apart.
type Kind uint8

const (
	Mutex     Kind = iota // one owner at a time
	Semaphore             // at most Hold.Permits holders at a time
	RWLock                // any number of shared (read) holders, or one exclusive (write) holder
)

func (k Kind) String() string {
	switch k {
	case Mutex:
		return "mutex"
	case Semaphore:
		return "semaphore"
	case RWLock:
		return "read-write lock"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Hold is what a participant asks for. Holders of a semaphore or a read-write lock are
// admitted first come, first served: a participant that finds another waiting ahead of it
// waits too, even where it would fit (so a waiting writer keeps later readers out).
//
// A lease store answers Acquire, for a participant it admits or renews, with a Record that
// names it, with its own TTL and a token new at its admission; for one that waits, with the
// Record of the holder whose hold ends first, or the zero Record when none does. Its hold
// lapses by the same rules as a mutex's ownership. A session store reports the same.
type Hold struct {
	Kind Kind
	// Permits is a semaphore's permit count. Every participant of a name gives the same
	// one: a store that keeps another count for the name refuses it (simba.ErrRefused).
	Permits int
	// Shared asks for a read-write lock's read hold; a write hold otherwise.
	Shared bool
	// Beside, for a read hold, names the write holder beside which it is admitted at once,
	// ahead of those waiting: that holder's downgrade, which gives its write hold back next.
	Beside string
}

// Holder is implemented by backends that keep semaphores and read-write locks, as well as
// mutexes.
type Holder interface {
	// Holds reports whether the backend keeps names of kind k.
	Holds(k Kind) bool
}

// ValueKeeper is implemented by backends that keep owner values (Participant.Value). simba
// refuses, at construction, a value for a backend that keeps none.
type ValueKeeper interface {
	// KeepsValues reports whether the backend keeps values for names of kind k.
	KeepsValues(k Kind) bool
}

// SlotRecorder is implemented by contentions whose store records, per mutex, the last
// slot a Scheduler started, so that a new leader does not run a slot again.
type SlotRecorder interface {
	// LastSlot returns the slot recorded for the mutex; the zero Slot when none is.
	LastSlot(ctx context.Context) (Slot, error)
	// ClaimSlot records s in one atomic step with the check that s.At is later than the
	// recorded slot's and s.Token not less than its token; it reports whether it did, and
	// changes nothing when it did not. A retry after a lost reply answers false.
	ClaimSlot(ctx context.Context, s Slot) (bool, error)
}

// Slot is a run of a Scheduler as a store records it.
type Slot struct {
	// At is the instant the run was scheduled for; stores keep its Unix nanoseconds.
	At time.Time
	// Token is the fencing token of the tenure that started the run.
	Token uint64
}

// Nanos returns s.At in Unix nanoseconds, as stores keep it; false for an instant they
// cannot hold (before 1678 or after 2262), which a store refuses as bad input with
// SlotRange. Slot instants are the only wall-clock instants the library converts.
func (s Slot) Nanos() (int64, bool) {
	if s.At.Before(earliestSlot) || s.At.After(latestSlot) {
		return 0, false
	}
	return s.At.UnixNano(), true
}

// SlotAt returns the instant of a slot record's Unix nanoseconds.
func SlotAt(nanos int64) time.Time { return time.Unix(0, nanos) }

// SlotRange is the rule a slot instant out of range breaks, for simba.InvalidArgument.
const SlotRange = "must lie between the years 1678 and 2262 (Unix nanoseconds)"

var earliestSlot, latestSlot = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// HandOffer is implemented by contentions whose store can give a mutex from its owner to
// a contender waiting for it, in one step (Service.HandOff).
type HandOffer interface {
	// Waiters lists the contenders that wait for the mutex, first come first; a Waiter's
	// Value is the one its contender would keep (empty on a store that keeps none).
	Waiters(ctx context.Context) ([]Waiter, error)
	// HandOff is called by the owner after its belief ended. In one atomic step with the
	// checks that the caller owns the mutex and that to waits, it makes to the owner with
	// a new tenure (a greater token, to's value) and puts the caller behind those waiting
	// (a store whose order is that of arrival may send the waiters ahead of to behind it,
	// still ahead of the caller); to learns it as it learns any tenure (a Grant, a Report, its next Acquire). When a
	// check fails it changes nothing and returns an error wrapping simba.ErrNotOwner (the
	// caller does not own the mutex) or simba.ErrNotWaiting (to does not wait).
	HandOff(ctx context.Context, to string) error
}

// Waiter is a contender waiting for a mutex.
type Waiter struct {
	ID    string
	Value string
}

// Contention is a backend's side of one participant's contention.
type Contention interface {
	// StopContend ends the contention and frees what it set up (subscriptions, watches,
	// nodes); a session store gives up ownership here. It is called once, last, and frees
	// local resources even when ctx has ended (the store side is then best effort).
	StopContend(ctx context.Context) error
}

// LeaseContention is the Contention of a lease store; simba runs the contend loop.
type LeaseContention interface {
	Contention

	// Acquire makes the contender the owner if the mutex is free (its transition window
	// has ended), renews it if the contender owns it and the window has not ended, and
	// otherwise changes nothing (a store with a waiting list may record the contender).
	// It returns the owner record after the attempt, read atomically with it. A retry
	// after a lost reply must be harmless: the owner check makes it a renewal. Never
	// called for a retriever.
	Acquire(ctx context.Context) (Record, error)

	// Release gives the mutex up if the contender owns it, and otherwise leaves the owner
	// alone (a store with a waiting list removes the contender from it); releasing what
	// one does not own is no error. simba calls it whenever a contender stops, whatever it
	// believed, which undoes an acquisition whose answer was lost. Never called for a
	// retriever.
	Release(ctx context.Context) error

	// Lookup reads the owner record without contending; called for retrievers only.
	Lookup(ctx context.Context) (Record, error)
}

// WaitList is implemented by contentions whose store keeps the list of contenders waiting
// for a mutex (memory, Redis). simba.Mutexes asks it, while the contender owns the mutex,
// before giving the mutex back to the store for fairness: nobody else waiting, no need.
type WaitList interface {
	// OthersWaiting reports whether contenders other than this one wait for the mutex.
	OthersWaiting(ctx context.Context) (bool, error)
}

// Validator is implemented by backends whose store limits mutex names or contender IDs
// beyond simba.ValidateMutex and simba.ValidateContenderID (a length, characters). simba
// calls it at construction, before any I/O; errors wrap simba.ErrInvalidArgument
// (simba.InvalidArgument builds one).
type Validator interface {
	ValidateMutex(name string) error
	ValidateContenderID(id string) error
}

// Record is an owner record as a store answers it. Its instants are durations from the
// moment the store read its own clock, never timestamps: simba adds them to the local
// time at which it sent the request, so the owner never believes longer than the store
// protects it. The zero Record means "no owner".
type Record struct {
	// Owner is the owner's contender ID; empty when there is none.
	Owner string
	// TTL is what was left of the owner's TTL (ttlAt less the store's now); zero or
	// negative once it passed.
	TTL time.Duration
	// Transition is what was left of the transition window (transitionAt less now).
	Transition time.Duration
	// Held is how long the owner had held the mutex; zero when the store does not keep it.
	Held time.Duration
	// Token is the tenure's fencing token; zero when the store cannot tell this caller.
	Token uint64
	// Value is the owner value of the tenure Token names, read with it: never another
	// tenure's. Empty when the owner has none or the store cannot tell.
	Value string
}

// RenewalBatcher is implemented by backends that send the renewals reaching them together
// as one request. simba then has the owners of the process renew on one grid of instants,
// so that their renewals reach the backend together.
type RenewalBatcher interface {
	// BatchesRenewals reports whether renewals made at one instant go as one request.
	BatchesRenewals() bool
}

// DeadlineKeeper is implemented by backends whose calls, their contentions' included,
// return by their context's deadline whatever the store does. simba then makes the calls a
// caller waits for on its goroutine; a cancellation ends them when the backend heeds it.
type DeadlineKeeper interface {
	// KeepsDeadlines reports whether every call returns by its context's deadline.
	KeepsDeadlines() bool
}
