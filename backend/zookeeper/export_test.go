package zookeeper

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// Test hooks.

// SessionID returns the ID of the backend's current session, zero without one.
func SessionID(b *Backend) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess.id
}

// Orphans returns how many nodes wait to be deleted when the session is back.
func Orphans(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.orphans)
}

// Sequence and Latches expose the node-name parser to the external tests.
var (
	Sequence      = sequence
	NewProtection = newProtection
)

// Latches returns the names of the latch nodes among children, owner first.
func Latches(children []string) []string {
	var out []string
	for _, l := range latches(children) {
		out = append(out, l.name)
	}
	return out
}

// Leave creates a contender node for id under mutex in the backend's session, as a
// contention that stopped without deleting it would leave behind.
func Leave(b *Backend, mutex, id string) (string, error) {
	return LeaveWithPrefix(b, mutex, newProtection(), id)
}

// LeaveWithPrefix is Leave with the node's protection prefix given.
func LeaveWithPrefix(b *Backend, mutex, prefix, id string) (string, error) {
	parent := mutexPath(mutex)
	if err := b.makeParents(context.Background(), parent); err != nil {
		return "", err
	}
	return b.conn.Create(parent+"/"+prefix+latchName, []byte(id), zk.FlagEphemeralSequential, b.acl)
}

// Abandon records prefix as the protection prefix of a create of the mutex's queue that
// a contention gave up for lost (see contention.join). The queue must exist: a contention
// of the mutex runs.
func Abandon(b *Backend, mutex, prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[mutexPath(mutex)]
	q.abandoned = append(q.abandoned, prefix)
}
