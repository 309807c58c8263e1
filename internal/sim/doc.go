// Package sim is a deterministic simulation of simba's core: simulated processes, each with
// its own backend on one memory store and its own clock, run seeded random operations
// (Locker, Mutexes, Service, Scheduler calls, context cancellations, backend crashes)
// while faults are injected at the store boundary (errors, hung and stalled calls, replies
// lost after the store applied the call) and whole processes are paused (their timers,
// replies and notifications held while time goes on, then released in a seeded order).
// A checker runs after every step and at every hand-out.
//
// Time is fake: a run is one testing/synctest bubble, and every step ends when all its
// goroutines are blocked, so a run is reproducible from its seed up to the order in which
// goroutines woken in one step run. The operations depend on the seed only, so a failing
// history can be replayed, and shrunk, by keeping a subset of them.
//
// What the checker holds the core to:
//
//   - exclusion: per mutex, at most one fencing token is believed (a live tenure
//     context) at any instant, and a token belongs to one contender;
//   - tokens: a newly believed token is never below one believed before;
//   - belief is checked where it is used: a lease or a Scheduler run is handed out only on
//     a live tenure, and a context ends by its owner's own call, a close, or a loss;
//   - slots: a Scheduler run's slot is the one its tenure claimed on the store, a Period
//     or more after the slot of the mutex's last run, whoever led;
//   - deadlines: every call returns by its context's deadline, matches a context error
//     only when its context ended, and an Acquire with a live context returns a lease or
//     ErrClosed;
//   - liveness: no waiter sleeps while nobody holds the mutex (and no fault is active);
//     a Mutexes TryAcquire on a mutex nobody else holds or wants succeeds; Run returns
//     when its service is stopped;
//   - Close leaves nothing: no owner record on the store, no goroutine.
//
// The root package's TestSimulation runs it (make test: a fixed set of seeds; make sim
// SEEDS=n: more), and TestSimulationCatchesMutations proves, with the core's bugs switched
// in one at a time by their patches (internal/mutant), that it finds each of them.
package sim
