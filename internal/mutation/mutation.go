// Package mutation switches on deliberate bugs for the fault suite's mutation runs
// (FAULTS.md scenario 27b), each of which the suite must catch. Only a build with the
// simba_mutation tag can switch one on, by naming it in SIMBA_MUTATION; in every other
// build On is constant false and the compiler drops the mutated branches.
//
// The mutations of the fault suite (internal/chaos):
//
//	no-local-deadline    an owner believes until the store answers otherwise (service)
//	reply-time-lease     the local TTL end counts from the reply, not the send (service)
//	unfenced-referee     the fault suite's referee accepts stale tokens (internal/chaos)
//	latest-version-token the SQL token is the row's latest version (backend/jdbc)
//	sequence-token       the ZooKeeper token is the node's sequence number (backend/zookeeper)
//	follower-heartbeat   any answer to a ZooKeeper heartbeat proves the session alive at its
//	                     send time, even one from a follower cut off from its leader
//	                     (backend/zookeeper)
//	promote-any-predecessor a ZooKeeper waiter takes the mutex when the node just before
//	                     its own is deleted, even one that was not the owner's
//	                     (backend/zookeeper)
//
// The core's bugs that the core's tests and the simulation must catch, each as it was
// found (issue "Trustworthy core"):
//
//	unchecked-belief      only a timer ends belief: contexts, Scheduler runs and hand-outs
//	                      do not look at the local TTL end themselves
//	blocking-calls        Start, Stop and a Locker's failed acquisition wait for the store,
//	                      whatever the caller's deadline
//	timeout-as-deadline   a store call cut off by simba's call timeout reports the caller's
//	                      context.DeadlineExceeded
//	start-once            Locker.Acquire gives up at the first failed start-up
//	run-ignores-stop      Service.Run keeps blocking after a Stop or Close elsewhere
//	stop-waits-in-callback Stop and Close called from a callback wait for that callback
//	tryacquire-adopts     Mutexes.TryAcquire takes up a tenure and grants only its own waiter,
//	                      and OnAcquired then grants nobody (a lost wake-up)
//	reenter-lost          Mutexes.AcquireAs hands a further hold on a lost tenure
//	close-no-wait         Mutexes.Close returns before the store contenders have stopped
//	grant-ending-tenure   Mutexes grants the mutex while it gives the tenure back
//	try-no-wait           Mutexes.TryAcquire fails when the contender is being started or stopped
package mutation
