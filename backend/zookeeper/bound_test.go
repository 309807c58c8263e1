package zookeeper_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/zookeeper"
)

// TestNodeDeletedBehindTheOwnersBack (issue 15, item 2, on ZooKeeper): the owner's node is
// deleted by hand, another contender owns and leaves, and the old owner owns again: with a
// node of its own, and a token of its own, larger than both tenures before.
func TestNodeDeletedBehindTheOwnersBack(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	ra, rb := newRecorder("a"), newRecorder("b")
	start(t, newBackend(t), ra, mutex)
	first := ra.next(t, true, 5*time.Second)
	sb := start(t, newBackend(t), rb, mutex)

	node := nodeOf(t, admin, parent, "a")
	require.NoError(t, admin.Delete(node, -1))
	lost := ra.next(t, false, 5*time.Second)
	assert.Equal(t, first.owner.Token, lost.owner.Token)
	assert.True(t, isDone(first.ctx))
	other := rb.next(t, true, 5*time.Second)
	assert.Greater(t, other.owner.Token, first.owner.Token)
	require.NoError(t, sb.Stop(t.Context()))
	rb.next(t, false, time.Second)

	again := ra.next(t, true, 5*time.Second)
	assert.NotEqual(t, node, nodeOf(t, admin, parent, "a"), "a node of its own")
	assert.Greater(t, again.owner.Token, other.owner.Token)
}

// dropper passes a connection's bytes through, except that, once armed, it swallows the
// next request of one kind whole: the server never sees it, and the connection stays up.
type dropper struct {
	net.Conn
	op      int32
	armed   *atomic.Bool
	dropped *atomic.Int32
	first   bool // the connect request, which has no request header, has been written
}

func (d *dropper) Write(p []byte) (int, error) {
	if !d.first {
		d.first = true
		return d.Conn.Write(p)
	}
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == d.op && d.armed.CompareAndSwap(true, false) {
		d.dropped.Add(1)
		return len(p), nil
	}
	return d.Conn.Write(p)
}

// ZooKeeper's operation codes of the requests tests swallow or watch.
const (
	opCreate        = 1
	opDelete        = 2
	opExists        = 3
	opGetData       = 4
	opSync          = 9
	opGetChildren2  = 12
	opMulti         = 14
	opCreate2       = 15
	opRemoveWatches = 18
	opAddWatch      = 106
)

// isCreate reports whether op creates a node: a create, or a create2 (which answers the
// node's Stat too; the backend sends it when it watches the mutex's queue whole).
func isCreate(op uint32) bool { return op == opCreate || op == opCreate2 }

// deleteDropping returns a backend whose connection swallows the next delete request once
// armed is set, and the count of those swallowed.
func deleteDropping(t *testing.T) (*testBackend, *atomic.Bool, *atomic.Int32) {
	t.Helper()
	return dropping(t, opDelete)
}

// dropping returns a backend whose connection swallows the next request with operation
// code op once armed is set, and the count of those swallowed.
func dropping(t *testing.T, op int32) (*testBackend, *atomic.Bool, *atomic.Int32) {
	t.Helper()
	var armed atomic.Bool
	var dropped atomic.Int32
	n := &network{wrap: func(c net.Conn) net.Conn {
		return &dropper{Conn: c, op: op, armed: &armed, dropped: &dropped}
	}}
	return newBackendOn(t, n), &armed, &dropped
}

// TestLostDeleteRequest (issue 15, item 10): a Locker's release loses its delete request
// on a connection that stays up; go-zookeeper would wait for its answer for ever. The
// release returns within its call timeout, the node left behind is deleted, and others
// and the same Locker acquire again at once: the leftover node is never taken for "no
// owner" while it holds the head of the queue.
func TestLostDeleteRequest(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	b, armed, dropped := deleteDropping(t)
	l, err := simba.NewLocker(b, mutex, simba.WithTTL(2*time.Second), simba.WithContenderID("x"))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	node := nodeOf(t, admin, parent, "x")
	require.NotEmpty(t, node)

	armed.Store(true)
	began := time.Now()
	err = lease.Release(t.Context())
	t.Logf("release returned after %v: %v", time.Since(began), err)
	require.EqualValues(t, 1, dropped.Load(), "the delete request was not swallowed")
	assert.Less(t, time.Since(began), 2*time.Second, "bounded by the call timeout")

	// The same contender acquires again, soon, with a new node and a larger token.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	again, err := l.Acquire(ctx)
	require.NoError(t, err, "the leftover node kept the mutex")
	assert.Greater(t, again.Token(), lease.Token())
	ok, _, err := admin.Exists(node)
	require.NoError(t, err)
	assert.False(t, ok, "the leftover node is gone")
	require.NoError(t, again.Release(t.Context()))

	// And so does anyone else.
	other, err := simba.NewLocker(newBackend(t), mutex, simba.WithTTL(2*time.Second))
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	next, err := other.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, next.Release(t.Context()))
	assert.Equal(t, 0, zookeeper.Orphans(b.Backend))
}

// TestLostDeleteLeftoverIsCollected (issue 15, item 10): the node a lost delete left
// behind is deleted by the backend even when its contender does not contend again.
func TestLostDeleteLeftoverIsCollected(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	b, armed, dropped := deleteDropping(t)
	l, err := simba.NewLocker(b, mutex, simba.WithTTL(2*time.Second), simba.WithContenderID("x"))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	node := nodeOf(t, admin, parent, "x")
	armed.Store(true)
	_ = lease.Release(t.Context())
	require.EqualValues(t, 1, dropped.Load())
	waitGone(t, admin, node, 10*time.Second)
}

// TestOwnLeftoverNodeIsRemoved (issue 15, item 10): a node of this contender, in this
// backend's session, that no contention of it holds (one that stopped left it behind)
// heads the queue. Watching per node, the contender's next contention deletes it and owns
// the mutex, rather than reporting the owner as unknown while the node holds everyone
// back. (The queue watch reads no owner's node for a Locker: the backend itself deletes
// what its contentions left, TestLostDeleteLeftoverIsCollected, and what a lost create
// made, TestLostCreateLandingLateIsDeleted.)
func TestOwnLeftoverNodeIsRemoved(t *testing.T) {
	mutex := mutexName(t)
	admin := adminConn(t)
	b := newBackend(t, perNode)
	eventually(t, 5*time.Second, "a session", func() bool { return zookeeper.SessionID(b.Backend) != 0 })
	left, err := zookeeper.Leave(b.Backend, mutex, "x")
	require.NoError(t, err)
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("x"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx)
	require.NoError(t, err, "the leftover node kept the mutex")
	ok, _, err := admin.Exists(left)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, lease.Release(t.Context()))
}

// TestOneTenureDoesNotJoinAgain: a participant that serves one tenure (a Locker's,
// Participant.WaitsOnly) whose node is deleted behind its back while it owns has lost its
// tenure for good: it must not queue a new node (before, it did, and until its StopContend
// came it was the owner again, seen by everyone: `simba release` of a Locker's mutex
// showed the holder back at once). A long-lived contender's contention joins again, as
// TestNodeDeletedBehindTheOwnersBack shows.
func TestOneTenureDoesNotJoinAgain(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	reports := make(chan backend.Record, 16)
	c, err := newBackend(t).StartContend(t.Context(), backend.Participant{
		Mutex: mutex, ContenderID: "once", TTL: 2 * time.Second, WaitsOnly: true,
		Logger: testLogger(t), Wake: func() {}, Report: func(rec backend.Record, _ time.Time) { reports <- rec },
		Grant: func(backend.Record, time.Time) {},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.StopContend(context.Background())) }()
	select {
	case o := <-reports:
		require.Equal(t, "once", o.Owner, "the only contender owns")
	case <-time.After(5 * time.Second):
		t.Fatal("no owner reported within 5s")
	}

	node := nodeOf(t, admin, parent, "once")
	require.NotEmpty(t, node)
	require.NoError(t, admin.Delete(node, -1))
	select {
	case o := <-reports:
		require.Zero(t, o, "the loss is reported")
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not reported within 5s")
	}
	quiet := time.After(time.Second)
	for {
		kids, _, changed, err := admin.ChildrenW(parent)
		if errors.Is(err, zk.ErrNoNode) {
			break // the empty mutex node was reaped: nobody can have joined under it
		}
		require.NoError(t, err)
		require.Empty(t, zookeeper.Latches(kids), "a node was queued again after the loss")
		select {
		case <-changed:
			continue
		case <-quiet:
		}
		break
	}
	select {
	case o := <-reports:
		t.Fatalf("reported %v after the tenure ended", o)
	default:
	}
}
