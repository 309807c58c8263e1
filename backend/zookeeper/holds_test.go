package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// The tests of semaphores and read-write locks beyond the conformance suite: the
// sequences the suite does not force, and the Curator interop (curator_test.go).

// holdBound bounds every wait for a hold's event in these tests.
const holdBound = 10 * time.Second

func newRWMutex(t *testing.T, b simba.Backend, name, id string) *simba.RWMutex {
	t.Helper()
	m, err := simba.NewRWMutex(b, name, simba.WithContenderID(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func newSemaphore(t *testing.T, b simba.Backend, name string, permits int, id string) *simba.Semaphore {
	t.Helper()
	s, err := simba.NewSemaphore(b, name, permits, simba.WithContenderID(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// acquired is what an acquisition in the background returned.
type acquired struct {
	lease *simba.Lease
	err   error
}

// goAcquire runs acquire in the background; a lease it returns is released at the end.
func goAcquire(t *testing.T, acquire func(context.Context) (*simba.Lease, error)) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		l, err := acquire(t.Context())
		out <- acquired{l, err}
	}()
	t.Cleanup(func() {
		select {
		case o := <-out:
			if o.lease != nil {
				_ = o.lease.Release(context.Background())
			}
		default:
		}
	})
	return out
}

// writeLock is m.Lock as an acquisition of a *simba.Lease.
func writeLock(m *simba.RWMutex) func(context.Context) (*simba.Lease, error) {
	return func(ctx context.Context) (*simba.Lease, error) {
		w, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return w.Lease, nil
	}
}

// await returns what an acquisition in the background returned, failing the test if
// nothing comes within holdBound.
func await(t *testing.T, ch <-chan acquired, what string) *simba.Lease {
	t.Helper()
	select {
	case o := <-ch:
		require.NoError(t, o.err, what)
		return o.lease
	case <-time.After(holdBound):
		t.Fatalf("%s: not acquired within %v", what, holdBound)
		return nil
	}
}

// heldAndAwaited gives "h" the only permit of semaphore name and starts an acquisition by
// id on b, which it returns once id's lease node waits beyond the count.
func heldAndAwaited(t *testing.T, name string, b simba.Backend, id string) (*simba.Lease, <-chan acquired) {
	t.Helper()
	h, err := newSemaphore(t, newBackend(t), name, 1, "h").Acquire(t.Context())
	require.NoError(t, err)
	w := goAcquire(t, newSemaphore(t, b, name, 1, id).Acquire)
	admin := adminConn(t)
	eventually(t, holdBound, id+"'s lease node", func() bool {
		return len(children(t, admin, zookeeper.SemaphorePath(name)+"/leases")) == 2
	})
	return h, w
}

// CURATOR-621: a writer that downgrades reads beside its write hold; a second writer,
// which waited behind the first, must not be admitted once the write hold is given back
// while the downgraded reader holds. The second writer is seen deciding: after the first
// writer's node is gone it looks again, and then watches the reader's node.
func TestRWDowngradeKeepsWaitingWriterOut(t *testing.T) {
	name := mutexName(t)
	parent := zookeeper.RWMutexPath(name)
	admin := adminConn(t)
	b1, b2 := newBackend(t), newBackend(t)
	m1, m2 := newRWMutex(t, b1, name, "w1"), newRWMutex(t, b2, name, "w2")
	w1, err := m1.Lock(t.Context())
	require.NoError(t, err)
	w1Node := nodeOf(t, admin, parent, "w1/w#0")
	w2 := goAcquire(t, writeLock(m2))
	eventually(t, holdBound, "the second writer's node", func() bool { return nodeOf(t, admin, parent, "w2/w#0") != "" })

	d, err := w1.Downgrade(t.Context())
	require.NoError(t, err)
	waitGone(t, admin, w1Node, holdBound)
	dNode := nodeOf(t, admin, parent, "w1/r#0")
	require.NotEmpty(t, dNode)
	deadline := time.After(holdBound)
	for !slices.Contains(watchedBy(t, zookeeper.SessionID(b2.Backend)), dNode) {
		select {
		case o := <-w2:
			if o.lease != nil {
				_ = o.lease.Release(context.Background())
			}
			t.Fatalf("the second writer was admitted beside the downgraded reader (err %v)", o.err)
		case <-deadline:
			t.Fatalf("the second writer watches %v after %v, want the downgraded reader's node %s",
				watchedBy(t, zookeeper.SessionID(b2.Backend)), holdBound, dNode)
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.NoError(t, d.Release(t.Context()))
	l2 := await(t, w2, "the second writer, once the reader left")
	assert.Greater(t, l2.Token(), d.Token())
	require.NoError(t, l2.Release(t.Context()))
}

// A writer whose session expires gives the lock up: the reader waiting behind it reads,
// with a greater token, and the writer stops believing.
func TestRWWriterSessionExpiryLetsReaderIn(t *testing.T) {
	name := mutexName(t)
	admin := adminConn(t)
	na := &network{}
	w := newRWMutex(t, newBackendAt(t, server, time.Second, na), name, "w")
	wl, err := w.Lock(t.Context())
	require.NoError(t, err)
	r := goAcquire(t, newRWMutex(t, newBackend(t), name, "r").RLock)
	eventually(t, holdBound, "the reader's node", func() bool {
		return len(children(t, admin, zookeeper.RWMutexPath(name))) == 2
	})
	na.cut(true)
	select {
	case <-wl.Done():
	case <-time.After(holdBound):
		t.Fatalf("the writer still believes %v after its connection was cut", holdBound)
	}
	l := await(t, r, "the reader, once the writer's session expired")
	assert.Greater(t, l.Token(), wl.Token())
	require.NoError(t, l.Release(t.Context()))
}

// A semaphore waiter whose session expires while it owns the guard, its lease node
// beyond the count, keeps no one waiting: the waiter behind it gets the permit once the
// holder gives it back.
func TestSemaphoreWaiterSessionExpiryLetsNextIn(t *testing.T) {
	name := mutexName(t)
	admin := adminConn(t)
	locks, leases := zookeeper.SemaphorePath(name)+"/locks", zookeeper.SemaphorePath(name)+"/leases"
	na := &network{}
	h, dead := heldAndAwaited(t, name, newBackendAt(t, server, time.Second, na), "dead")
	next := goAcquire(t, newSemaphore(t, newBackend(t), name, 1, "next").Acquire)
	eventually(t, holdBound, "the second waiter's guard node", func() bool { return len(children(t, admin, locks)) == 2 })
	na.cut(true)
	eventually(t, holdBound, "the expired waiter's nodes to go", func() bool {
		return nodeOf(t, admin, leases, "dead#0") == "" && nodeOf(t, admin, locks, "dead#0") == ""
	})
	require.NoError(t, h.Release(t.Context()))
	l := await(t, next, "the live waiter")
	assert.Greater(t, l.Token(), h.Token())
	require.NoError(t, l.Release(t.Context()))
	select {
	case o := <-dead:
		t.Fatalf("the waiter whose session expired returned (err %v)", o.err)
	default:
	}
}

// A participant that gives another permit count than the holders' is refused at once,
// also when it joins behind a waiter that owns the guard, and leaves nothing behind that
// holds the others back.
func TestSemaphoreCountRefusedBehindWaiter(t *testing.T) {
	name := mutexName(t)
	a, w := heldAndAwaited(t, name, newBackend(t), "waiter")
	ctx, cancel := context.WithTimeout(t.Context(), holdBound)
	defer cancel()
	_, err := newSemaphore(t, newBackend(t), name, 2, "two").Acquire(ctx)
	require.ErrorIs(t, err, simba.ErrRefused)
	require.NoError(t, ctx.Err(), "refused by its deadline, not at once")

	require.NoError(t, a.Release(t.Context()))
	lw := await(t, w, "the waiter")
	next := goAcquire(t, newSemaphore(t, newBackend(t), name, 1, "next").Acquire)
	require.NoError(t, lw.Release(t.Context()))
	require.NoError(t, await(t, next, "the next one, after the refused participant").Release(t.Context()))
}

// A hold whose create lost its reply (the node made, the connection broken before the
// answer) is acquired all the same, and leaves no node behind once released: the node of
// the lost create is deleted by the backend.
func TestHoldLostCreateReplyLeavesNothing(t *testing.T) {
	srv := slowServer(t)
	admin := adminConnAt(t, srv)
	base := mutexName(t)
	for i, tc := range []struct {
		what, marker string
		semaphore    bool
	}{{"a semaphore's guard node", "lock-", true}, {"a lease node", "lease-", true}, {"a writer's node", "__WRIT__", false}} {
		name := fmt.Sprintf("%s-%d", base, i)
		dirs := []string{zookeeper.RWMutexPath(name)}
		if tc.semaphore {
			dirs = []string{zookeeper.SemaphorePath(name) + "/locks", zookeeper.SemaphorePath(name) + "/leases"}
		}
		for _, d := range dirs { // so that the first create is the one whose reply is lost
			for i := 1; i <= len(d); i++ {
				if i == len(d) || d[i] == '/' {
					_, err := admin.CreateContainer(d[:i], nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
					if !errors.Is(err, zk.ErrNodeExists) {
						require.NoError(t, err)
					}
				}
			}
		}
		nodes := func() (out []string) {
			for _, d := range dirs {
				kids, _, _ := admin.Children(d)
				out = append(out, kids...)
			}
			return out
		}
		var armed atomic.Bool
		armed.Store(true)
		var faults atomic.Int32
		n := &network{}
		n.wrap = func(c net.Conn) net.Conn {
			return &lossy{Conn: c, marker: tc.marker, armed: &armed, fired: &faults, created: func(prefix string) bool {
				return slices.ContainsFunc(nodes(), func(k string) bool { return strings.HasPrefix(k, prefix) })
			}}
		}
		b := newBackendAt(t, srv, 4*time.Second, n)
		var l *simba.Lease
		var err error
		if tc.semaphore {
			l, err = newSemaphore(t, b, name, 1, "a").Acquire(t.Context())
		} else {
			l, err = writeLock(newRWMutex(t, b, name, "a"))(t.Context())
		}
		require.NoError(t, err, tc.what)
		require.EqualValues(t, 1, faults.Load(), "%s: the create's reply was not lost", tc.what)
		eventually(t, holdBound, tc.what+": the holder's node alone", func() bool { return len(nodes()) == 1 })
		require.NoError(t, l.Release(t.Context()))
		eventually(t, holdBound, tc.what+": no node after the release", func() bool { return len(nodes()) == 0 })
	}
}

// A single attempt that finds the lock or the permits taken is told a holder.
func TestTryAcquireNamesAHolder(t *testing.T) {
	name := mutexName(t)
	w, err := newRWMutex(t, newBackend(t), name, "w").Lock(t.Context())
	require.NoError(t, err)
	_, err = newRWMutex(t, newBackend(t), name, "r").TryRLock(t.Context())
	require.ErrorIs(t, err, simba.ErrHeld)
	assert.ErrorContains(t, err, `held by "w/w#0"`)
	require.NoError(t, w.Release(t.Context()))

	p, err := newSemaphore(t, newBackend(t), name, 1, "p").Acquire(t.Context())
	require.NoError(t, err)
	_, err = newSemaphore(t, newBackend(t), name, 1, "q").TryAcquire(t.Context())
	require.ErrorIs(t, err, simba.ErrHeld)
	assert.ErrorContains(t, err, `held by "p#0"`)
	require.NoError(t, p.Release(t.Context()))
}

// A semaphore waiter whose guard node is deleted (by hand) while its lease node waits
// beyond the count gives the lease up and joins again: left in place, its lease and that
// of the next guard owner would both wait for the count to fall, and never be admitted.
func TestSemaphoreWaiterWithoutGuardGivesLeaseUp(t *testing.T) {
	name := mutexName(t)
	admin := adminConn(t)
	locks, leases := zookeeper.SemaphorePath(name)+"/locks", zookeeper.SemaphorePath(name)+"/leases"
	h, w := heldAndAwaited(t, name, newBackend(t), "w")
	guard := nodeOf(t, admin, locks, "w#0")
	require.NotEmpty(t, guard)
	require.NoError(t, admin.Delete(guard, -1))
	x := goAcquire(t, newSemaphore(t, newBackend(t), name, 1, "x").Acquire)
	// Whoever takes the guard next: x, whose lease node then waits beside w's, or w, which
	// gave its lease up and joined again with a new guard node, before x's.
	eventually(t, holdBound, "the next guard owner", func() bool {
		return nodeOf(t, admin, leases, "x#0") != "" || nodeOf(t, admin, locks, "w#0") != ""
	})
	require.NoError(t, h.Release(t.Context()))
	select {
	case o := <-w:
		require.NoError(t, o.err)
		require.NoError(t, o.lease.Release(t.Context()))
		require.NoError(t, await(t, x, "the other waiter").Release(t.Context()))
	case o := <-x:
		require.NoError(t, o.err)
		require.NoError(t, o.lease.Release(t.Context()))
		require.NoError(t, await(t, w, "the other waiter").Release(t.Context()))
	case <-time.After(holdBound):
		t.Fatalf("no waiter admitted %v after the holder left; leases %v", holdBound, children(t, admin, leases))
	}
}
