package zookeeper_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// Watching per node, a Locker's waiter watches only the node before its own, so a change
// of owner wakes one waiter, not all of them; a service's waiter also watches the owner's
// node, to know the owner at once.
func TestLockerWaiterWatchesOnlyItsPredecessor(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	ctx := t.Context()
	locker := func(id string) (*simba.Locker, func() int64) {
		b := newBackend(t, perNode)
		l, err := simba.NewLocker(b, mutex, simba.WithContenderID(id))
		require.NoError(t, err)
		return l, func() int64 { return zookeeper.SessionID(b.Backend) }
	}
	holder, _ := locker("holder")
	held, err := holder.Acquire(ctx)
	require.NoError(t, err)
	done := make(chan *simba.Lease, 2)
	wait := func(l *simba.Locker) {
		go func() {
			lease, err := l.Acquire(ctx)
			assert.NoError(t, err)
			done <- lease
		}()
	}
	second, _ := locker("second")
	wait(second)
	var secondNode string
	eventually(t, 10*time.Second, "the second locker's node", func() bool {
		secondNode = nodeOf(t, admin, parent, "second")
		return secondNode != ""
	})
	third, thirdSession := locker("third")
	wait(third)
	holderNode := nodeOf(t, admin, parent, "holder")
	eventually(t, 10*time.Second, "the third locker to watch the second's node", func() bool {
		return slices.Contains(watchedBy(t, thirdSession()), secondNode)
	})
	assert.NotContains(t, watchedBy(t, thirdSession()), holderNode, "a Locker's waiter does not watch the owner")

	sb := newBackend(t, perNode)
	svc, err := simba.NewService(sb, simba.ContenderFuncs{MutexName: mutex, ID: "service"})
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx))
	defer svc.Close()
	var thirdNode string
	eventually(t, 10*time.Second, "the service to watch the third's node and the owner's", func() bool {
		thirdNode = nodeOf(t, admin, parent, "third")
		w := watchedBy(t, zookeeper.SessionID(sb.Backend))
		return thirdNode != "" && slices.Contains(w, thirdNode) && slices.Contains(w, holderNode)
	})
	assert.Equal(t, "holder", svc.Owner().ID)

	require.NoError(t, held.Release(ctx))
	var lease *simba.Lease
	select {
	case lease = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter acquired")
	}
	eventually(t, 10*time.Second, "the service to see the new owner", func() bool { return svc.Owner().ID == "second" })
	require.NoError(t, lease.Release(ctx))
	select {
	case lease = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the third locker did not acquire")
	}
	require.NoError(t, lease.Release(ctx))
	require.NoError(t, svc.Stop(ctx))
}

// Watching per node, a waiter lists the queue [A, B, C] and B leaves before C's read of B
// reaches the server.
// C used to ask whether B existed, with a watch: on a missing node, ZooKeeper sets a
// watch for its creation, which never comes for a sequential node's name, so C's session
// kept it for its whole life, one more at every such race (18 to 33 left after 8 services
// started and stopped 40 times each; adversarial review, stop 32). C now reads B's node,
// which sets no watch when the node is gone.
func TestNoWatchLeftOnAVanishedPredecessor(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	ra, rb, rc := newRecorder("a"), newRecorder("b"), newRecorder("c")
	sa := start(t, newBackend(t, perNode), ra, mutex)
	ra.next(t, true, 5*time.Second)
	sb := start(t, newBackend(t, perNode), rb, mutex)
	nodeB := nodeOf(t, admin, parent, "b")
	require.NotEmpty(t, nodeB)

	var left atomic.Bool
	bc := spied(t, func(op int32, path string) {
		if op == opGetData && path == nodeB && left.CompareAndSwap(false, true) {
			assert.NoError(t, sb.Stop(context.Background())) // between C's list and its read of B
		}
	}, perNode)
	sc := start(t, bc, rc, mutex)
	require.True(t, left.Load())
	require.NoError(t, sa.Stop(t.Context()))
	rc.next(t, true, 5*time.Second)
	require.NoError(t, sc.Stop(t.Context()))
	waitGone(t, admin, parent, 10*time.Second)
	session := zookeeper.SessionID(bc.Backend)
	eventually(t, 5*time.Second, "C's session to watch nothing under the mutex", func() bool {
		for _, p := range watchedBy(t, session) {
			if strings.HasPrefix(p, parent) {
				return false
			}
		}
		return true
	})
}
