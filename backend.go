package simba

import (
	"context"
	"log/slog"
	"time"
)

// Backend is the store side of simba: the packages under backend/ implement it for one
// store each (memory, Redis, database/sql, ZooKeeper), and third-party packages may add
// more; tck.Run checks an implementation.
//
// A backend only talks to its store. Everything else is the service's job, done once for
// every backend: the lifecycle, the contend loop with its jittered period, the local TTL
// end, loss-of-ownership contexts, ordered callbacks, validation of common input, the
// Locker and the Scheduler.
//
// StartContend is the one entry point. What it returns decides who drives ownership:
//
//   - A lease store returns a LeaseContention. The service runs the contend loop: it calls
//     Acquire on the contend period (SPEC: owners before their TTL ends, others after the
//     transition window with jitter), Lookup for retrievers, Release when it stops, and
//     contends at once when the backend calls Participant.Wake. The store keeps a TTL per
//     owner; the backend reports durations and the service turns them into local instants.
//     A store whose release hands the mutex to a waiter tells that waiter's service with
//     Participant.Grant.
//   - A session store returns any other Contention and drives ownership itself: it decides
//     who owns the mutex (for example, from ephemeral nodes) and reports every owner it
//     learns of through Participant.Report. StopContend gives ownership up on the store.
//
// What simba guarantees to a backend:
//   - StartContend gets a non-nil ctx and a Participant whose Mutex and, for contenders,
//     ContenderID passed ValidateMutex and ValidateContenderID and, when the backend
//     implements Validator, its own checks; TTL is a positive whole number of
//     milliseconds, Transition a non-negative one, and their sum does not overflow.
//   - No two running services in one process use the same mutex and contender ID.
//   - The methods of one Contention are called from one goroutine at a time, never
//     concurrently with each other, and every call, StartContend included, carries a
//     context with a deadline no later than the service's call timeout from now. Stop
//     cancels the context of a call in flight: its outcome on the store is then unknown,
//     and Release follows on a fresh context.
//   - StartContend runs at every Start, and so at every Locker acquisition: start-up
//     checks that cost I/O (a schema check, a ping) should be done once per backend and
//     remembered. When the caller's context ends before StartContend returns, simba
//     stops waiting for it; a contention it returns afterwards is given StopContend at
//     once, in the background.
//   - StopContend is called exactly once per successful StartContend, last. (A Locker
//     whose lease on a session store was lost calls it as soon as the loss is reported;
//     nothing else is called on that contention afterwards.)
//
// What a backend must do:
//   - Be safe for concurrent use: one backend serves any number of services.
//   - Make sure, in its first StartContend, that the store can be reached and accepts
//     this client (a ping, a schema check, a session), and fail with an error that says
//     which, in one line: Start fails fast on it, the same way for every store. Errors
//     should not repeat the operation or the mutex, which simba prefixes itself.
//   - Honour ctx: return promptly (with an error wrapping ctx.Err()) when it ends.
//   - Never dial from addresses and never close a client the user passed in.
//   - Report only what the store said: a lost race is a Record naming the other owner,
//     not an error; an error means the store's answer is unknown.
type Backend interface {
	// StartContend opens one participant's contention for one mutex: the start-up I/O
	// (subscriptions, schema checks, session nodes) happens here, bounded by ctx. The
	// returned Contention lives until StopContend, independently of ctx.
	StartContend(ctx context.Context, p Participant) (Contention, error)
}

// Participant describes who contends for (or, as a retriever, observes) a mutex, and how a
// backend reaches back into the service.
type Participant struct {
	// Mutex is the mutex name.
	Mutex string
	// ContenderID is the contender's ID, or empty for a retriever, which observes the
	// owner without contending.
	ContenderID string
	// TTL is how long an acquisition or renewal holds the mutex exclusively.
	TTL time.Duration
	// Transition is the window after the TTL during which only the owner may renew.
	Transition time.Duration
	// Logger is the service's logger, already carrying the mutex and contender attributes.
	Logger *slog.Logger
	// Wake asks the service to contend now (a retriever: to look the owner up now) instead
	// of at the next contend period, for example because the store announced a release.
	// It never blocks, may be called from any goroutine any number of times (calls that
	// arrive while one is pending are merged), and is ignored after StopContend.
	Wake func()
	// Report tells the service who owns the mutex now. Session backends call it for every
	// owner they learn of, and with the zero Owner when they cannot tell (for example,
	// while disconnected: the contender must stop believing at once). When the reported
	// Owner names this contender, the service believes it owns the mutex until a later
	// Report names anyone else, or until Owner.TTLAt if that is not zero. It never
	// blocks, may be called from any goroutine, and is ignored after StopContend. Lease
	// backends need not call it.
	Report func(Owner)
	// WaitsOnly is set for a participant that needs to learn only when it becomes the
	// owner, not who owns the mutex while it waits (a Locker's). A session backend may
	// then look only at what decides its turn: with ZooKeeper, the node before its own
	// and not the owner's, so that a change of owner does not wake every waiter, and
	// joining the queue behind other waiters costs no read of the owner. Such a
	// participant serves one tenure: once it has been reported the owner and lost that,
	// a session backend need not (and should not) queue it again; StopContend follows.
	WaitsOnly bool
	// Once is set, with WaitsOnly, for a participant that makes a single attempt (a
	// Locker's TryAcquire): StopContend follows its first look, and the owner that look
	// finds, when it is not this contender, is what the caller is told. A session backend
	// reads the owner for it even where WaitsOnly would let it skip that.
	Once bool
	// Grant tells the service of a lease store that the store made this contender the
	// owner without a call of its own being answered: the releasing owner handed the
	// mutex over to it as it waited. rec is the grant as an Acquire answer would give it
	// (durations counted from sent), and sent is the local instant (time.Now) taken
	// before the Acquire call whose waiting the grant answers was sent to the store. The
	// service applies it as the answer to that call, so the local TTL end is sent +
	// rec.TTL; answers to calls sent no later than sent that arrive afterwards are not
	// allowed to undo it, and a grant older than an answer already applied is ignored.
	// It never blocks, may be called from any goroutine, and is ignored after
	// StopContend. Session backends never call it.
	Grant func(rec Record, sent time.Time)
	// Closed tells the service that the backend was closed while this contention was
	// open: nothing will be reported or answered any more, and an acquisition that waits
	// for its turn (a Locker's, a Mutexes holder's) ends at once with an error matching
	// ErrClosed. The backend's Close calls it unless StopContend came first (more than
	// once is allowed: a Quorum's instances each do); every backend of this module does
	// (the TCK checks it). A lease backend that does not still ends such a wait at the
	// next attempt, whose call fails with ErrClosed. It never blocks; nil is allowed.
	Closed func()
}

// Contention is a backend's side of one participant's contention, returned by StartContend.
type Contention interface {
	// StopContend ends the contention and frees what StartContend and later calls set up
	// (subscriptions, watches, nodes). It is called once, last. A session backend gives
	// up ownership on the store here. It must free local resources even when ctx has
	// ended; the store side is then best effort.
	StopContend(ctx context.Context) error
}

// LeaseContention is the Contention of a lease store. The service runs the contend loop
// and calls these methods; the backend runs no loop of its own.
type LeaseContention interface {
	Contention

	// Acquire makes the contender the owner if the mutex is free (its transition window
	// has ended), or renews its TTL if the contender already owns it and the transition
	// window has not ended; otherwise it changes nothing (stores with a waiting list may
	// record the contender as waiting). It returns the owner record after the attempt,
	// read atomically with it. Retrying after a lost reply must be harmless: the owner
	// check makes a repeated acquire a renewal. Not called for retrievers.
	Acquire(ctx context.Context) (Record, error)

	// Release gives the mutex up if the contender owns it and otherwise leaves the owner
	// alone (stores with a waiting list remove the contender from it). Releasing what one
	// does not own is not an error. The service calls it whenever a contender stops,
	// whatever it believed, so that an acquisition whose reply was lost is undone. Not
	// called for retrievers.
	Release(ctx context.Context) error

	// Lookup reads the owner record without contending. The service calls it for
	// retrievers only.
	Lookup(ctx context.Context) (Record, error)
}

// WaitList is implemented by contentions whose store keeps a list of the contenders that
// wait for a mutex (memory, Redis). Mutexes asks it, at most once per WithLocalHandOvers
// local hand-overs, before giving the mutex back to the store for fairness: when nobody
// else waits there is no need to. Called only while the contention's contender owns the
// mutex, from the goroutine that releases a local hold.
type WaitList interface {
	// OthersWaiting reports whether contenders other than this one wait for the mutex.
	OthersWaiting(ctx context.Context) (bool, error)
}

// Validator is implemented by backends whose store limits mutex names or contender IDs
// beyond ValidateMutex and ValidateContenderID (a maximum length, forbidden characters).
// Services call it when they are created, before any I/O. Errors should wrap
// ErrInvalidArgument (see InvalidArgument).
type Validator interface {
	ValidateMutex(name string) error
	ValidateContenderID(id string) error
}

// Record is an owner record as a lease store answers it. Its instants are durations from
// the moment the store read its own clock, so that no store timestamp is ever compared with
// the local clock; the service adds them to the local time at which it sent the request
// (Record.At). The zero Record means "no owner".
type Record struct {
	// Owner is the owner's contender ID, or empty when there is none.
	Owner string
	// TTL is how much of the owner's TTL was left: ttlAt minus the store's now. It may
	// be zero or negative once the TTL has passed.
	TTL time.Duration
	// Transition is how much of the transition window was left: transitionAt minus the
	// store's now.
	Transition time.Duration
	// Held is how long the owner had held the mutex (the store's now minus acquiredAt),
	// or zero when the store does not record it.
	Held time.Duration
	// Token is the tenure's fencing token, or zero when the store cannot tell it to this
	// caller. It must be the same for every renewal of a tenure and strictly greater for
	// every later tenure of the mutex.
	Token uint64
}

// At converts the record to an Owner whose instants count from sent, the local time at which
// the request was sent. Because the store read its clock after sent, the owner's instants
// come out no later than the store's own: the owner never believes longer than the store
// protects it.
func (r Record) At(sent time.Time) Owner {
	if r.Owner == "" {
		return Owner{}
	}
	return Owner{
		ID:           r.Owner,
		AcquiredAt:   sent.Add(-r.Held),
		TTLAt:        sent.Add(r.TTL),
		TransitionAt: sent.Add(r.Transition),
		Token:        r.Token,
	}
}
