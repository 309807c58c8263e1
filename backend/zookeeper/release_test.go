package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// ReleaseOwner deletes the node of the tenure a lookup reported while that tenure lasts,
// and nothing once it has ended: a Locker that released and acquired again since keeps
// its new tenure.
func TestReleaseOwner(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	ops := newBackend(t) // the operator's, as storeurl's
	l, err := simba.NewLocker(newBackend(t), mutex, simba.WithContenderID("a"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	first, err := l.Acquire(ctx)
	require.NoError(t, err)
	old, err := simba.Lookup(ctx, ops, mutex)
	require.NoError(t, err)
	require.Equal(t, "a", old.ID)
	require.Equal(t, first.Token(), old.Token)
	require.NoError(t, first.Release(ctx))
	second, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.Greater(t, second.Token(), old.Token)

	require.NoError(t, ops.ReleaseOwner(ctx, mutex, old))
	node := nodeOf(t, admin, parent, "a")
	require.NotEmpty(t, node, "the new tenure's node was deleted")
	_, st, err := admin.Get(node)
	require.NoError(t, err)
	assert.Equal(t, second.Token(), uint64(st.Czxid))
	assert.NoError(t, second.Context().Err())

	now, err := simba.Lookup(ctx, ops, mutex)
	require.NoError(t, err)
	require.Equal(t, second.Token(), now.Token)
	require.NoError(t, ops.ReleaseOwner(ctx, mutex, now))
	select {
	case <-second.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the released tenure's lease goes on")
	}
	waitGone(t, admin, node, 10*time.Second)

	assert.NoError(t, ops.ReleaseOwner(ctx, mutexName(t), now), "a mutex nobody contends")
}

func TestReleaseOwnerBadInput(t *testing.T) {
	b := newBackend(t)
	for name, call := range map[string]func() error{
		"no ID":    func() error { return b.ReleaseOwner(t.Context(), "m", simba.Owner{Token: 1}) },
		"no token": func() error { return b.ReleaseOwner(t.Context(), "m", simba.Owner{ID: "a"}) },
		"bad name": func() error { return b.ReleaseOwner(t.Context(), "a/b", simba.Owner{ID: "a", Token: 1}) },
	} {
		assert.ErrorIs(t, call(), simba.ErrInvalidArgument, name)
	}
}

// ReleaseOwner keeps its caller's deadline when its request gets no answer on a
// connection that stays up (go-zookeeper would wait for the answer for ever).
func TestReleaseOwnerDeadline(t *testing.T) {
	b, armed, dropped := dropping(t, opGetChildren2)
	eventually(t, startWithin, "a session", func() bool { return zookeeper.SessionID(b.Backend) != 0 })
	armed.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.ReleaseOwner(ctx, mutexName(t), simba.Owner{ID: "a", Token: 1}) }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, simba.ErrRefused)
		assert.EqualValues(t, 1, dropped.Load(), "the list request was not swallowed")
	case <-time.After(startWithin):
		t.Fatal("ReleaseOwner did not return by its deadline")
	}
}

// ReleaseOwner on a mutex node whose ACL forbids the backend is refused.
func TestReleaseOwnerRefused(t *testing.T) {
	mutex := mutexName(t)
	admin := adminConn(t)
	require.NoError(t, admin.AddAuth("digest", []byte("admin:secret")))
	createMutexNode(t, admin, mutex, zk.DigestACL(zk.PermAll, "admin", "secret"))
	err := newBackend(t).ReleaseOwner(t.Context(), mutex, simba.Owner{ID: "a", Token: 1})
	assert.ErrorIs(t, err, simba.ErrRefused)
	assert.ErrorIs(t, err, zk.ErrNoAuth)
}
