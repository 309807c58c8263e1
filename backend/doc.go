// Package backend is the contract between simba and its stores, for those who write a
// backend: the packages below it implement it for one store each (memory, redis, jdbc,
// zookeeper, etcd), and package tck checks an implementation (tck.Run). Users of simba never
// import it; they pass a backend to simba's constructors.
//
// A backend only talks to its store. simba does everything else, once, for every backend:
// the lifecycle, the contend loop with its jittered period, the local TTL end, loss of
// ownership as a cancelled context, ordered callbacks, validation of common input, the
// Locker, Scheduler and Mutexes. Backend.StartContend is the one entry point, and what it
// returns decides who drives ownership:
//
//   - A lease store returns a LeaseContention. simba runs the contend loop: it calls
//     Acquire on the contend period (an owner before its TTL ends, others after the
//     transition window, with jitter), Lookup for retrievers, Release when it stops, and
//     at once when the backend calls Participant.Wake. The store keeps a TTL per owner and
//     answers with durations; simba turns them into local instants from the local send
//     time. A store whose release hands the mutex to a waiter tells that waiter with
//     Participant.Grant.
//   - A session store returns any other Contention and decides ownership itself (from
//     ephemeral nodes, say): it reports every owner it learns of through
//     Participant.Report, and gives ownership up in StopContend.
//
// # What simba guarantees to a backend
//
//   - StartContend gets a non-nil ctx and a Participant whose Mutex and ContenderID (empty
//     for a retriever) passed simba.ValidateMutex and simba.ValidateContenderID and, when
//     the backend implements Validator, its own checks; TTL is a positive whole number of
//     milliseconds, Transition a non-negative one, and their sum does not overflow.
//   - No two running contentions in one process have the same mutex and contender ID.
//   - The methods of one Contention are called from one goroutine at a time, and every
//     call, StartContend included, carries a context whose deadline is at most the call
//     timeout away. Stop cancels the context of a call in flight: its outcome on the store
//     is then unknown, and Release follows on a fresh context.
//   - StartContend runs at every Start and every Locker acquisition: start-up checks that
//     cost I/O should run once per backend and be remembered. When the caller's context
//     ends first, simba stops waiting, and a contention returned later is given
//     StopContend at once, in the background.
//   - StopContend is called exactly once per successful StartContend, last.
//
// # What a backend must do
//
//   - Be safe for concurrent use: one backend serves any number of services.
//   - Make sure, in its first StartContend, that the store can be reached and accepts this
//     client (a ping, a schema check, a session), and fail otherwise with one line that
//     says which. An answer that no retry can cure (credentials, permissions, schema, a
//     read-only replica) wraps simba.ErrRefused, at start-up and at every later call; an
//     outage (no answer, a timeout, a reset) does not. simba prefixes the operation and
//     the mutex itself.
//   - Honour ctx: return promptly, with an error wrapping ctx.Err(), when it ends.
//   - Never dial from addresses, and never close a client it was given.
//   - Report only what the store said: a lost race is a Record naming the other owner,
//     not an error; an error means the store's answer is unknown.
//   - A session store reports the owner before its StartContend returns (simba.Lookup
//     reads what was reported by then), with a TTL bounding how long that owner may be
//     believed without a further report.
//   - After its own Close: call Participant.Closed of every open contention, and fail
//     later calls with an error wrapping simba.ErrClosed.
//
// Fencing tokens: Record.Token is the same for every renewal of a tenure and strictly
// greater for every later tenure of the mutex. Derive it from what the store keeps
// monotonic, and document what it is derived from and when it could go back.
//
// Owner values: a backend that implements ValueKeeper is given a contender's
// Participant.Value (at most 1 KiB of UTF-8 without control characters; simba checks
// it) and keeps it with each tenure the contender begins, a grant included, replacing
// the value of the tenure before. Every Record names the value of the tenure it names,
// read with its token in one atomic read: never a value of another tenure, and the empty
// one when it cannot tell. simba refuses a value, at construction, for a backend that
// keeps none for the kind of name, so a backend without ValueKeeper is never given one.
package backend
