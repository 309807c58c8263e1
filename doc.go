// Package simba elects exactly one owner of a named mutex among many instances of a
// service, through a store they already run: leader election, leader-only periodic jobs
// and distributed critical sections. It ports the contention protocol of the Kotlin
// library Simba and shares its storage formats, so Go and JVM services can contend for the
// same mutexes.
//
// # Model
//
// A mutex is a non-blank name; every contender naming it on the same store competes. The
// store keeps one owner record per mutex: the owner's contender ID, its TTL end (ttlAt:
// until then it holds the mutex exclusively, and renews before) and the end of a
// transition window after it (transitionAt: until then only the owner may renew, others
// may acquire only afterwards). Every tenure has a fencing token, the same for each of its
// renewals and strictly greater for every later tenure. The packages under backend/ talk
// to one store each; everything else is here and behaves the same on every store.
//
// Three ways to use it: a Service runs a Contender's callbacks (a Retriever only
// observes); a Locker's Acquire returns a Lease for a critical section (Mutexes shares
// mutexes among a process's goroutines); a Scheduler runs work only while it leads.
//
// # What is promised
//
// A contender believes it owns the mutex from an acquisition until the first of: an
// answer of the store that names another owner (or none); its local TTL end, which is the
// send time of its last successful acquire or renewal plus the TTL less 1%, on the local
// monotonic clock, whether or not the store answers again; Stop. Then the tenure context
// (OnAcquired's, Lease.Context, the Scheduler work's) is cancelled, and OnReleased
// follows. An owner renews a renewal lead before its TTL ends and retries a failed renewal
// promptly, so a short outage or pause causes no hand-over.
//
// Nobody else can acquire before the store's transitionAt, which counts from a later
// instant (the store's receipt of the renewal) and adds the transition window. So two
// believers never overlap while pauses, delays and the clocks' difference in rate stay
// shorter than that window. Store timestamps are never turned into local instants: stores
// answer with durations, which simba adds to the local send time, so a wall-clock jump on
// either side changes nothing.
//
// A paused process (a GC pause, a stopped VM) resumes with its timers due at once, so
// belief is also checked where it is used: a tenure context reports the loss at the first
// look after the local TTL end, and no lease is handed out nor Scheduler run started
// after it. What no library can stop is work already under way that acts without looking
// again: only the resource can refuse a superseded owner's write, by its fencing token.
// Claim the fence and write in one step whose result tells, as in
//
//	UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1 AND fence <= $3
//
// where zero rows affected means "superseded". Each backend's documentation says what its
// token is derived from and when it could go backwards; the README's "What holds per
// deployment" says what holds on replicated stores.
//
// # Failures
//
// Every call that takes a context returns by its deadline, whatever the store does. Store
// work whose outcome is unknown by then (a release, an acquisition that may have been
// applied) goes on in the background, bounded by the call timeout; the next Start waits
// for it, and Close waits for all of it. An error matches a context error only when the
// caller's own context ended; a call cut off at the call timeout matches ErrTimeout.
//
// A refusal (ErrRefused: wrong credentials, a missing permission or table, a read-only
// replica) makes Start and every acquisition fail at once; an outage (no answer, a reset)
// makes Start fail while acquisitions wait it out. A running service retries both, logs
// an outage at Warn level and a refusal at Error level, and Err reports the last failure
// for health checks. Without WithLogger, Warn and above go to slog.Default, so a failing
// contender shows in the log of a program that configured nothing.
//
// Callbacks of one service run one at a time, in order, never on the goroutine that talks
// to the store; a panic in one is recovered and logged. Stop ends belief, delivers
// OnReleased, then releases the mutex on the store.
package simba
