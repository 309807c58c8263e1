// Package simba elects exactly one owner of a named mutex among many instances of a
// service, through a store they already run: leader election, leader-only periodic jobs
// and distributed critical sections. It shares the protocol and storage formats of the
// Kotlin library Simba, so Go and JVM services contend for the same mutexes; the packages
// under backend/ talk to one store each.
//
// A Service runs a Contender's callbacks (a Retriever only observes); a Locker's Acquire
// returns a Lease for a critical section (Mutexes shares mutexes among a process's
// goroutines; Semaphore and RWMutex hold permits and read-write locks); a Scheduler runs
// work only while it leads. Each is safe for concurrent use; its idempotent Close releases
// what it holds, ends the calls waiting (ErrClosed) and waits for its store work.
//
// The store keeps one owner record per mutex (a non-blank name; Owner): the owner's ID,
// its TTL end (until then it holds the mutex exclusively, and renews before) and the end
// of a transition window after it (until then only the owner may renew). Every tenure has
// a fencing token, the same for each of its renewals and greater for every later tenure.
//
// # What is promised
//
// A contender believes it owns the mutex from an acquisition until the first of: a store
// answer naming another owner or none (ErrOwnerChanged); its local TTL end, the send time
// of its last successful acquire or renewal plus the TTL less 1%, on the monotonic clock
// (ErrLeaseExpired); Stop. Then the tenure context is cancelled, and OnReleased follows.
// Renewals come early, so a short outage or pause causes no hand-over. No one else can acquire before the store's transition end, which counts from its later
// receipt of the renewal: two believers never overlap while pauses, delays and the clocks'
// difference in rate stay shorter than the transition window. Stores answer durations, so
// a wall-clock jump on either side changes nothing.
//
// A process resumed from a pause sees the loss at its next look at a tenure context. Work
// that does not look again only the resource can stop, by the fencing token: claim the
// fence and write in one step ("UPDATE ... SET fence = $token WHERE ... AND fence <=
// $token"). Backends' docs say where tokens come from; the README covers replicas.
//
// # Failures
//
// Every call that takes a context returns by its deadline; store work unfinished by then
// goes on in the background, bounded by the call timeout (the next Start and Close wait
// for it). An error matches a context error only when the caller's own context ended; one
// cut off at the call timeout matches ErrTimeout. A refusal (ErrRefused: credentials,
// permissions, a read-only replica) makes Start and every acquisition fail at once; an
// outage makes Start fail while acquisitions wait it out. A running service retries both
// and logs them; Err reports the last.
package simba
