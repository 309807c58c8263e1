package redis_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// stillHeld fails t unless lease's tenure is still believed and the store names its owner.
func stillHeld(t *testing.T, b simba.Backend, mutex string, lease *simba.Lease) {
	t.Helper()
	select {
	case <-lease.Done():
		t.Fatal("the later tenure ended")
	default:
	}
	o, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	assert.Equal(t, lease.Owner().ID, o.ID, "the store still names the owner")
}

// The admin release (storeurl's Release, cmd/simba release) looked up the owner and then
// released in the name of its contender ID: when the same Locker had released and
// acquired again meanwhile, the later tenure was freed while its holder believed (issue
// 33). ReleaseOwner frees only the tenure that was looked up: the same ID and token.
func TestReleaseOwnerFreesOnlyTheTenureLookedUp(t *testing.T) {
	b := newBackend(t, newClient(t, server(t).Addr()))
	mutex := uniqueName(t, "m")
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("c"), simba.WithTTL(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	first, err := l.Acquire(t.Context())
	require.NoError(t, err)
	looked, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	require.Equal(t, "c", looked.ID)
	require.Equal(t, first.Token(), looked.Token)
	require.NoError(t, first.Release(t.Context()))
	second, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.Greater(t, second.Token(), looked.Token)

	require.NoError(t, b.ReleaseOwner(t.Context(), mutex, looked), "another tenure: nothing to do")
	stillHeld(t, b, mutex, second)

	now, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	require.NoError(t, b.ReleaseOwner(t.Context(), mutex, now))
	o, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	assert.True(t, o.IsZero(), "the tenure looked up is freed: %+v", o)
	_ = second.Release(t.Context())
}

// A record without a token (a JVM owner, which keeps none) frees the tenure of its ID that
// shows no token either, handing the mutex to the oldest waiter as the owner's own release
// does; it frees no tenure that shows a token.
func TestReleaseOwnerWithoutToken(t *testing.T) {
	admin := newClient(t, server(t).Addr())
	b := newBackend(t, newClient(t, server(t).Addr()))
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "jvm")
	require.True(t, jvm.acquire())

	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("go"), simba.WithTTL(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	type acquired struct {
		lease *simba.Lease
		err   error
	}
	got := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(t.Context())
		got <- acquired{lease, err}
	}()
	poll(t, "the Go contender waiting", func() bool {
		return admin.ZScore(t.Context(), jvm.key()+":contender", "go").Err() == nil
	})

	looked, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	require.Equal(t, simba.Owner{ID: "jvm", TTLAt: looked.TTLAt, TransitionAt: looked.TransitionAt}, looked, "no token")
	require.NoError(t, b.ReleaseOwner(t.Context(), mutex, looked))
	var a acquired
	select {
	case a = <-got:
	case <-time.After(eventDeadline):
		t.Fatal("the waiter was not served")
	}
	require.NoError(t, a.err)
	t.Cleanup(func() { _ = a.lease.Release(t.Context()) })

	goOwner, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	require.NotZero(t, goOwner.Token)
	goOwner.Token = 0
	require.NoError(t, b.ReleaseOwner(t.Context(), mutex, goOwner))
	stillHeld(t, b, mutex, a.lease)
}

// ReleaseOwner checks its input before any I/O, and has nothing to do for no owner.
func TestReleaseOwnerRejectsBadInput(t *testing.T) {
	b := newBackend(t, unreachable(t))
	for _, tc := range []struct {
		mutex string
		owner simba.Owner
	}{
		{"", simba.Owner{ID: "c"}},
		{"a{b}", simba.Owner{ID: "c"}},
		{"m", simba.Owner{ID: "a@@b"}},
		{"m", simba.Owner{ID: " "}},
	} {
		err := b.ReleaseOwner(t.Context(), tc.mutex, tc.owner)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%q %q", tc.mutex, tc.owner.ID)
	}
	assert.NoError(t, b.ReleaseOwner(t.Context(), "m", simba.Owner{}))
}

// A Quorum's ReleaseOwner frees the tenure whose record it is given, the owner's own with
// its quorum-wide token, and leaves a later tenure of the same contender alone; a record
// of the Quorum's Lookup, which shows no token, frees no Go contender's tenure.
func TestQuorumReleaseOwner(t *testing.T) {
	clients := []goredis.UniversalClient{newClient(t, ownServer(t).Addr()), newClient(t, ownServer(t).Addr()), newClient(t, ownServer(t).Addr())}
	q, err := redis.NewQuorum(clients)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	mutex := uniqueName(t, "m")
	l, err := simba.NewLocker(q, mutex, simba.WithContenderID("c"), simba.WithTTL(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	first, err := l.Acquire(t.Context())
	require.NoError(t, err)
	old := first.Owner()
	require.NoError(t, first.Release(t.Context()))
	second, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.Greater(t, second.Token(), old.Token)

	require.NoError(t, q.ReleaseOwner(t.Context(), mutex, old), "another tenure: nothing to do")
	stillHeld(t, q, mutex, second)
	for i, c := range clients {
		assert.Equal(t, "c", c.Get(t.Context(), "simba:{"+mutex+"}").Val(), "instance %d", i)
	}

	looked, err := simba.Lookup(t.Context(), q, mutex)
	require.NoError(t, err)
	require.Zero(t, looked.Token, "a Quorum's lookup shows no token")
	require.NoError(t, q.ReleaseOwner(t.Context(), mutex, looked))
	stillHeld(t, q, mutex, second)

	// Freed on the quorum whose largest token is the tenure's, at least: an instance that
	// answered the acquisition after that quorum may show a larger token, and keeps its key
	// until it lapses.
	require.NoError(t, q.ReleaseOwner(t.Context(), mutex, second.Owner()))
	freed := 0
	for _, c := range clients {
		if c.Get(t.Context(), "simba:{"+mutex+"}").Err() == goredis.Nil {
			freed++
		}
	}
	_, quorum := q.Size()
	assert.GreaterOrEqual(t, freed, quorum, "instances freed")
	o, err := simba.Lookup(t.Context(), q, mutex)
	require.NoError(t, err)
	assert.True(t, o.IsZero(), "no owner: %+v", o)
	_ = second.Release(t.Context())
}
