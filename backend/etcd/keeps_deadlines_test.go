package etcd_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/testserver"
)

// The backend promises to keep its calls' deadlines (backend.DeadlineKeeper): a Locker then
// makes its start-up and release calls on the caller's goroutine.
func TestKeepsDeadlines(t *testing.T) {
	var b simba.Backend = newBackend(t).Backend
	keeper, ok := b.(backend.DeadlineKeeper)
	require.True(t, ok, "the backend does not implement backend.DeadlineKeeper")
	assert.True(t, keeper.KeepsDeadlines())
}

// stallBound is how long a call with a short deadline may take against a stalled member
// before the test says it waited for something else: far beyond the deadline, far below
// the call timeout and the lease.
const stallBound = 10 * time.Second

// shortDeadline is the deadline of the calls made while the member is stalled.
const shortDeadline = 200 * time.Millisecond

// ownMember starts a single member of the test's own, stopped when the test ends.
func ownMember(t *testing.T) *testserver.Server {
	t.Helper()
	needServer(t)
	dir, err := os.MkdirTemp(memoryDir(), "simba-etcd-own-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := startServer(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// withinDeadline runs call with a context that ends after shortDeadline and checks that
// it returns by stallBound with an error.
func withinDeadline(t *testing.T, what string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), shortDeadline)
	defer cancel()
	began := time.Now()
	err := call(ctx)
	took := time.Since(began)
	assert.Error(t, err, "%s answered a stalled member", what)
	assert.Less(t, took, stallBound, "%s did not return by its deadline", what)
}

// Against a member stalled by SIGSTOP (its connections open, nothing answered), every call
// of the backend and of its contentions returns by its context's deadline: the start of a
// contention on a backend with a lease and on one still waiting for its first, the stop,
// the wait list, the hand-off, the slot record, the fence and the owner's release; and
// the start of one against a member that is down.
func TestCallsKeepDeadlineOnAStalledMember(t *testing.T) {
	srv := ownMember(t)
	b := newBackendAt(t, []string{srv.Addr()}, etcd.WithLeaseTTL(10*time.Second))
	fresh := newBackendAt(t, []string{srv.Addr()}, etcd.WithLeaseTTL(10*time.Second)) // no lease yet
	owned := make(chan struct{}, 1)
	p := backend.Participant{
		Mutex: "stalled", ContenderID: "a", TTL: 10 * time.Second, Wake: func() {},
		Report: func(rec backend.Record, _ time.Time) {
			if rec.Owner == "a" {
				signal(owned)
			}
		},
	}
	c, err := b.StartContend(t.Context(), p)
	require.NoError(t, err)
	await(t, owned, "a owns")

	require.NoError(t, srv.Pause())
	t.Cleanup(func() { _ = srv.Resume() })
	q := p
	q.ContenderID = "b"
	withinDeadline(t, "StartContend", func(ctx context.Context) error {
		_, err := b.StartContend(ctx, q)
		return err
	})
	withinDeadline(t, "StartContend before a lease", func(ctx context.Context) error {
		_, err := fresh.StartContend(ctx, q)
		return err
	})
	withinDeadline(t, "OthersWaiting", func(ctx context.Context) error {
		_, err := c.(backend.WaitList).OthersWaiting(ctx)
		return err
	})
	withinDeadline(t, "Waiters", func(ctx context.Context) error {
		_, err := c.(backend.HandOffer).Waiters(ctx)
		return err
	})
	withinDeadline(t, "HandOff", func(ctx context.Context) error {
		return c.(backend.HandOffer).HandOff(ctx, "b")
	})
	withinDeadline(t, "LastSlot", func(ctx context.Context) error {
		_, err := c.(backend.SlotRecorder).LastSlot(ctx)
		return err
	})
	withinDeadline(t, "ClaimSlot", func(ctx context.Context) error {
		_, err := c.(backend.SlotRecorder).ClaimSlot(ctx, backend.Slot{At: time.Now(), Token: 1})
		return err
	})
	withinDeadline(t, "Fence", func(ctx context.Context) error {
		_, err := b.Fence(ctx, "stalled", 1)
		return err
	})
	withinDeadline(t, "ReleaseOwner", func(ctx context.Context) error {
		return b.ReleaseOwner(ctx, "stalled", simba.Owner{ID: "a", Token: 1})
	})
	withinDeadline(t, "StopContend", c.StopContend)
	require.NoError(t, srv.Resume())

	// A member that is down: the client waits for a connection (gRPC's WaitForReady)
	// only as long as the context lasts.
	require.NoError(t, srv.Stop())
	withinDeadline(t, "StartContend on a member down", func(ctx context.Context) error {
		_, err := b.StartContend(ctx, q)
		return err
	})
	withinDeadline(t, "StartContend on a member down, before a lease", func(ctx context.Context) error {
		_, err := fresh.StartContend(ctx, q)
		return err
	})
}

// The Locker's calls are made on the caller's goroutine; against a stalled member
// (SIGSTOP) Acquire and Release still return by their deadline, and what was left undone
// is done once the member answers.
func TestLockerKeepsDeadlineOnAStalledMember(t *testing.T) {
	srv := ownMember(t)
	admin := newClient(t, srv.Addr())
	b := newBackendAt(t, []string{srv.Addr()}, etcd.WithLeaseTTL(10*time.Second))
	fresh := newBackendAt(t, []string{srv.Addr()}, etcd.WithLeaseTTL(10*time.Second)) // no lease yet
	// A call timeout far beyond the callers' deadlines: only the deadline ends their calls.
	opts := []simba.LockerOption{simba.WithTTL(time.Minute), simba.WithCallTimeout(20 * time.Second)}
	l, err := simba.NewLocker(b, "stalled", opts...)
	require.NoError(t, err)
	other, err := simba.NewLocker(b, "stalled", opts...)
	require.NoError(t, err)
	late, err := simba.NewLocker(fresh, "stalled", opts...)
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)

	require.NoError(t, srv.Pause())
	t.Cleanup(func() { _ = srv.Resume() })
	withinDeadline(t, "Release", func(ctx context.Context) error {
		err := lease.Release(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		return err
	})
	for name, lk := range map[string]*simba.Locker{"Acquire": other, "Acquire before a lease": late} {
		withinDeadline(t, name, func(ctx context.Context) error {
			_, err := lk.Acquire(ctx)
			assert.ErrorIs(t, err, simba.ErrNotAcquired)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			return err
		})
	}

	require.NoError(t, srv.Resume())
	for _, lk := range []*simba.Locker{l, other, late} {
		require.NoError(t, lk.Close())
	}
	// The key whose delete the deadline cut short is the backend's to delete, once the
	// member answers its keep-alives again.
	assert.Eventually(t, func() bool {
		resp, err := admin.Get(t.Context(), b.MutexPrefix("stalled"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, eventBound, 50*time.Millisecond, "the release reached the member")
}
