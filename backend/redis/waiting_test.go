package redis_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
)

// waiter opens a contention that takes grants, as a service's would, with a lease of
// ttl + ttl/2, on a backend of its own that the caller may close to make it die.
func waiter(t testing.TB, addr, mutex, id string, ttl time.Duration) (backend.LeaseContention, *redis.Backend, *wakes) {
	t.Helper()
	b := newBackend(t, newClient(t, addr))
	w := &wakes{}
	p := backend.Participant{
		Mutex: mutex, ContenderID: id, TTL: ttl, Transition: ttl / 2,
		Logger: slog.New(slog.DiscardHandler), Wake: w.wake, Report: func(backend.Record, time.Time) {},
		Grant: func(backend.Record, time.Time) {},
	}
	c, err := b.StartContend(t.Context(), p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.LeaseContention), b, w
}

// waitSubscribed makes c wait for mutex, owned by owner, with its channel subscribed:
// its first attempt finds the mutex owned and subscribes, and the one after the
// confirmation is made while the subscription stands, as a waiting service's is.
func waitSubscribed(t testing.TB, admin goredis.UniversalClient, c backend.LeaseContention, w *wakes, mutex, id, owner string) {
	t.Helper()
	n := w.count()
	rec, err := c.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, owner, rec.Owner)
	w.waitMore(t, n, "the subscription of "+id)
	require.EqualValues(t, 1, numSub(t, admin, "simba:{"+mutex+"}:"+id))
	rec, err = c.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, owner, rec.Owner)
}

// Waiters that died (their process ended without a release) do not stay in the waiting
// set (issue 14, item 3): they do not make OthersWaiting true, and a release passes them
// by, serving the live waiter behind them at once instead of granting the mutex to a
// dead one (which would block it for a lease) or waking nobody; afterwards neither the
// waiting set nor the grant registrations keep them.
func TestDeadWaitersAreDropped(t *testing.T) {
	sc := ownedMutex(t)
	srv, admin, ctx, mutex, key, owner := sc.srv, sc.admin, t.Context(), sc.mutex, sc.key, sc.owner

	for i := range 3 {
		id := "dead" + strconv.Itoa(i)
		c, b, w := waiter(t, srv.Addr(), mutex, id, 30*time.Second)
		waitSubscribed(t, admin, c, w, mutex, id, "owner")
		require.NoError(t, b.Close()) // dies: no release, no StopContend
		poll(t, id+"'s subscription to end", func() bool { return numSub(t, admin, key+":"+id) == 0 })
	}
	require.EqualValues(t, 3, admin.ZCard(ctx, key+":contender").Val())
	require.EqualValues(t, 3, admin.HLen(ctx, key+":grant").Val())
	waiting, err := owner.(backend.WaitList).OthersWaiting(ctx)
	require.NoError(t, err)
	assert.False(t, waiting, "only dead waiters")

	r := sc.liveWaiter()
	waiting, err = owner.(backend.WaitList).OthersWaiting(ctx)
	require.NoError(t, err)
	assert.True(t, waiting, "the live waiter")
	sc.releaseToLive(r)
}

// waitScene is a mutex that a contention owns, on a server of the package's.
type waitScene struct {
	t          *testing.T
	srv        *testserver.Server
	admin      *goredis.Client
	mutex, key string
	owner      backend.LeaseContention
}

// ownedMutex returns a new mutex owned by the contention "owner".
func ownedMutex(t *testing.T) *waitScene {
	srv := server(t)
	mutex := uniqueName(t, "m")
	owner := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "owner", &wakes{})
	rec, err := owner.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	return &waitScene{t: t, srv: srv, admin: newClient(t, srv.Addr()), mutex: mutex, key: "simba:{" + mutex + "}", owner: owner}
}

// liveWaiter starts a service "live" for the mutex and returns once it waits, subscribed.
func (sc *waitScene) liveWaiter() *recorder {
	t, admin, key := sc.t, sc.admin, sc.key
	r := newRecorder()
	r.service(t, newBackend(t, newClient(t, sc.srv.Addr())), sc.mutex, "live", longLease...)
	poll(t, "the live waiter to wait", func() bool {
		return admin.ZScore(t.Context(), key+":contender", "live").Err() == nil && numSub(t, admin, key+":live") == 1
	})
	return r
}

// releaseToLive releases the mutex and checks that the live waiter, and nobody else, is
// served, leaving neither waiting set nor registrations.
func (sc *waitScene) releaseToLive(r *recorder) {
	t, ctx, key := sc.t, sc.t.Context(), sc.key
	require.NoError(t, sc.owner.Release(ctx))
	await(t, &r.sig, "the live waiter to be served", func() bool { return r.acquisitions("live") == 1 })
	assert.Equal(t, "live", sc.admin.Get(ctx, key).Val())
	assert.Zero(t, sc.admin.Exists(ctx, key+":contender", key+":grant").Val(), "the waiting set and the registrations are empty")
}

// A waiter that ended after its first attempt, before its subscription was confirmed,
// left a registration that says it did not listen, like that of a live waiter whose
// subscription is on its way. A release used to grant it the mutex, blocking it for a
// lease (6.2–6.7 s measured with a 5 s ttl), and, once the registration was too old for
// a grant, to wake it alone, for nobody (adversarial review, stop 32). A live waiter
// registers again, listening, a round trip or two after its first attempt: a
// registration that did not listen and is older than a second is taken for gone when
// nobody hears its channel, and passed by.
func TestWaiterThatEndedBeforeItsSubscriptionIsPassedBy(t *testing.T) {
	sc := ownedMutex(t)
	admin, ctx, key := sc.admin, t.Context(), sc.key
	c, b, _ := waiter(t, sc.srv.Addr(), sc.mutex, "gone", 30*time.Second)
	rec, err := c.Acquire(ctx) // registers, not listening yet
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	require.NoError(t, b.Close()) // ends before its subscription is confirmed
	require.True(t, strings.HasSuffix(admin.HGet(ctx, key+":grant", "gone").Val(), "@@0"), "a registration that did not listen")

	r := sc.liveWaiter()
	time.Sleep(time.Second + 100*time.Millisecond) // the registration is older than a live waiter's could be
	sc.releaseToLive(r)
}

// A contender ID used again by a later lifecycle (a restarted process) is not served
// an entry its earlier lifecycle left in the waiting set (issue 14, item 4): the first
// attempt of the new contention takes it out, so that its own release never picks
// itself and grants itself a lease nobody believes in, but wakes the waiter behind.
func TestReusedIDDoesNotServeItself(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	ob := newBackend(t, newClient(t, srv.Addr()))
	owner := contend(t, ob, mutex, "owner", &wakes{})
	_, err := owner.Acquire(ctx)
	require.NoError(t, err)

	// The first lifecycle of "c" waits, with a long lease, and its process ends.
	earlier, eb, _ := waiter(t, srv.Addr(), mutex, "c", 30*time.Second)
	rec, err := earlier.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	require.NoError(t, eb.Close())
	// The owner's process ends too; its key lapses.
	require.NoError(t, ob.Close())
	poll(t, "the owner key to lapse", func() bool { return admin.Exists(ctx, key).Val() == 0 })

	// The restarted "c" takes the free mutex; a waiter queues behind.
	later, _, _ := waiter(t, srv.Addr(), mutex, "c", 30*time.Second)
	rec, err = later.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "c", rec.Owner)
	var ww wakes
	next := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "next", &ww)
	rec, err = next.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "c", rec.Owner)
	ww.waitMore(t, 0, "the subscription of the next waiter")

	n := ww.count()
	require.NoError(t, later.Release(ctx))
	assert.NotEqual(t, "c", admin.Get(ctx, key).Val(), "the release granted the mutex to its own ID")
	ww.waitMore(t, n, "the release to wake the next waiter")
	rec, err = next.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "next", rec.Owner)
	assert.ErrorIs(t, admin.ZScore(ctx, key+":contender", "c").Err(), goredis.Nil)
}

// A backend remembers which contender IDs left the waiting set with their last
// contention, so that the next contention of the ID takes the free mutex without
// clearing an entry (see TestUncontendedCycleCommands); one that ended while it waited
// (stopped without a release) is not remembered, and the next contention of the ID on
// the same backend takes its leftover entry and registration out.
func TestLeftoverEntryOnTheSameBackendIsTakenOut(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	owner := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "owner", &wakes{})
	_, err := owner.Acquire(ctx)
	require.NoError(t, err)

	b := newBackend(t, newClient(t, srv.Addr()))
	earlier := contend(t, b, mutex, "c", &wakes{})
	rec, err := earlier.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	require.NoError(t, earlier.StopContend(ctx)) // no release: its entry stays
	_, registered := registration(t, admin, mutex, "c")
	require.True(t, registered)

	require.NoError(t, admin.Del(ctx, key).Err()) // the owner's key lapses
	later := contend(t, b, mutex, "c", &wakes{})
	rec, err = later.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "c", rec.Owner)
	assert.ErrorIs(t, admin.ZScore(ctx, key+":contender", "c").Err(), goredis.Nil, "the leftover entry")
	_, registered = registration(t, admin, mutex, "c")
	assert.False(t, registered, "the leftover registration")
	require.NoError(t, later.Release(ctx))
}

// First come, first served across Go and JVM waiters (issue 14, item 5). JVM Simba
// scores a waiter with the server's time in whole seconds; a Go waiter that registered
// before a JVM waiter within the same second is still served first, by a Go release and
// by a JVM one alike, and a JVM waiter that registered first is served first.
func TestFirstComeFirstServedAcrossJVMAndGo(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()

	// sameSecond runs first and second within one second of the server's clock: it
	// starts them early in a second and reports whether they stayed within it.
	sameSecond := func(first, second func()) bool {
		poll(t, "the start of a second", func() bool { return admin.Time(ctx).Val().Nanosecond() < 200*int(time.Millisecond) })
		begin := admin.Time(ctx).Val().Unix()
		first()
		second()
		return admin.Time(ctx).Val().Unix() == begin
	}
	type order struct {
		name     string
		goFirst  bool
		jvmFrees bool // the holder is JVM Simba
	}
	for _, o := range []order{
		{"Go first, Go release", true, false},
		{"Go first, JVM release", true, true},
		{"JVM first, Go release", false, false},
		{"JVM first, JVM release", false, true},
	} {
		t.Run(o.name, func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 5, "could not register both within one second")
				mutex := uniqueName(t, "m")
				key := "simba:{" + mutex + "}"
				holderJVM := newForeign(t, admin, mutex, "1:1@10.0.0.1")
				var holderGo backend.LeaseContention
				if o.jvmFrees {
					require.True(t, holderJVM.acquire())
				} else {
					holderGo = contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "holder", &wakes{})
					_, err := holderGo.Acquire(ctx)
					require.NoError(t, err)
				}
				jvm := newForeign(t, admin, mutex, "2:2@10.0.0.2")
				g, _, _ := waiter(t, srv.Addr(), mutex, "go", 30*time.Second)
				goWaits := func() {
					_, err := g.Acquire(ctx)
					require.NoError(t, err)
				}
				jvmWaits := func() { require.False(t, jvm.acquire()) }
				var ok bool
				if o.goFirst {
					ok = sameSecond(goWaits, jvmWaits)
				} else {
					ok = sameSecond(jvmWaits, goWaits)
				}
				if !ok {
					continue
				}
				var served string
				if o.jvmFrees {
					served = holderJVM.release()
				} else {
					require.NoError(t, holderGo.Release(ctx))
					if owner := admin.Get(ctx, key).Val(); owner != "" {
						served = owner // granted
					} else {
						served = jvm.id // woken by JVM Simba's message
					}
				}
				want := map[bool]string{true: "go", false: jvm.id}[o.goFirst]
				assert.Equal(t, want, served)
				return
			}
		})
	}
}
