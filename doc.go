// Package simba elects exactly one owner of a named mutex among many instances of a
// service, through a store they already run: leader election, leader-only periodic jobs
// and distributed critical sections. It ports the contention protocol of the Kotlin
// library Simba and shares its storage formats, so Go and JVM services can contend for the
// same mutexes. The packages under backend/ talk to one store each; the rest is here and
// behaves the same on every store.
//
// A Service runs a Contender's callbacks (a Retriever only observes); a Locker's Acquire
// returns a Lease for a critical section (Mutexes shares mutexes among a process's
// goroutines; Semaphore and RWMutex hold permits and read-write locks); a Scheduler runs
// work only while it leads. Each is safe for concurrent use. Its Close releases what it
// holds, ends the calls waiting (ErrClosed) and waits for its store work; it is idempotent.
//
// # Model
//
// A mutex is a non-blank name; every contender naming it on the same store competes. The
// store keeps one owner record per mutex (Owner): the owner's contender ID, its TTL end
// (until then it holds the mutex exclusively, and renews before) and the end of a
// transition window after it (until then only the owner may renew). Every tenure has a
// fencing token, the same for each of its renewals and strictly greater for every later
// tenure.
//
// # What is promised
//
// A contender believes it owns the mutex from an acquisition until the first of: a store
// answer naming another owner or none (ErrOwnerChanged); its local TTL end, the send time
// of its last successful acquire or renewal plus the TTL less 1%, on the local monotonic
// clock (ErrLeaseExpired); Stop. Then the tenure context (OnAcquired's, Lease.Context, the
// Scheduler work's) is cancelled, and OnReleased follows. An owner renews a renewal lead
// before its TTL ends and retries a failed renewal promptly, so a short outage or pause
// causes no hand-over.
//
// Nobody else can acquire before the store's transition end, which counts from its later
// receipt of the renewal: two believers never overlap while pauses, delays and the clocks'
// difference in rate stay shorter than the transition window. Stores answer durations,
// added to the local send time, so a wall-clock jump on either side changes nothing.
//
// A process resumed from a pause (GC, a stopped VM) sees the loss at its first look at a
// tenure context after the local TTL end, and is handed no lease nor Scheduler run after
// it. Work under way that does not look again only the resource can stop, by the fencing
// token: claim the fence and write in one step whose result tells ("UPDATE ... SET fence =
// $token WHERE ... AND fence <= $token", zero rows: superseded). Each backend's doc says
// what its token comes from and when it could go back; the README's "What holds per
// deployment" covers replicated stores.
//
// # Failures
//
// Every call that takes a context returns by its deadline, whatever the store does. Store
// work whose outcome is unknown by then (a release, an acquisition that may have been
// applied) goes on in the background, bounded by the call timeout; the next Start waits
// for it, and Close for all of it. An error matches a context error only when the caller's
// own context ended; a call cut off at the call timeout matches ErrTimeout.
//
// A refusal (ErrRefused: wrong credentials, a missing permission or table, a read-only
// replica) makes Start and every acquisition fail at once; an outage (no answer, a reset)
// makes Start fail while acquisitions wait it out. A running service retries both, logs
// them (WithLogger), and Err reports the last failure.
package simba
