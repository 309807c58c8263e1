package zookeeper_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/zkdial"
)

// callback is one OnAcquired or OnReleased.
type callback struct {
	acquired bool
	owner    simba.Owner     // After for OnAcquired, Before for OnReleased
	ctx      context.Context // OnAcquired's tenure context
}

// recorder is a contender that records its callbacks.
type recorder struct {
	id     string
	events chan callback
}

func newRecorder(id string) *recorder {
	return &recorder{id: id, events: make(chan callback, 64)}
}

func (r *recorder) contender(mutex string) simba.ContenderFuncs {
	return simba.ContenderFuncs{
		MutexName: mutex,
		ID:        r.id,
		Acquired: func(ctx context.Context, s simba.State) {
			r.events <- callback{acquired: true, owner: s.After, ctx: ctx}
		},
		Released: func(s simba.State) { r.events <- callback{owner: s.Before} },
	}
}

// next waits for r's next callback, which must be OnAcquired when acquired is true.
func (r *recorder) next(t *testing.T, acquired bool, within time.Duration) callback {
	t.Helper()
	select {
	case cb := <-r.events:
		if cb.acquired != acquired {
			t.Fatalf("%s: got OnAcquired=%v (%v), want OnAcquired=%v", r.id, cb.acquired, cb.owner, acquired)
		}
		return cb
	case <-time.After(within):
		t.Fatalf("%s: no callback (OnAcquired=%v) within %v", r.id, acquired, within)
		return callback{}
	}
}

// silent checks that r has had no callback.
func (r *recorder) silent(t *testing.T) {
	t.Helper()
	select {
	case cb := <-r.events:
		t.Fatalf("%s: unexpected callback OnAcquired=%v (%v)", r.id, cb.acquired, cb.owner)
	default:
	}
}

// start starts a service for r on b, closed when the test ends.
func start(t *testing.T, b simba.Backend, r *recorder, mutex string) *simba.Service {
	t.Helper()
	s, err := simba.NewService(b, r.contender(mutex), simba.WithLogger(testLogger(t)))
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mutexName returns a mutex name no other test or run uses.
func mutexName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t-" + regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-") + "-" + hex.EncodeToString(b[:])
}

// nodeOf returns the node under parent whose data is id, or "".
func nodeOf(t *testing.T, admin *zk.Conn, parent, id string) string {
	t.Helper()
	return nodeOfB(t, admin, parent, id)
}

func nodeOfB(t testing.TB, admin *zk.Conn, parent, id string) string {
	t.Helper()
	kids, _, err := admin.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return ""
	}
	require.NoError(t, err)
	for _, k := range kids {
		data, _, err := admin.Get(parent + "/" + k)
		if err == nil && string(data) == id {
			return parent + "/" + k
		}
	}
	return ""
}

// eventually waits until cond holds, checking it every 20ms, or fails after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits until path does not exist, on its deletion event.
func waitGone(t *testing.T, admin *zk.Conn, path string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		ok, _, ch, err := admin.ExistsW(path)
		require.NoError(t, err)
		if !ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s still exists after %v", path, within)
		}
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// Scenario 21a of the fault plan: the server stops and comes back within the session timeout.
// The owner stops believing at once (OnReleased, tenure context cancelled); when the
// session survives, the same node owns again with the same token (a new OnAcquired), and
// the other contender never acquired meanwhile.
func TestServerRestartWithinSessionTimeout(t *testing.T) {
	srv := slowServer(t)
	const timeout = 4 * time.Second
	mutex := mutexName(t)
	ba := newBackendAt(t, srv, timeout, &network{})
	bb := newBackendAt(t, srv, timeout, &network{})
	ra, rb := newRecorder("a"), newRecorder("b")
	sa := start(t, ba, ra, mutex)
	first := ra.next(t, true, 5*time.Second)
	start(t, bb, rb, mutex)
	assert.Equal(t, timeout, ba.SessionTimeout())
	session := zookeeper.SessionID(ba.Backend)

	require.NoError(t, srv.Kill())
	lost := ra.next(t, false, timeout)
	assert.True(t, isDone(first.ctx), "tenure context still live at OnReleased")
	assert.False(t, sa.IsOwner())
	assert.Equal(t, first.owner.Token, lost.owner.Token)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	again := ra.next(t, true, 2*timeout)
	assert.Equal(t, first.owner.Token, again.owner.Token, "the same node owns again with the same token")
	assert.Equal(t, session, zookeeper.SessionID(ba.Backend), "the session survived")
	rb.silent(t)

	require.NoError(t, sa.Stop(t.Context()))
	ra.next(t, false, time.Second)
	next := rb.next(t, true, timeout)
	assert.Greater(t, next.owner.Token, first.owner.Token)
}

// Scenario 21b of the fault plan: the owner is cut off past the session timeout. It stops
// believing at once; its session expires and its node is gone; exactly one other
// contender acquires; when the old owner's connection heals it joins again with a new
// node and does not own until the new owner leaves.
func TestSessionExpiry(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	na := &network{}
	ba := newBackendAt(t, server, time.Second, na) // expires 1s after the cut
	rs := []*recorder{newRecorder("a"), newRecorder("b"), newRecorder("c")}
	start(t, ba, rs[0], mutex)
	first := rs[0].next(t, true, 5*time.Second)
	services := map[string]*simba.Service{}
	for _, r := range rs[1:] {
		services[r.id] = start(t, newBackend(t), r, mutex)
	}
	oldNode := nodeOf(t, admin, parent, "a")
	require.NotEmpty(t, oldNode)

	na.cut(true)
	rs[0].next(t, false, time.Second)
	assert.True(t, isDone(first.ctx))

	// Exactly one successor, once the session has expired.
	var successor *recorder
	var took callback
	select {
	case took = <-rs[1].events:
		successor = rs[1]
	case took = <-rs[2].events:
		successor = rs[2]
	case <-time.After(10 * time.Second):
		t.Fatal("no successor after the owner's session expired")
	}
	require.True(t, took.acquired)
	assert.Greater(t, took.owner.Token, first.owner.Token)
	ok, _, err := admin.Exists(oldNode)
	require.NoError(t, err)
	assert.False(t, ok, "the expired session's node is still there")

	na.heal()
	eventually(t, 10*time.Second, "the old owner to join again", func() bool {
		n := nodeOf(t, admin, parent, "a")
		return n != "" && n != oldNode
	})
	rs[0].silent(t) // it must not own without a new node ahead of the others
	for _, r := range rs[1:] {
		if r != successor {
			r.silent(t)
		}
	}

	// The old owner is now the last in line: it owns only once the others are gone.
	for _, r := range rs[1:] {
		require.NoError(t, services[r.id].Stop(t.Context()))
	}
	successor.next(t, false, time.Second)
	again := rs[0].next(t, true, 5*time.Second)
	assert.Greater(t, again.owner.Token, took.owner.Token)
}

// Scenario 21c of the fault plan: all contenders leave, the container parent is reaped (its sequence numbers
// restart), and the next tenure's token is still larger: tokens are czxids, global zxids.
func TestTokenIncreasesAfterParentReaped(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	l, err := simba.NewLocker(newBackend(t), mutex)
	require.NoError(t, err)
	var last uint64
	for i := range 3 {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		kids, _, err := admin.Children(parent)
		require.NoError(t, err)
		require.Len(t, kids, 1)
		assert.True(t, strings.HasSuffix(kids[0], "-latch-0000000000"), "round %d: %s (the sequence restarts with the parent)", i, kids[0])
		assert.Greater(t, lease.Token(), last, "round %d", i)
		last = lease.Token()
		require.NoError(t, lease.Release(t.Context()))
		waitGone(t, admin, parent, 10*time.Second)
	}
}

// A create whose reply is lost: the request reaches the server and the connection breaks
// before the answer. After reconnecting within the session, the contender finds its node
// by its protection prefix instead of creating a second one.
func TestLostCreateReplyLeavesNoDuplicate(t *testing.T) {
	srv := slowServer(t)
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConnAt(t, srv)
	for _, p := range []string{"/simba", parent} { // so that the first create is the one that fails
		if _, err := admin.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			require.NoError(t, err)
		}
	}
	var armed atomic.Bool
	armed.Store(true)
	var faults atomic.Int32
	var lost atomic.Pointer[string] // the protection prefix of the create whose reply was lost
	n := &network{}
	n.wrap = func(c net.Conn) net.Conn {
		return &lossy{Conn: c, armed: &armed, fired: &faults, created: func(prefix string) bool {
			lost.Store(&prefix)
			kids, _, _ := admin.Children(parent)
			for _, k := range kids {
				if strings.HasPrefix(k, prefix) {
					return true
				}
			}
			return false
		}}
	}
	b := newBackendAt(t, srv, 4*time.Second, n)
	r := newRecorder("a")
	start(t, b, r, mutex)
	r.next(t, true, 10*time.Second)
	require.EqualValues(t, 1, faults.Load(), "the create's reply was not lost")
	kids, _, err := admin.Children(parent)
	require.NoError(t, err)
	require.Len(t, kids, 1, "duplicate nodes: %v", kids)
	assert.True(t, strings.HasPrefix(kids[0], *lost.Load()), "the contender took up the node of the create whose reply was lost: %s", kids[0])
}

// lossy forwards a connection but, once, lets a latch node's create request through and
// then breaks the connection without its reply, after the server has created the node.
// marker, when set, names the nodes instead of "latch-".
type lossy struct {
	net.Conn
	marker    string
	armed     *atomic.Bool
	fired     *atomic.Int32
	created   func(prefix string) bool
	handshake bool
	dropping  atomic.Bool
}

func (l *lossy) Write(p []byte) (int, error) {
	if !l.handshake { // the connect request has no request header
		l.handshake = true
		return l.Conn.Write(p)
	}
	marker := cmp.Or(l.marker, "latch-")
	if len(p) < 16 || !isCreate(binary.BigEndian.Uint32(p[8:12])) || !bytes.Contains(p, []byte("-"+marker)) || !l.armed.CompareAndSwap(true, false) {
		return l.Conn.Write(p)
	}
	prefix := strings.TrimSuffix(requestPath(p), marker)
	prefix = prefix[strings.LastIndex(prefix, "/")+1:]
	l.dropping.Store(true)
	n, err := l.Conn.Write(p)
	for deadline := time.Now().Add(10 * time.Second); !l.created(prefix) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	l.fired.Add(1)
	_ = l.Conn.Close()
	return n, err
}

func (l *lossy) Read(p []byte) (int, error) {
	for {
		n, err := l.Conn.Read(p)
		if err != nil || !l.dropping.Load() {
			return n, err
		}
	}
}

// Stop without a session leaves the node to the backend, which deletes it as soon as the
// session is back (here: resumed, so the node would otherwise stay).
func TestStopWithoutSessionDeletesNodeWhenBack(t *testing.T) {
	srv := slowServer(t)
	mutex := mutexName(t)
	admin := adminConnAt(t, srv)
	n := &network{}
	b := newBackendAt(t, srv, 4*time.Second, n)
	r := newRecorder("a")
	s := start(t, b, r, mutex)
	r.next(t, true, 5*time.Second)
	node := nodeOf(t, admin, "/simba/"+mutex, "a")
	require.NotEmpty(t, node)
	session := zookeeper.SessionID(b.Backend)

	n.cut(true)
	r.next(t, false, 2*time.Second)
	err := s.Stop(t.Context())
	assert.ErrorIs(t, err, zookeeper.ErrNoSession)
	assert.Equal(t, 1, zookeeper.Orphans(b.Backend))
	ok, _, err := admin.Exists(node)
	require.NoError(t, err)
	require.True(t, ok, "the session is alive, so is its node")

	n.heal()
	waitGone(t, admin, node, 10*time.Second)
	assert.Equal(t, session, zookeeper.SessionID(b.Backend), "the session resumed: the backend deleted the node")
	eventually(t, 5*time.Second, "the orphan list to empty", func() bool { return zookeeper.Orphans(b.Backend) == 0 })
	r.silent(t)
}

// After Stop no node of the contention is left, and once every participant has stopped
// and the parent is reaped, no session watches anything of the mutex.
func TestNothingLeftAfterStop(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	rs := []*recorder{newRecorder("a"), newRecorder("b"), newRecorder("c")}
	var services []*simba.Service
	for _, r := range rs {
		services = append(services, start(t, newBackend(t), r, mutex))
	}
	rs[0].next(t, true, 5*time.Second)
	var mu sync.Mutex
	var seen []simba.State
	ret, err := simba.NewRetrievalService(newBackend(t), simba.RetrieverFunc{MutexName: mutex, Notify: func(s simba.State) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}})
	require.NoError(t, err)
	require.NoError(t, ret.Start(t.Context()))
	t.Cleanup(func() { _ = ret.Close() })
	assert.Equal(t, "a", ret.Owner().ID)
	assert.Equal(t, "a", services[2].Owner().ID, "a non-owner knows the owner")

	// A waiter leaves while the owner stays: its node is gone at once.
	require.NoError(t, services[2].Stop(t.Context()))
	assert.Empty(t, nodeOf(t, admin, parent, "c"))
	kids, _, err := admin.Children(parent)
	require.NoError(t, err)
	assert.Len(t, kids, 2)

	require.NoError(t, services[0].Stop(t.Context()))
	rs[0].next(t, false, time.Second)
	rs[1].next(t, true, 5*time.Second)
	eventually(t, 5*time.Second, "the retriever to see b", func() bool { return ret.Owner().ID == "b" })
	require.NoError(t, services[1].Stop(t.Context()))
	require.NoError(t, ret.Stop(t.Context()))
	kids, _, err = admin.Children(parent)
	if !errors.Is(err, zk.ErrNoNode) {
		require.NoError(t, err)
		assert.Empty(t, kids)
	}
	waitGone(t, admin, parent, 10*time.Second)
	// (The admin's own ExistsW in waitGone leaves a watch on the missing parent.)
	eventually(t, 5*time.Second, "no watches on the mutex", func() bool { return len(watchedPaths(t, parent, admin.SessionID())) == 0 })
	mu.Lock()
	defer mu.Unlock()
	var ids []string
	for _, st := range seen {
		ids = append(ids, st.After.ID)
	}
	assert.Subset(t, ids, []string{"a", "b"}, "the retriever saw every owner")
}

// JVM Simba's nodes (Curator's LeaderLatch with protection) are contenders too: a node
// made by hand in that format owns the mutex before ours; every participant knows its ID
// and token; when it goes, ours owns. Our nodes have the same format.
func TestSharesTheCuratorFormat(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	jvm := createIn(t, admin, parent+"/_c_5f0b3f3c-1d6f-4c4e-9d0e-2c6a3e6b4b5a-latch-", []byte("jvm-1"), zk.FlagEphemeralSequential)
	_, jvmStat, err := admin.Get(jvm)
	require.NoError(t, err)
	_, err = admin.Create(parent+"/stray", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)) // no contender
	require.NoError(t, err)

	r := newRecorder("go-1")
	s := start(t, newBackend(t), r, mutex)
	ret, err := simba.NewRetrievalService(newBackend(t), simba.RetrieverFunc{MutexName: mutex})
	require.NoError(t, err)
	require.NoError(t, ret.Start(t.Context()))
	t.Cleanup(func() { _ = ret.Close() })
	for _, o := range []simba.Owner{s.Owner(), ret.Owner()} {
		assert.Equal(t, "jvm-1", o.ID)
		assert.Equal(t, uint64(jvmStat.Czxid), o.Token)
		assert.True(t, o.HasOwner(time.Now()))
	}
	r.silent(t)

	node := nodeOf(t, admin, parent, "go-1")
	assert.Regexp(t, `^/simba/`+mutex+`/_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-latch-\d{10}$`, node)
	_, st, err := admin.Get(node)
	require.NoError(t, err)
	assert.NotZero(t, st.EphemeralOwner, "an ephemeral node")

	require.NoError(t, admin.Delete(jvm, -1))
	got := r.next(t, true, 5*time.Second)
	assert.Equal(t, uint64(st.Czxid), got.owner.Token)
	assert.Equal(t, "go-1", s.Owner().ID)
	eventually(t, 5*time.Second, "the retriever to see the new owner", func() bool { return ret.Owner().ID == "go-1" })
	assert.Equal(t, got.owner.Token, ret.Owner().Token)
}

// Without a session, Start fails within its call timeout; the error says why.
func TestStartWithoutSession(t *testing.T) {
	needServer(t)
	n := &network{refuse: true}
	b := newBackendOn(t, n)
	s, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutexName(t), ID: "a"}, simba.WithTTL(time.Second))
	require.NoError(t, err)
	began := time.Now()
	err = s.Start(t.Context())
	assert.ErrorIs(t, err, zookeeper.ErrNoSession)
	assert.ErrorIs(t, err, simba.ErrTimeout, "cut off by the call timeout")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context had not ended")
	assert.Less(t, time.Since(began), 5*time.Second)
	assert.Equal(t, simba.StatusInitial, s.Status())

	// A Connect that forgets the callback: the error points at it.
	pointsAtCallback := func(connect zookeeper.Connect) {
		t.Helper()
		forgot, err := zookeeper.New(connect)
		require.NoError(t, err)
		t.Cleanup(func() { _ = forgot.Close() })
		s, err := simba.NewService(forgot, simba.ContenderFuncs{MutexName: mutexName(t), ID: "a"}, simba.WithTTL(time.Second))
		require.NoError(t, err)
		err = s.Start(t.Context())
		assert.ErrorIs(t, err, zookeeper.ErrNoSession)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WithEventCallback")
	}
	pointsAtCallback(func(zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{server.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(zkdial.Dial))
	})
	// The same, with a session that was up before New saw the connection (a fast server,
	// or New's goroutine descheduled after Connect): with no event ever reported, the
	// backend cannot hear its watches, and still does not take the session for usable.
	pointsAtCallback(func(zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		conn, events, err := zk.Connect([]string{server.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(zkdial.Dial))
		if err != nil {
			return nil, nil, err
		}
		for conn.State() != zk.StateHasSession {
			select {
			case <-events:
			case <-time.After(5 * time.Second):
				conn.Close()
				return nil, nil, errors.New("no session within 5s")
			}
		}
		return conn, nil, nil
	})
}

// Close ends the session: an owner stops believing, and StartContend fails afterwards.
func TestCloseEndsOwnership(t *testing.T) {
	mutex := mutexName(t)
	b := newBackend(t)
	r := newRecorder("a")
	s := start(t, b, r, mutex)
	acq := r.next(t, true, 5*time.Second)
	other := newRecorder("b")
	start(t, newBackend(t), other, mutex)
	require.NoError(t, b.Close())
	r.next(t, false, time.Second)
	assert.True(t, isDone(acq.ctx))
	got := other.next(t, true, 5*time.Second) // the session ended: no need to wait for its timeout
	assert.Greater(t, got.owner.Token, acq.owner.Token)
	assert.NoError(t, s.Stop(t.Context()))
	err := s.Start(t.Context())
	assert.ErrorIs(t, err, simba.ErrClosed)
	require.NoError(t, b.Close(), "Close twice")
}

// The backend reports the session timeout the server granted, not the one requested.
func TestNegotiatedSessionTimeout(t *testing.T) {
	needServer(t)
	b := newBackendAt(t, server, time.Minute, &network{})
	_, err := simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: mutexName(t)})
	require.NoError(t, err)
	eventually(t, 5*time.Second, "a session", func() bool { return b.SessionTimeout() != 0 })
	assert.Equal(t, 2*time.Second, b.SessionTimeout(), "tickTime 100ms allows at most 20 ticks")
}

// The Scheduler runs work while it leads and Stop waits for the work to return. (The
// conformance check scheduler_stop_waits can miss the first run on this backend: see
// the report on tck/checks.go.)
func TestSchedulerStopWaitsForWork(t *testing.T) {
	started := make(chan struct{}, 1)
	var returned atomic.Bool
	work := func(ctx context.Context, _ simba.Owner) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		returned.Store(true)
	}
	s, err := simba.NewScheduler(newBackend(t), mutexName(t), simba.Schedule{Period: time.Hour}, work)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Start(t.Context()))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("scheduled work never started")
	}
	require.NoError(t, s.Stop(t.Context()))
	assert.True(t, returned.Load(), "Stop returned before the work did")
}

// The server restarts, and its clients come back only after the restarted server has
// expired their sessions (a restart that took about the session timeout, as under load):
// every contender gets a new session and someone owns the mutex again.
func TestServerRestartThatOutlastsTheSessions(t *testing.T) {
	srv := slowServer(t)
	const timeout = 2 * time.Second
	mutex := mutexName(t)
	na, nb := &network{}, &network{}
	ba := newBackendAt(t, srv, timeout, na)
	bb := newBackendAt(t, srv, timeout, nb)
	ra, rb := newRecorder("a"), newRecorder("b")
	start(t, ba, ra, mutex)
	ra.next(t, true, 5*time.Second)
	start(t, bb, rb, mutex)

	na.cut(true)
	nb.cut(true)
	require.NoError(t, srv.Kill())
	ra.next(t, false, timeout)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	time.Sleep(2 * timeout) // the restarted server expires the sessions nobody renews
	na.heal()
	nb.heal()
	deadline := time.After(4 * timeout)
	for {
		select {
		case cb := <-ra.events:
			if cb.acquired {
				return
			}
		case cb := <-rb.events:
			if cb.acquired {
				return
			}
		case <-deadline:
			t.Fatalf("nobody owns the mutex %v after the clients came back to the restarted server", 4*timeout)
		}
	}
}
