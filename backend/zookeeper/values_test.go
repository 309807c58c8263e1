package zookeeper_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// A contender's value is kept in a node of its own under /simba-value/<mutex>, made with
// its node in one transaction (the same czxid), and named after the node's protection:
// the mutex node holds the contenders' nodes only, as Curator's LeaderLatch lists them.
// Another session reads the value with the owner; the value node goes with the node.
func TestOwnerValueNode(t *testing.T) {
	for name, opts := range map[string][]zookeeper.Option{"queue": nil, "per node": {perNode}} {
		t.Run(name, func(t *testing.T) {
			mutex := mutexName(t)
			admin := adminConn(t)
			owner, err := simba.NewLocker(newBackend(t, opts...), mutex, simba.WithContenderID("a"), simba.WithOwnerValue("10.0.0.7:8080"))
			require.NoError(t, err)
			lease, err := owner.Acquire(t.Context())
			require.NoError(t, err)
			assert.Equal(t, "10.0.0.7:8080", lease.Owner().Value)

			o, err := simba.Lookup(t.Context(), newBackend(t, opts...), mutex)
			require.NoError(t, err)
			assert.Equal(t, simba.Owner{ID: "a", Token: lease.Token(), Value: "10.0.0.7:8080"},
				simba.Owner{ID: o.ID, Token: o.Token, Value: o.Value}, "another session's lookup")

			kids, _, err := admin.Children("/simba/" + mutex)
			require.NoError(t, err)
			require.Len(t, kids, 1, "the mutex node holds the contender's node only")
			_, lock, err := admin.Get("/simba/" + mutex + "/" + kids[0])
			require.NoError(t, err)
			values, _, err := admin.Children("/simba-value/" + mutex)
			require.NoError(t, err)
			require.Len(t, values, 1)
			assert.True(t, strings.HasPrefix(kids[0], values[0]+"-latch-"), "value node %s is named after %s", values[0], kids[0])
			data, st, err := admin.Get("/simba-value/" + mutex + "/" + values[0])
			require.NoError(t, err)
			assert.Equal(t, "10.0.0.7:8080", string(data))
			assert.Equal(t, lock.Czxid, st.Czxid, "made in the same transaction")
			assert.Equal(t, lock.EphemeralOwner, st.EphemeralOwner, "ephemeral, of the contender's session")

			require.NoError(t, lease.Release(t.Context()))
			waitGone(t, admin, "/simba-value/"+mutex+"/"+values[0], 5*time.Second)
		})
	}
}

// A value node that was not made with the owner's node (its czxid another) is no value
// of that tenure: the owner is told without one.
func TestOwnerValueOfAnotherTransaction(t *testing.T) {
	mutex := mutexName(t)
	admin := adminConn(t)
	prefix := zookeeper.NewProtection()
	prefix = prefix[:17] + "8" + prefix[18:] // the UUID's version: a node with a value
	name := strings.TrimSuffix(prefix, "-")
	createIn(t, admin, "/simba-value/"+mutex+"/"+name, []byte("not this tenure's"), zk.FlagEphemeral)
	createIn(t, admin, "/simba/"+mutex+"/"+prefix+"latch-", []byte("a"), zk.FlagEphemeralSequential)
	for name, opts := range map[string][]zookeeper.Option{"queue": nil, "per node": {perNode}} {
		o, err := simba.Lookup(t.Context(), newBackend(t, opts...), mutex)
		require.NoError(t, err, name)
		assert.Equal(t, "a", o.ID, name)
		assert.Empty(t, o.Value, name)
	}
}

// A Locker cycle with a value: the multi that makes both nodes, a read of the value node
// for the token (ZooKeeper 3.8 answers no Stat inside a multi) in the same round trip,
// and the two deletes.
// The server reaps the containers once empty (the test server every 100ms): the test
// keeps them, as keepMutexNode does.
func TestLockerCycleRequestsWithValue(t *testing.T) {
	mutex := mutexName(t)
	keepMutexNode(t, mutex)
	createIn(t, adminConn(t), "/simba-value/"+mutex+"/keep", nil, zk.FlagEphemeral)
	count := newRequestCount()
	l, err := simba.NewLocker(spied(t, count.seen), mutex, simba.WithOwnerValue("v"))
	require.NoError(t, err)
	cycle := func() {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		require.NoError(t, lease.Release(t.Context()))
	}
	cycle()
	count.take()
	const cycles = 10
	for range cycles {
		cycle()
	}
	assert.Equal(t, map[int32]int{opMulti: cycles, opGetData: cycles, opDelete: 2 * cycles}, count.take())
}

// When the server has reaped /simba-value/<mutex> (a container, once empty), a join with
// a value makes it again, and only it: the multi tells that the contender's node's
// parent is there.
func TestValueParentReaped(t *testing.T) {
	mutex := mutexName(t)
	keepMutexNode(t, mutex)
	admin := adminConn(t)
	count := newRequestCount()
	l, err := simba.NewLocker(spied(t, count.seen), mutex, simba.WithOwnerValue("v"))
	require.NoError(t, err)
	cycle := func() {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		require.NoError(t, lease.Release(t.Context()))
	}
	cycle()
	if err := admin.Delete("/simba-value/"+mutex, -1); err != nil {
		require.ErrorIs(t, err, zk.ErrNoNode) // reaped already
	}
	count.take()
	cycle()
	const opCreateContainer = 19
	assert.Equal(t, map[int32]int{opMulti: 2, opGetData: 2, opCreateContainer: 2, opDelete: 2}, count.take())
}
