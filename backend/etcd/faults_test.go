package etcd_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// tenures records a service's tenures: when each began and ended, with its token.
type tenures struct {
	mu       sync.Mutex
	list     []tenure
	acquired chan struct{} // capacity 1: a tenure began
	released chan struct{} // capacity 1: a tenure ended
}

type tenure struct {
	token      uint64
	begun, end time.Time
}

func newTenures() *tenures {
	return &tenures{acquired: make(chan struct{}, 1), released: make(chan struct{}, 1)}
}

// serve starts a service of id on b for mutex, recording into r; stopped when the test ends.
func (r *tenures) serve(t *testing.T, b simba.Backend, mutex, id string) *simba.Service {
	t.Helper()
	s, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutex, ID: id,
		Acquired: func(ctx context.Context, st simba.State) {
			r.mu.Lock()
			r.list = append(r.list, tenure{token: st.After.Token, begun: time.Now()})
			r.mu.Unlock()
			signal(r.acquired)
			go func() {
				<-ctx.Done() // the tenure context ends as soon as belief does
				r.mu.Lock()
				for i := range r.list {
					if r.list[i].token == st.After.Token && r.list[i].end.IsZero() {
						r.list[i].end = time.Now()
					}
				}
				r.mu.Unlock()
				signal(r.released)
			}()
		}})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (r *tenures) all() []tenure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tenure(nil), r.list...)
}

// last returns the latest tenure.
func (r *tenures) last(t *testing.T) tenure {
	t.Helper()
	l := r.all()
	require.NotEmpty(t, l, "no tenure")
	return l[len(l)-1]
}

// lossBound is how long after its connection is cut an owner may go on believing: the
// lease TTL (its belief ends at the last keep-alive's send time plus that), and slack for
// a busy machine.
const lossBound = testLeaseTTL + 2*time.Second

// An owner whose keep-alive stream is cut stops believing by the lease's TTL from the last
// keep-alive answered, and a successor takes over once the lease expired on the server,
// with a greater token: the two tenures never overlap.
func TestKeepAliveCutEndsBelief(t *testing.T) {
	a, b := newBackend(t), newBackend(t)
	ra, rb := newTenures(), newTenures()
	ra.serve(t, a, "cut", "a")
	await(t, ra.acquired, "a acquires")
	rb.serve(t, b, "cut", "b")
	cut := time.Now()
	a.cut()
	await(t, ra.released, "a stops believing")
	ta := ra.last(t)
	t.Logf("a stopped believing %v after the cut", ta.end.Sub(cut))
	assert.Less(t, ta.end.Sub(cut), lossBound)
	await(t, rb.acquired, "b takes over")
	tb := rb.last(t)
	t.Logf("b took over %v after the cut", tb.begun.Sub(cut))
	assert.True(t, ta.end.Before(tb.begun), "a stopped believing before b began")
	assert.Greater(t, tb.token, ta.token)
	a.heal() // a joins again behind b, with a new lease
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), a, "cut")
		return err == nil && o.ID == "b"
	}, eventBound, 50*time.Millisecond)
}

// A restart of the member keeps its data, the lease among it: an owner whose keep-alives
// resume within the lease's TTL keeps its tenure (the same token); one that does not,
// loses it and owns again with a greater token. Tokens never go back.
func TestMemberRestart(t *testing.T) {
	b := newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	r := newTenures()
	r.serve(t, b, "restart", "owner")
	await(t, r.acquired, "acquires")
	before := r.last(t)
	require.NoError(t, server.Stop())
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, server.Start(ctx))
	t.Logf("etcd was down for %v", time.Since(stopped))
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), b, "restart")
		return err == nil && o.ID == "owner" && o.Token >= before.token
	}, eventBound, 50*time.Millisecond, "the owner owns again")
	after := r.last(t)
	if after.token == before.token {
		assert.True(t, after.end.IsZero(), "same tenure: it never ended")
		t.Log("the tenure survived the restart")
	} else {
		assert.Greater(t, after.token, before.token)
		t.Log("the tenure ended with the restart; a new one began")
	}
}

// A member cut off from the others (here: the others paused) goes on answering its
// clients' reads but renews no lease: an owner connected to it alone stops believing by
// the lease's TTL. Once the cluster is whole again it owns again.
func TestIsolatedMemberEndsBelief(t *testing.T) {
	c := cluster(t)
	b := newBackendAt(t, c.Endpoints()[:1]) // member 0 only
	r := newTenures()
	r.serve(t, b, "isolated", "owner")
	await(t, r.acquired, "acquires")
	before := r.last(t)
	paused := time.Now()
	require.NoError(t, c.Members[1].Pause())
	require.NoError(t, c.Members[2].Pause())
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			assert.NoError(t, c.Members[1].Resume())
			assert.NoError(t, c.Members[2].Resume())
		}
	}
	defer resume()
	await(t, r.released, "the owner stops believing")
	t.Logf("the owner stopped believing %v after its member was isolated", r.last(t).end.Sub(paused))
	// A leader cut off from its quorum renews leases until it steps down, within two
	// election timeouts (1s each here); belief lasts a TTL from the last renewal.
	assert.Less(t, r.last(t).end.Sub(paused), lossBound+2*time.Second)
	resume()
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	require.NoError(t, c.AwaitHealthy(ctx, 0))
	await(t, r.acquired, "owns again")
	assert.GreaterOrEqual(t, r.last(t).token, before.token)
}

// The member an owner is connected to is killed: the owner stops believing by the lease's
// TTL, a contender connected to another member takes over once the lease expired, and the
// restarted member's owner joins again behind it.
func TestMemberKilled(t *testing.T) {
	c := cluster(t)
	a := newBackendAt(t, c.Endpoints()[:1])
	b := newBackendAt(t, c.Endpoints()[1:2])
	ra, rb := newTenures(), newTenures()
	ra.serve(t, a, "killed", "a")
	await(t, ra.acquired, "a acquires")
	rb.serve(t, b, "killed", "b")
	killed := time.Now()
	require.NoError(t, c.Members[0].Kill())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	defer func() { // the cluster is whole again for the next test
		if c.Members[0].PID() == 0 {
			assert.NoError(t, c.Members[0].Start(ctx))
		}
	}()
	await(t, ra.released, "a stops believing")
	await(t, rb.acquired, "b takes over")
	ta, tb := ra.last(t), rb.last(t)
	t.Logf("a stopped believing after %v, b took over after %v", ta.end.Sub(killed), tb.begun.Sub(killed))
	assert.Less(t, ta.end.Sub(killed), lossBound)
	assert.True(t, ta.end.Before(tb.begun), "a stopped believing before b began")
	assert.Greater(t, tb.token, ta.token)
	require.NoError(t, c.Members[0].Start(ctx))
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), a, "killed")
		return err == nil && o.ID == "b"
	}, eventBound, 50*time.Millisecond, "a sees b own once its member is back")
}

// A member without a leader for several election timeouts cancels its clients' watches
// (they ask for a leader), while the lease, with its TTL, outlives the outage: the owner
// keeps its tenure, since only the lease bounds its belief.
func TestLeaderlessMemberKeepsTenureWithinLease(t *testing.T) {
	c := cluster(t)
	b := newBackendAt(t, c.Endpoints()[:1], etcd.WithLeaseTTL(20*time.Second))
	lease, err := newLocker(t, b, "leaderless", "owner").Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, c.Members[1].Pause())
	require.NoError(t, c.Members[2].Pause())
	// etcd cancels a leaderless member's watches after three election timeouts (3s).
	time.Sleep(5 * time.Second)
	require.NoError(t, c.Members[1].Resume())
	require.NoError(t, c.Members[2].Resume())
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	require.NoError(t, c.AwaitHealthy(ctx, 0))
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), b, "leaderless")
		return err == nil && o.ID == "owner"
	}, eventBound, 50*time.Millisecond)
	select {
	case <-lease.Done():
		t.Fatalf("the tenure ended (%v) while its lease lived", context.Cause(lease.Context()))
	default:
	}
	o, err := simba.Lookup(t.Context(), b, "leaderless")
	require.NoError(t, err)
	assert.Equal(t, lease.Token(), o.Token, "the same tenure")
	require.NoError(t, lease.Release(t.Context()))
}

// Connections reset under the owner (the keep-alive stream and the watches with them):
// the client dials again, the backend opens another keep-alive stream and watches again,
// and the owner keeps its tenure while its lease lives.
func TestConnectionResetKeepsTenure(t *testing.T) {
	b := newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	lease, err := newLocker(t, b, "reset", "owner").Acquire(t.Context())
	require.NoError(t, err)
	waiting := acquire(t, newLocker(t, newBackend(t), "reset", "next"))
	for range 3 {
		for _, p := range b.proxies {
			p.Reset()
		}
		time.Sleep(300 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), b, "reset")
		return err == nil && o.ID == "owner" && o.Token == lease.Token()
	}, eventBound, 50*time.Millisecond)
	select {
	case <-lease.Done():
		t.Fatalf("the tenure ended (%v)", context.Cause(lease.Context()))
	default:
	}
	require.NoError(t, lease.Release(t.Context()))
	next := await(t, waiting, "the waiter acquires once the owner released")
	require.NotNil(t, next)
	assert.Greater(t, next.Token(), lease.Token())
	require.NoError(t, next.Release(t.Context()))
}

// The leader is killed while the owner is connected to a follower: a new leader is elected
// and extends every lease, the owner's keep-alives go through it, and the owner keeps its
// tenure and token.
func TestLeaderKilledKeepsTenure(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	follower := (leader + 1) % len(c.Members)
	b := newBackendAt(t, c.Endpoints()[follower:follower+1], etcd.WithLeaseTTL(10*time.Second))
	lease, err := newLocker(t, b, "leader-killed", "owner").Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, c.Members[leader].Kill())
	defer func() { assert.NoError(t, c.Members[leader].Start(ctx)) }()
	require.NoError(t, c.AwaitHealthy(ctx, follower))
	next, err := c.Leader(ctx)
	require.NoError(t, err)
	t.Logf("leader %d killed, %d leads now", leader, next)
	require.Eventually(t, func() bool {
		o, err := simba.Lookup(t.Context(), b, "leader-killed")
		return err == nil && o.ID == "owner" && o.Token == lease.Token()
	}, eventBound, 50*time.Millisecond)
	select {
	case <-lease.Done():
		t.Fatalf("the tenure ended (%v)", context.Cause(lease.Context()))
	default:
	}
	require.NoError(t, lease.Release(t.Context()))
}

// etcd restarted without its data starts its revisions again from 1: keys created now
// would carry tokens lower than those handed out before. The backend notices (the
// revision of a linearizable answer went back), says so at Error level, counts it, and
// holds back: its owner stops believing, and nothing of it owns or starts until etcd's
// revision has passed the highest it saw; then its owner owns again with a greater token.
func TestDataLossHoldsBack(t *testing.T) {
	var logged syncBuffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := newBackend(t, etcd.WithLogger(log), etcd.WithLeaseTTL(10*time.Second))
	admin := newClient(t, server.Addr())
	for i := range 50 { // revisions well above what the emptied store will reach soon
		_, err := admin.Put(t.Context(), fmt.Sprintf("filler/%d", i), "x")
		require.NoError(t, err)
	}
	r := newTenures()
	r.serve(t, b, "wiped", "owner")
	await(t, r.acquired, "acquires")
	before := r.last(t)
	require.NoError(t, server.Stop())
	require.NoError(t, os.RemoveAll(filepath.Join(server.Dir, "data")))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, server.Start(ctx))
	await(t, r.released, "the owner stops believing")
	require.Eventually(t, func() bool { return b.TokenRegressions() > 0 }, eventBound, 10*time.Millisecond,
		"the backend counts the regression")
	assert.Contains(t, logged.String(), "revision went back")

	// Held back: a new service does not start, and says why.
	s, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "wiped-too", ID: "other"})
	require.NoError(t, err)
	err = s.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "revision went back")
	assert.Len(t, r.all(), 1, "nobody owns on a token that went back")

	resp, err := admin.Get(t.Context(), "filler/")
	require.NoError(t, err)
	t.Logf("etcd's revision is %d after the wipe, %d before", resp.Header.Revision, before.token)
	for resp.Header.Revision < int64(before.token) {
		put, err := admin.Put(t.Context(), "filler/raise", "x")
		require.NoError(t, err)
		resp.Header = put.Header
	}
	await(t, r.acquired, "owns again once etcd's revision passed the one it went back from")
	after := r.last(t)
	t.Logf("token %d before, %d after", before.token, after.token)
	assert.Greater(t, after.token, before.token)
	t.Log(logged.String())
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The revision a waiter's watch would resume from is compacted while its connection is
// down: the watch ends with the compaction, the waiter reads the mutex again, and finds
// that its predecessor has gone.
func TestCompactionWhileWaiting(t *testing.T) {
	owner, waiter := newBackend(t), newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	admin := newClient(t, server.Addr())
	lease, err := newLocker(t, owner, "compacted", "owner").Acquire(t.Context())
	require.NoError(t, err)
	waiting := acquire(t, newLocker(t, waiter, "compacted", "waiter"))
	dir := etcd.DefaultPrefix + "compacted/"
	awaitKeys(t, admin, dir, 2)
	require.Eventually(t, func() bool { return len(etcd.Watched(waiter.Backend, "compacted")["waiter"]) == 2 },
		eventBound, 10*time.Millisecond, "the waiter watches")
	waiter.cut()
	require.NoError(t, lease.Release(t.Context())) // the deletion the watch would have seen
	resp, err := admin.Put(t.Context(), "filler/compacted", "x")
	require.NoError(t, err)
	_, err = admin.Compact(t.Context(), resp.Header.Revision)
	require.NoError(t, err)
	waiter.heal()
	got := await(t, waiting, "the waiter acquires")
	require.NotNil(t, got)
	assert.Greater(t, got.Token(), lease.Token())
	require.NoError(t, got.Release(t.Context()))
}
