// Package simba elects exactly one owner of a named mutex among many instances of a
// service, through a store they already run: leader election, leader-only periodic jobs
// and distributed critical sections. It ports the contention protocol of the Kotlin
// library Simba and shares its storage formats, so Go and JVM services can contend for
// the same mutexes during a migration.
//
// # Model
//
// A mutex is a non-blank name; every contender naming the same mutex on the same store
// competes for it. A contender has a unique ID (HostContenderID, UUIDContenderID). The
// store keeps an owner record per mutex: the owner's ID, when it acquired, and two
// instants:
//
//   - ttlAt: until then the owner holds the mutex exclusively; it renews before then.
//   - transitionAt = ttlAt + transition: during the transition window only the owner may
//     renew. Others may acquire only once it has ended.
//
// Backends (backend/memory, backend/redis, backend/jdbc, backend/zookeeper) talk to one
// store each; everything else lives here and works the same on all of them.
//
// # Three ways to use it
//
//   - Contender callbacks: implement Contender (or fill a ContenderFuncs), create a
//     Service with NewService, Start and Stop it. OnAcquired and OnReleased strictly
//     alternate. A Retriever only observes (NewRetrievalService).
//   - Locker: Acquire blocks until this contender owns the mutex or its context ends and
//     returns a Lease; Release gives it up.
//   - Scheduler: runs work periodically, only while this instance owns the mutex.
//
// # Fencing tokens
//
// Every tenure carries a fencing token (Owner.Token, Lease.Token): the same for every
// renewal of one tenure and strictly greater for every later tenure of the mutex on the
// store. No lease can stop an owner that is paused (a GC pause, a stopped VM) from acting
// on its belief after it lapsed; a resource that remembers the highest token it has seen
// and rejects lower ones can. Pass the token with every write that the mutex protects.
// Each backend's documentation says what its token is derived from and when it could go
// backwards (a Redis without persistence that restarts empty is detected, not silent).
//
// # Replicated stores
//
// What holds above holds for one store server. On a replicated deployment it depends on
// how the store replicates (the README's "What holds per deployment" has the table and
// the fault scenarios that show each row):
//
//   - ZooKeeper ensemble: the same, as long as sessions are at least two ticks and the
//     servers' links are fast; the owner's belief is renewed only through the leader.
//   - Redis Sentinel and Redis Cluster: replication is asynchronous, so a failover can
//     lose the latest acquisition and two contenders believe at once until the stale one
//     renews; tokens stay increasing while the Redis hosts' clocks agree, and fencing is
//     what protects the resource.
//   - MySQL/MariaDB and PostgreSQL: what the database's replication promises for a
//     committed row; with asynchronous replicas, the same as Redis.
//
// # When an owner stops believing
//
// A contender believes it owns the mutex from an acquisition until the earlier of:
//
//   - an answer of the store that names another owner (or none), at once;
//   - its local TTL end: the time it sent its last successful acquire or renewal, plus the
//     TTL, minus a drift margin of 1% of the TTL, measured on the local monotonic clock,
//     whether or not the store ever answers again;
//   - Stop.
//
// Then the tenure context (OnAcquired's ctx, Lease.Context, the Scheduler's work context)
// is cancelled at once, and OnReleased follows. The owner sends its renewal a renewal lead
// (a third of the TTL by default, WithRenewalLead) before its TTL ends and retries a failed
// renewal promptly, so a healthy owner never reaches its local TTL end, and a short outage
// or pause causes no hand-over.
//
// No other contender can acquire before the store's transitionAt, which the store counts
// from the moment it received the renewal (later than its send time) and which adds the
// transition window. Belief therefore ends at least a transition window before anyone
// else can win, and two believers never overlap while pauses, delays and the difference
// in clock rate between this host and the store stay smaller than that window. Larger
// pauses are what fencing tokens are for.
//
// # After a pause
//
// A process that was paused (a long GC pause, SIGSTOP, a stopped VM) resumes with all its
// timers due at once, and its goroutines run in any order. Belief is therefore checked
// where it is used, on the local monotonic clock, not only by a timer:
//
//   - a tenure context (Lease.Context, OnAcquired's and the Scheduler work's context)
//     reports the loss at the first Err, Done or context.Cause after the local TTL end,
//     whatever the timers have done;
//   - a Scheduler starts no run, and Locker and Mutexes hand out no lease, unless the
//     local TTL end lies ahead at that instant.
//
// What no library can promise: work that was already under way when the process paused,
// and that acts without looking at its context again, or between that look and the act.
// Contexts derived from a tenure context (context.WithTimeout and the like) learn of the
// loss when their parent is next looked at or when simba's timer runs, so look at the
// tenure context itself right before acting. Only the resource can refuse the write of a
// resumed owner, by its fencing token. The safe pattern claims the fence and writes in
// one atomic step whose result tells, for example in SQL
//
//	UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1 AND fence <= $3
//
// with zero rows affected meaning "superseded": never read the fence first and write
// after, which lets a stale owner slip in between.
//
// # Deadlines and the store's failures
//
// Every call that takes a context returns by its deadline, whatever the store does: a
// store that stalls (a SIGSTOPped server), a client that ignores deadlines. Store work
// whose outcome is unknown by then (releasing an acquisition that may have been applied,
// a release not yet answered) goes on in the background, bounded by the call timeout
// (WithCallTimeout). The next Start or acquisition waits for it, so that a late release
// never lands on a new tenure, and Close waits for all of it: nothing outlives Close.
//
// Errors match a context error (context.DeadlineExceeded, context.Canceled) only when the
// caller's own context ended. A store call that simba cut off at its call timeout matches
// ErrTimeout instead.
//
// Refusals and outages, the same on every backend. A refusal is a store's answer that no
// retry can cure (ErrRefused: wrong credentials, a missing permission, a missing table, a
// read-only replica); an outage is the lack of an answer (unreachable, timed out, reset,
// a server still loading). Each backend's documentation lists which of its store's errors
// are which. Service.Start (and a Scheduler's) fails fast on either. Locker and Mutexes
// acquisitions fail at once on a refusal, with the store's message, and wait out an
// outage, retrying with backoff until their context ends; TryAcquire makes one attempt. A
// running service retries both: an outage is logged at Warn level, a refusal (a password
// rotated under it) at Error level, and Service.Err returns the last failure until a call
// succeeds again, so that its health check fails meanwhile.
//
// Logging: without WithLogger, records of level Warn and above (outages, refusals, lost
// ownership, recovered panics) go to slog.Default, the application's own logger, and the
// rest (acquisitions, renewals, lifecycle changes) nowhere. A contender whose every call
// fails is thus visible in the log of a process that configured nothing, as client-go's
// elector is, while a healthy one stays quiet; WithLogger(slog.New(slog.DiscardHandler))
// silences it.
//
// Metrics and tracing: WithObserver sets an Observer that is told of every store call
// (latency, outcome), every tenure's beginning and end (with its cause) and every
// acquisition (its wait). Without one, nothing is built. The adapters for Prometheus and
// OpenTelemetry are modules of their own (observe/simbaprom, observe/simbaotel), so this
// module depends on neither. Lookup reads a mutex's owner once, without a service;
// Observe follows it as a channel; Health reports a service's state for probes.
//
// Clocks: simba never turns a store timestamp into a local instant. Stores answer with
// durations (time left until ttlAt and transitionAt, by the store's own clock), and simba
// adds them to the local monotonic time at which it sent the request. A wall-clock jump
// on either side therefore moves nothing; only a difference in clock rate matters, and the
// drift margin absorbs 1%.
//
// # Lifecycle and callbacks
//
// A Service moves INITIAL -> STARTING -> RUNNING -> STOPPING -> INITIAL. Callbacks of one
// service run one at a time, in order, on a goroutine of the service, never on the one
// that talks to the store; a panicking callback is recovered and logged and
// contention goes on. Stop ends belief, delivers OnReleased, then releases the mutex on
// the store, and returns after every callback and goroutine of the service has finished.
// Results of a lifecycle that has ended are dropped, and an acquisition whose answer
// arrives after Stop began is released again on the store.
//
// Errors wrap the sentinels in this package (ErrInvalidArgument, ErrNotAcquired, ...);
// test them with errors.Is. Invalid input is rejected before any I/O.
package simba
