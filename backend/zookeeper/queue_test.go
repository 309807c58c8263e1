package zookeeper_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
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

// ZooKeeper's operation codes of the requests a backend sends on its own, whatever its
// contentions do: the heartbeat and go-zookeeper's ping.
const opPing = 11

// requestCount counts the requests backends send, by operation, leaving out heartbeats
// and pings.
type requestCount struct {
	mu  sync.Mutex
	ops map[int32]int
}

func newRequestCount() *requestCount { return &requestCount{ops: make(map[int32]int)} }

func (r *requestCount) seen(op int32, _ string) {
	if op == opSync || op == opPing {
		return
	}
	r.mu.Lock()
	r.ops[op]++
	r.mu.Unlock()
}

// take returns the counts since the last take, and starts again from zero.
func (r *requestCount) take() map[int32]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = make(map[int32]int)
	return ops
}

// keepMutexNode creates the mutex node with a child that is no contender, which keeps
// the server from reaping the mutex node whenever no contender has a node under it: the
// test server reaps empty containers every 100 ms (ZooKeeper's default is a minute), and
// a create under a reaped mutex node fails and makes the parents again.
func keepMutexNode(t *testing.T, mutex string) {
	t.Helper()
	createIn(t, adminConn(t), "/simba/"+mutex+"/keep", nil, zk.FlagEphemeral)
}

// createIn creates node path with data and flags on admin's session, and the containers
// above it as needed, and returns its path. The server reaps an empty container (the test
// server every 100ms), perhaps between two of the creates (a CI run saw it): the chain is
// then made again, up to three times.
func createIn(t *testing.T, admin *zk.Conn, path string, data []byte, flags int32) string {
	t.Helper()
	acl := zk.WorldACL(zk.PermAll)
	for try := 1; ; try++ {
		var err error
		for i := 1; i < len(path) && err == nil; i++ {
			if path[i] == '/' {
				if _, err = admin.CreateContainer(path[:i], nil, zk.FlagContainer, acl); errors.Is(err, zk.ErrNodeExists) {
					err = nil
				}
			}
		}
		var created string
		if err == nil {
			created, err = admin.Create(path, data, flags, acl)
		}
		if !errors.Is(err, zk.ErrNoNode) || try == 3 {
			require.NoError(t, err)
			return created
		}
	}
}

func total(ops map[int32]int) int {
	n := 0
	for _, c := range ops {
		n += c
	}
	return n
}

// An uncontended Acquire + Release costs two requests, two round trips: a create that
// answers the node's czxid (create2) and the delete. Setting the queue watch (addWatch and
// a list) is paid once per session and mutex, by the first cycle. Before the queue
// watch, a cycle was four requests in three round trips: create, list with a read of the
// node (for its czxid and a watch), delete; go-zookeeper's zk.Lock makes three.
func TestLockerCycleRequests(t *testing.T) {
	mutex := mutexName(t)
	keepMutexNode(t, mutex)
	count := newRequestCount()
	b := spied(t, count.seen)
	l, err := simba.NewLocker(b, mutex)
	require.NoError(t, err)
	cycle := func() {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		require.NoError(t, lease.Release(t.Context()))
	}
	cycle()
	first := count.take()
	assert.Equal(t, map[int32]int{opAddWatch: 1, opGetChildren2: 1, opCreate2: 1, opDelete: 1}, first, "the first cycle sets the watch")

	const cycles = 20
	for range cycles {
		cycle()
	}
	ops := count.take()
	assert.Equal(t, map[int32]int{opCreate2: cycles, opDelete: cycles}, ops, "requests of %d cycles", cycles)
}

// Eight Lockers on one mutex, each on a backend (session) of its own, loop acquire and
// release: a critical section costs two requests, the create of the node that queues and
// its delete. The hand-over itself costs none: the next waiter hears the deletion through
// its queue watch and owns. Each backend sets its watch once (addWatch and a list). Before
// the queue watch, a section was six requests: create, list with a read of the node,
// a read of the node before it, a list again when that one went, delete; zk.Lock makes
// five.
func TestContendedSectionRequests(t *testing.T) {
	const clients, sections = 8, 200
	mutex := mutexName(t)
	keepMutexNode(t, mutex)
	var ops map[int32]int
	// A connection lost meanwhile (a machine so loaded that a 2s session went unheard)
	// costs a watch and a list again, and maybe a create: such a run is run again.
	for try := 1; try <= 3; try++ {
		ops = contendedSections(t, mutex, clients, sections)
		t.Logf("requests of %d sections on %d backends: %v", sections, clients, ops)
		if ops[opAddWatch] <= clients {
			break
		}
	}
	assert.Equal(t, sections, ops[opCreate2], "creates")
	assert.Equal(t, sections, ops[opDelete], "deletes")
	assert.Equal(t, clients, ops[opAddWatch], "one watch per backend")
	assert.LessOrEqual(t, total(ops)-ops[opCreate2]-ops[opDelete]-ops[opAddWatch], clients,
		"requests other than the creates, the deletes and the watches: one list per backend at most")
}

// contendedSections runs sections critical sections of Lockers on mutex, each on a new
// backend of its own, and returns the requests the backends sent meanwhile.
func contendedSections(t *testing.T, mutex string, clients, sections int32) map[int32]int {
	count := newRequestCount()
	lockers := make([]*simba.Locker, clients)
	for i := range lockers {
		var err error
		lockers[i], err = simba.NewLocker(spied(t, count.seen), mutex, simba.WithContenderID(fmt.Sprint("c", i)))
		require.NoError(t, err)
	}
	var done atomic.Int32
	var holding atomic.Int32
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Go(func() {
			for done.Add(1) <= sections {
				lease, err := l.Acquire(t.Context())
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int32(1), holding.Add(1), "two holders at once")
				holding.Add(-1)
				assert.NoError(t, lease.Release(t.Context()))
			}
		})
	}
	wg.Wait()
	for _, l := range lockers {
		require.NoError(t, l.Close())
	}
	return count.take()
}

// A queue longer than the limit when the watch is set is watched per node: the watch is
// removed again and the waiter reads and watches nodes as the ZooKeeper recipe does. Once
// a look finds the queue at most half the limit long, the watch is set again.
func TestLongQueueIsWatchedPerNode(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	others := newBackend(t)
	var nodes []string
	for _, id := range []string{"a", "b", "c", "d"} {
		node, err := zookeeper.Leave(others.Backend, mutex, id)
		require.NoError(t, err)
		nodes = append(nodes, node)
	}
	count := newRequestCount()
	b := spied(t, count.seen, zookeeper.WithQueueWatchLimit(2))
	reports := make(chan simba.Owner, 16)
	con, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "w", WaitsOnly: true,
		TTL: time.Second, Wake: func() {}, Report: func(rec backend.Record, _ time.Time) { reports <- simba.Owner{ID: rec.Owner, Token: rec.Token} }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, con.StopContend(context.Background())) }()
	ops := count.take()
	assert.Equal(t, 1, ops[opAddWatch])
	assert.Equal(t, 1, ops[opRemoveWatches], "five nodes are more than the limit: the watch is removed")
	assert.Positive(t, ops[opGetData], "the waiter reads nodes")
	session := zookeeper.SessionID(b.Backend)
	eventually(t, 5*time.Second, "the waiter to watch the node before its own, and not the mutex node", func() bool {
		w := watchedBy(t, session)
		return slices.Contains(w, nodes[3]) && !slices.Contains(w, parent)
	})

	count.take()
	for _, n := range nodes[:3] {
		require.NoError(t, admin.Delete(n, -1)) // the waiter watches d only: nothing to see
	}
	require.NoError(t, admin.Delete(nodes[3], -1))
	select {
	case o := <-reports:
		assert.Equal(t, "w", o.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not own the mutex")
	}
	// The look that found the queue short set nothing yet; a later one sets the watch
	// (this acquisition's, or the owner's own if it looks first), once.
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("next"))
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	_, err = l.TryAcquire(t.Context())
	require.ErrorIs(t, err, simba.ErrNotAcquired)
	assert.Equal(t, 1, count.take()[opAddWatch], "the watch is set again, once")
	assert.Contains(t, watchedBy(t, session), parent)
}

// ZooKeeper keeps a persistent watch for the connection that set it, not for the
// session: after a reconnect within the session the backend sets it again (go-zookeeper
// sets again only the watches it knows), and a hand-over after the reconnect is seen.
func TestQueueWatchSetAgainAfterReconnect(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	count := newRequestCount()
	n := &network{wrap: func(c net.Conn) net.Conn { return &spy{Conn: c, seen: count.seen} }}
	b := newBackendAt(t, slowServer(t), 4*time.Second, n)
	admin := adminConnAt(t, slowServer(t))
	holder, err := zookeeper.Leave(newBackendAt(t, slowServer(t), 4*time.Second, &network{}).Backend, mutex, "holder")
	require.NoError(t, err)
	reports := make(chan simba.Owner, 16)
	con, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "w", WaitsOnly: true,
		TTL: time.Second, Wake: func() {}, Report: func(rec backend.Record, _ time.Time) { reports <- simba.Owner{ID: rec.Owner, Token: rec.Token} }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, con.StopContend(context.Background())) }()
	session := zookeeper.SessionID(b.Backend)
	require.Contains(t, watchedByOn(t, slowServer(t), session), parent)
	assert.Equal(t, 1, count.take()[opAddWatch])

	n.cut(false) // go-zookeeper dials again at once and resumes the session
	eventually(t, 10*time.Second, "the watch to be set again", func() bool {
		return count.take()[opAddWatch] > 0
	})
	require.Equal(t, session, zookeeper.SessionID(b.Backend), "the session was resumed")
	eventually(t, 10*time.Second, "the server to hold the watch again", func() bool {
		return slices.Contains(watchedByOn(t, slowServer(t), session), parent)
	})

	require.NoError(t, admin.Delete(holder, -1))
	for {
		select {
		case o := <-reports:
			if o.ID == "w" {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not see the hand-over after the reconnect")
		}
	}
}

// A node this session may not read is hidden from its queue watch (ZooKeeper sends no
// event of it). Created before the waiter's node, it comes first; the backend sees a
// creation missing from the sequence numbers and watches the mutex per node, so the
// waiter does not own while that node does. Without the check the waiter owned at once,
// beside the hidden node's owner.
func TestHiddenNodeIsNotSkipped(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	require.NoError(t, admin.AddAuth("digest", []byte("admin:secret")))
	keepMutexNode(t, mutex)
	b := newBackend(t)
	// A retriever sets the queue watch before the hidden node is created.
	observer, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, TTL: time.Second,
		Wake: func() {}, Report: func(backend.Record, time.Time) {}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, observer.StopContend(context.Background())) }()
	hidden, err := admin.Create(parent+"/"+zookeeper.NewProtection()+"latch-", []byte("hidden"), zk.FlagEphemeralSequential,
		zk.DigestACL(zk.PermAll, "admin", "secret"))
	require.NoError(t, err)

	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("w"))
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if lease, err := l.Acquire(ctx); err == nil {
		_ = lease.Release(t.Context())
		t.Fatal("acquired while a node hidden from the session came first")
	}
	require.NoError(t, admin.Delete(hidden, -1))
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx)
	require.NoError(t, err, "the hidden node is gone")
	require.NoError(t, lease.Release(t.Context()))
}

// A create that the backend gave up for lost may still reach the server (go-zookeeper
// sends what it was given): its node, in the backend's session, would hold everyone
// back. The queue watch shows it, and the backend deletes it.
func TestLostCreateLandingLateIsDeleted(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	b := newBackend(t)
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("x"))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context()) // the queue is live
	require.NoError(t, err)
	prefix := zookeeper.NewProtection()
	zookeeper.Abandon(b.Backend, mutex, prefix)
	late, err := zookeeper.LeaveWithPrefix(b.Backend, mutex, prefix, "x")
	require.NoError(t, err)
	waitGone(t, admin, late, 10*time.Second)
	require.NoError(t, lease.Release(t.Context()))
	waitGone(t, admin, parent, 10*time.Second)
}

// A session stops hearing a mutex it no longer contends for: a session timeout after the
// last contention of the mutex in the backend stopped, the watch is removed.
func TestIdleQueueWatchIsRemoved(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	b := newBackend(t)
	l, err := simba.NewLocker(b, mutex)
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	session := zookeeper.SessionID(b.Backend)
	require.Contains(t, watchedBy(t, session), parent)
	require.NoError(t, lease.Release(t.Context()))
	eventually(t, 10*time.Second, "the watch to be removed", func() bool {
		return !slices.Contains(watchedBy(t, session), parent)
	})
	lease, err = l.Acquire(t.Context())
	require.NoError(t, err)
	assert.Contains(t, watchedBy(t, session), parent, "set again for the next contention")
	require.NoError(t, lease.Release(t.Context()))
}

// watchedByOn returns the paths that session watches on srv.
func watchedByOn(t testing.TB, srv interface{ Addr() string }, session int64) []string {
	t.Helper()
	return watchedFrom(fourLetterAt(t, srv.Addr(), "wchc"), session)
}

// unknownOp is an operation code no ZooKeeper knows.
const unknownOp = 9999

// preAddWatch makes a connection look, to the backend, like one to a ZooKeeper older
// than 3.6: its addWatch requests reach the server under an operation code the server
// does not know, which it answers as such a server answers addWatch (UNIMPLEMENTED), and
// then closes the connection.
type preAddWatch struct {
	net.Conn
	first bool // the connect request, which has no request header, has been written
}

func (c *preAddWatch) Write(p []byte) (int, error) {
	if c.first && len(p) >= 12 && binary.BigEndian.Uint32(p[8:12]) == opAddWatch {
		p = slices.Clone(p)
		binary.BigEndian.PutUint32(p[8:12], unknownOp)
	}
	c.first = true
	return c.Conn.Write(p)
}

// On a server older than 3.6 (no addWatch) a backend watches per node: Lockers acquire in
// first-come order with growing tokens, and after the one UNIMPLEMENTED answer no
// backend asks for the queue watch again.
func TestServerWithoutAddWatch(t *testing.T) {
	mutex := mutexName(t)
	count := newRequestCount()
	old := func() *testBackend {
		return newBackendOn(t, &network{wrap: func(c net.Conn) net.Conn {
			return &spy{Conn: &preAddWatch{Conn: c}, seen: count.seen}
		}})
	}
	a, err := simba.NewLocker(old(), mutex, simba.WithContenderID("a"))
	require.NoError(t, err)
	w, err := simba.NewLocker(old(), mutex, simba.WithContenderID("w"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	held, err := a.Acquire(ctx)
	require.NoError(t, err)
	acquired := make(chan *simba.Lease, 1)
	go func() {
		lease, err := w.Acquire(ctx)
		assert.NoError(t, err)
		acquired <- lease
	}()
	admin := adminConn(t)
	eventually(t, 10*time.Second, "w to queue behind a", func() bool {
		return nodeOf(t, admin, "/simba/"+mutex, "w") != ""
	})
	select {
	case <-acquired:
		t.Fatal("w acquired while a held the mutex")
	default:
	}
	require.NoError(t, held.Release(ctx))
	var next *simba.Lease
	select {
	case next = <-acquired:
	case <-ctx.Done():
		t.Fatal("w did not acquire after a released")
	}
	require.NotNil(t, next)
	assert.Greater(t, next.Token(), held.Token(), "the token grows")
	require.NoError(t, next.Release(ctx))

	count.take()
	for range 3 {
		lease, err := a.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	ops := count.take()
	assert.Zero(t, ops[opAddWatch], "addWatch asked again")
	assert.Zero(t, ops[opCreate2], "a create2 in a look per node")
	// A create whose connection was lost is sent again (the old server's UNIMPLEMENTED
	// closes the connection, and its reconnection may fall within the cycles).
	assert.GreaterOrEqual(t, ops[opCreate], 3, "creates")
}

// A queue that grows past the limit while watched whole is watched per node from then
// on: every session with the watch would hear every change of a queue that long. The
// waiter still takes its turn.
func TestQueueGrowingPastTheLimitIsWatchedPerNode(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	others := newBackend(t)
	holder, err := zookeeper.Leave(others.Backend, mutex, "a")
	require.NoError(t, err)
	count := newRequestCount()
	b := spied(t, count.seen, zookeeper.WithQueueWatchLimit(2))
	reports := make(chan simba.Owner, 16)
	con, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "w", WaitsOnly: true,
		TTL: time.Second, Wake: func() {}, Report: func(rec backend.Record, _ time.Time) { reports <- simba.Owner{ID: rec.Owner, Token: rec.Token} }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, con.StopContend(context.Background())) }()
	session := zookeeper.SessionID(b.Backend)
	require.Contains(t, watchedBy(t, session), parent, "two nodes: the queue is watched whole")

	for _, id := range []string{"c", "d"} {
		_, err := zookeeper.Leave(others.Backend, mutex, id)
		require.NoError(t, err)
	}
	eventually(t, 5*time.Second, "the queue watch to give way to a watch of the node before the waiter's", func() bool {
		w := watchedBy(t, session)
		return !slices.Contains(w, parent) && slices.Contains(w, holder)
	})
	assert.Equal(t, 1, count.take()[opRemoveWatches])

	require.NoError(t, admin.Delete(holder, -1))
	for {
		select {
		case o := <-reports:
			if o.ID == "w" {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not own the mutex")
		}
	}
}
