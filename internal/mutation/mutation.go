// Package mutation switches on deliberate bugs for the fault suite's mutation runs
// (FAULTS.md scenario 27b), each of which the suite must catch. Only a build with the
// simba_mutation tag can switch one on, by naming it in SIMBA_MUTATION; in every other
// build On is constant false and the compiler drops the mutated branches.
//
// The mutations:
//
//	no-local-deadline   an owner believes until the store answers otherwise (service)
//	reply-time-lease    the local TTL end counts from the reply, not the send (service)
//	unfenced-referee    the fault suite's referee accepts stale tokens (internal/chaos)
//	latest-version-token the SQL token is the row's latest version (backend/jdbc)
//	sequence-token      the ZooKeeper token is the node's sequence number (backend/zookeeper)
package mutation
