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

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
)

// handee is a mutex contention on a backend of its own, opened directly as a service's
// would be, with its wake-ups and grants recorded.
type handee struct {
	backend.LeaseContention
	id     string
	wakes  wakes
	grants chan backend.Record
}

// handOffMutex is a mutex of a server or cluster, with a client that inspects the store.
type handOffMutex struct {
	admin   goredis.UniversalClient
	name    string
	connect func() goredis.UniversalClient // a new client, closed when the test ends
}

func newHandOffMutex(t *testing.T, srv *testserver.Server) *handOffMutex {
	return &handOffMutex{admin: newClient(t, srv.Addr()), name: uniqueName(t, "m"),
		connect: func() goredis.UniversalClient { return newClient(t, srv.Addr()) }}
}

// contender opens a contention of the mutex for id with owner value value, on a client
// and backend of its own (another process), stopped when t ends.
func (m *handOffMutex) contender(t *testing.T, id, value string) *handee {
	t.Helper()
	h := &handee{id: id, grants: make(chan backend.Record, 4)}
	c, err := newBackend(t, m.connect()).StartContend(t.Context(), backend.Participant{
		Mutex: m.name, ContenderID: id, Value: value, TTL: 30 * time.Second, Transition: time.Second,
		Logger: slog.New(slog.DiscardHandler), Wake: h.wakes.wake, Report: func(backend.Record, time.Time) {},
		Grant: func(rec backend.Record, _ time.Time) { h.grants <- rec },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	h.LeaseContention = c.(backend.LeaseContention)
	return h
}

// ownedWithTwoWaiting opens contenders a, b and c with owner values va, vb and vc: a owns
// the mutex (first is its record), and b, then c, wait with their channels subscribed.
func (m *handOffMutex) ownedWithTwoWaiting(t *testing.T, va, vb, vc string) (a, b, c *handee, first backend.Record) {
	t.Helper()
	a, b, c = m.contender(t, "a", va), m.contender(t, "b", vb), m.contender(t, "c", vc)
	first = a.own(t)
	b.queue(t)
	c.queue(t)
	return a, b, c, first
}

func (h *handee) offer() backend.HandOffer { return h.LeaseContention.(backend.HandOffer) }

// own has h acquire the free mutex and returns its record.
func (h *handee) own(t *testing.T) backend.Record {
	t.Helper()
	rec, err := h.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, h.id, rec.Owner)
	return rec
}

// queue has h attempt, expecting to wait, and attempt once more when its subscription is
// confirmed, as the service does: from then on it hears its channel.
func (h *handee) queue(t *testing.T) {
	t.Helper()
	n := h.wakes.count()
	rec, err := h.Acquire(t.Context())
	require.NoError(t, err)
	require.NotEqual(t, h.id, rec.Owner)
	h.wakes.waitMore(t, n, "the subscription of "+h.id)
	rec, err = h.Acquire(t.Context())
	require.NoError(t, err)
	require.NotEqual(t, h.id, rec.Owner)
}

// granted waits for h's grant.
func (h *handee) granted(t *testing.T) backend.Record {
	t.Helper()
	select {
	case rec := <-h.grants:
		return rec
	case <-time.After(eventDeadline):
		require.FailNow(t, h.id+": no grant within "+eventDeadline.String())
		return backend.Record{}
	}
}

// mutexState is what the store keeps of a mutex, to compare before and after a call.
type mutexState struct {
	owner, token string
	waiting      []goredis.Z
	grants       map[string]string
}

func stateOf(t *testing.T, admin goredis.UniversalClient, mutex string) mutexState {
	t.Helper()
	ctx, key := t.Context(), "simba:{"+mutex+"}"
	return mutexState{
		owner:   admin.Get(ctx, key).Val(),
		token:   admin.Get(ctx, key+":token").Val(),
		waiting: admin.ZRangeWithScores(ctx, key+":contender", 0, -1).Val(),
		grants:  admin.HGetAll(ctx, key+":grant").Val(),
	}
}

// waitingIDs returns the waiting set, first come first.
func waitingIDs(t *testing.T, admin goredis.UniversalClient, mutex string) []string {
	t.Helper()
	return admin.ZRange(t.Context(), "simba:{"+mutex+"}:contender", 0, -1).Val()
}

// A hand-off makes the named waiter, not the oldest, the owner: it hears its grant, with
// a greater token and its own value, and the store names it with that token and value.
// The former owner waits behind the others, registered: the next release grants it the
// mutex back when it is first.
func TestHandOffGrantsTheNamedWaiter(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	admin, mutex, ctx := m.admin, m.name, t.Context()
	a, b, c, first := m.ownedWithTwoWaiting(t, "value of a", "value of b", "")

	waiters, err := a.offer().Waiters(ctx)
	require.NoError(t, err)
	assert.Equal(t, []backend.Waiter{{ID: "b", Value: "value of b"}, {ID: "c"}}, waiters)

	require.NoError(t, a.offer().HandOff(ctx, "c"))
	rec := c.granted(t)
	assert.Equal(t, "c", rec.Owner)
	assert.Greater(t, rec.Token, first.Token)
	assert.Empty(t, rec.Value)
	assert.Equal(t, "c", admin.Get(ctx, "simba:{"+mutex+"}").Val())
	assert.Equal(t, []string{"b", "a"}, waitingIDs(t, admin, mutex), "the former owner behind the waiters")
	_, ok := registration(t, admin, mutex, "c")
	assert.False(t, ok, "the hand-off used c's registration up")
	reg, ok := registration(t, admin, mutex, "a")
	require.True(t, ok, "the former owner is registered for a grant")
	assert.Equal(t, "value of a", reg[6])
	// a never renewed, so it subscribes only now, as a waiter's first attempt does: the
	// confirmation wakes it.
	a.wakes.waitMore(t, 0, "the subscription of a")

	got, err := c.Acquire(ctx) // c's next attempt renews the tenure handed to it
	require.NoError(t, err)
	assert.Equal(t, "c", got.Owner)
	assert.Equal(t, rec.Token, got.Token)

	// c hands the mutex to b, with b's value; a stays where it was.
	require.NoError(t, c.offer().HandOff(ctx, "b"))
	rec = b.granted(t)
	assert.Equal(t, backend.Record{Owner: "b", TTL: 30 * time.Second, Transition: 31 * time.Second, Token: rec.Token, Value: "value of b"}, rec)
	assert.Greater(t, rec.Token, got.Token)
	look, err := a.Lookup(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", look.Owner)
	assert.Equal(t, rec.Token, look.Token)
	assert.Equal(t, "value of b", look.Value)
	assert.Equal(t, []string{"a", "c"}, waitingIDs(t, admin, mutex))

	// b's release serves a, which waited longest: the registration the hand-off made.
	require.NoError(t, b.Release(ctx))
	rec = a.granted(t)
	assert.Equal(t, "a", rec.Owner)
	assert.Equal(t, "value of a", rec.Value)
	look, err = c.Lookup(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", look.Owner)
	assert.Equal(t, rec.Token, look.Token)
	assert.Equal(t, "value of a", look.Value)
}

// A hand-off to a contender that does not wait, or by one that does not own the mutex
// (a waiter, an earlier tenure of the owner's ID, a retriever), fails with
// simba.ErrNotWaiting or simba.ErrNotOwner and changes nothing.
func TestHandOffChecks(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	admin, mutex, ctx := m.admin, m.name, t.Context()
	a, b, c, _ := m.ownedWithTwoWaiting(t, "", "", "")
	outsider := m.contender(t, "outsider", "")
	before := stateOf(t, admin, mutex)

	for _, to := range []string{"outsider", "a", "nobody"} {
		err := a.offer().HandOff(ctx, to)
		assert.ErrorIs(t, err, simba.ErrNotWaiting, "to %s", to)
		assert.NotErrorIs(t, err, simba.ErrNotOwner)
	}
	for _, h := range []*handee{b, outsider} {
		err := h.offer().HandOff(ctx, "c")
		assert.ErrorIs(t, err, simba.ErrNotOwner, "by %s", h.id)
	}
	retriever, err := newBackend(t, m.connect()).StartContend(ctx, backend.Participant{
		Mutex: mutex, TTL: testTTL, Transition: testTransition, Logger: slog.New(slog.DiscardHandler), Wake: func() {},
	})
	require.NoError(t, err)
	defer func() { _ = retriever.StopContend(context.Background()) }()
	assert.ErrorIs(t, retriever.(backend.HandOffer).HandOff(ctx, "c"), simba.ErrNotOwner)
	for _, bad := range []string{"", "x@@y", "x@"} {
		assert.ErrorIs(t, a.offer().HandOff(ctx, bad), simba.ErrInvalidArgument, "to %q", bad)
	}
	assert.Equal(t, before, stateOf(t, admin, mutex))

	// A later lifecycle of a's ID begins a tenure of its own: the earlier one no longer
	// owns, although the owner key names its ID.
	again := m.contender(t, "a", "")
	again.own(t)
	before = stateOf(t, admin, mutex)
	assert.ErrorIs(t, a.offer().HandOff(ctx, "c"), simba.ErrNotOwner)
	assert.Equal(t, before, stateOf(t, admin, mutex))
	require.NoError(t, again.offer().HandOff(ctx, "c"))
	assert.Equal(t, "c", c.granted(t).Owner)
}

// A waiter whose registration is too old for a grant (it believes from its attempt's send
// time, so a grant would leave it less than a tenth of its ttl) owns from the hand-off for
// a lease and is woken: its next attempt finds it the owner, with the hand-off's token.
func TestHandOffWakesAWaiterRegisteredLongAgo(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	admin, mutex, ctx := m.admin, m.name, t.Context()
	a := m.contender(t, "a", "")
	b := m.contender(t, "b", "value of b")
	first := a.own(t)
	b.queue(t)
	// Age b's registration by its ttl, keeping it live.
	reg, ok := registration(t, admin, mutex, "b")
	require.True(t, ok)
	at, err := strconv.ParseInt(reg[1], 10, 64)
	require.NoError(t, err)
	reg[1] = strconv.FormatInt(at-30_000, 10)
	require.NoError(t, admin.HSet(ctx, "simba:{"+mutex+"}:grant", "b", strings.Join(reg, "@@")).Err())

	n := b.wakes.count()
	require.NoError(t, a.offer().HandOff(ctx, "b"))
	b.wakes.waitMore(t, n, "b's wake-up")
	pttl := admin.PTTL(ctx, "simba:{"+mutex+"}").Val()
	assert.Greater(t, pttl, 29*time.Second, "a lease from the hand-off")
	rec, err := b.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", rec.Owner)
	assert.Greater(t, rec.Token, first.Token)
	assert.Equal(t, "value of b", rec.Value)
	select {
	case g := <-b.grants:
		t.Fatalf("a grant to a registration too old: %+v", g)
	default:
	}
	assert.Equal(t, []string{"a"}, waitingIDs(t, admin, mutex))
}

// Waiters lists, first come first, the waiters a hand-off can serve: not a JVM waiter (no
// registration) nor one whose registration has lapsed, which a hand-off refuses too.
func TestWaitersLeaveOutWhomAHandOffCannotServe(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	admin, mutex, ctx := m.admin, m.name, t.Context()
	key := "simba:{" + mutex + "}"
	a := m.contender(t, "a", "")
	b := m.contender(t, "b", "b@@v")
	a.own(t)
	waiters, err := a.offer().Waiters(ctx)
	require.NoError(t, err)
	assert.Empty(t, waiters)

	require.NoError(t, admin.ZAdd(ctx, key+":contender", goredis.Z{Score: 1, Member: "jvm"}).Err())
	b.queue(t)
	lapsed := m.contender(t, "lapsed", "")
	lapsed.queue(t)
	reg, ok := registration(t, admin, mutex, "lapsed")
	require.True(t, ok)
	reg[4] = "1" // until the dawn of time
	require.NoError(t, admin.HSet(ctx, key+":grant", "lapsed", strings.Join(reg, "@@")).Err())

	waiters, err = b.offer().Waiters(ctx)
	require.NoError(t, err)
	assert.Equal(t, []backend.Waiter{{ID: "b", Value: "b@@v"}}, waiters)
	before := stateOf(t, admin, mutex)
	for _, to := range []string{"jvm", "lapsed"} {
		assert.ErrorIs(t, a.offer().HandOff(ctx, to), simba.ErrNotWaiting, "to %s", to)
	}
	assert.Equal(t, before, stateOf(t, admin, mutex))
}

// A waiter that registered listening but hears nothing on its channel now is gone (its
// process ended): the hand-off refuses it, as a release passes it by.
func TestHandOffToAGoneWaiter(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	admin, mutex, ctx := m.admin, m.name, t.Context()
	a := m.contender(t, "a", "")
	b := m.contender(t, "b", "")
	a.own(t)
	b.queue(t)
	require.NoError(t, b.StopContend(ctx))
	poll(t, "b's channel unsubscribed", func() bool { return numSub(t, admin, "simba:{"+mutex+"}:b") == 0 })
	before := stateOf(t, admin, mutex)
	assert.ErrorIs(t, a.offer().HandOff(ctx, "b"), simba.ErrNotWaiting)
	assert.Equal(t, before, stateOf(t, admin, mutex))
}

// A Locker that waits learns of a hand-off to it as of any grant: its Acquire returns a
// lease with a greater token and its value, although another Locker waited longer.
func TestHandOffToAWaitingLocker(t *testing.T) {
	m := newHandOffMutex(t, server(t))
	mutex, ctx := m.name, t.Context()
	a := m.contender(t, "a", "")
	first := a.own(t)
	acquire := func(id, value string) <-chan *simba.Lease {
		l, err := simba.NewLocker(newBackend(t, m.connect()), mutex, simba.WithContenderID(id),
			simba.WithOwnerValue(value), simba.WithTTL(30*time.Second), simba.WithTransition(time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		got := make(chan *simba.Lease, 1)
		go func() {
			lease, err := l.Acquire(ctx)
			assert.NoError(t, err)
			got <- lease
		}()
		return got
	}
	older := acquire("older", "o")
	poll(t, "older waits", func() bool { return len(waiters(t, a)) == 1 })
	younger := acquire("younger", "y")
	poll(t, "younger waits", func() bool { return len(waiters(t, a)) == 2 })

	require.NoError(t, a.offer().HandOff(ctx, "younger"))
	select {
	case lease := <-younger:
		require.NotNil(t, lease)
		assert.Equal(t, "younger", lease.Owner().ID)
		assert.Equal(t, "y", lease.Owner().Value)
		assert.Greater(t, lease.Token(), first.Token)
		require.NoError(t, lease.Release(ctx))
	case <-time.After(eventDeadline):
		t.Fatal("the Locker handed the mutex did not acquire")
	}
	select {
	case lease := <-older: // younger's release served it
		require.NotNil(t, lease)
		assert.Equal(t, "o", lease.Owner().Value)
		require.NoError(t, lease.Release(ctx))
	case <-time.After(eventDeadline):
		t.Fatal("the older Locker did not acquire after the younger's release")
	}
}

func waiters(t *testing.T, h *handee) []backend.Waiter {
	t.Helper()
	w, err := h.offer().Waiters(t.Context())
	require.NoError(t, err)
	return w
}

// A hand-off is one script: what it costs the server, logged (see the package doc,
// Cost), and held to a bound.
func TestHandOffCommands(t *testing.T) {
	m := newHandOffMutex(t, ownServer(t)) // no other test's commands
	admin, ctx := m.admin.(*goredis.Client), t.Context()
	a := m.contender(t, "a", "va")
	b := m.contender(t, "b", "vb")
	a.own(t)
	b.queue(t)
	_, err := a.offer().Waiters(ctx) // loads the scripts
	require.NoError(t, err)
	require.NoError(t, a.offer().HandOff(ctx, "b"))
	b.granted(t)
	a.wakes.waitMore(t, 0, "the subscription of a")
	const handOffs = 20
	var waiters, handOffsOnly float64
	for i := range handOffs {
		from, to := b, a
		if i%2 == 1 {
			from, to = a, b
		}
		before := commandStats(t, admin)
		_, err := from.offer().Waiters(ctx)
		require.NoError(t, err)
		middle := commandStats(t, admin)
		require.NoError(t, from.offer().HandOff(ctx, to.id))
		after := commandStats(t, admin)
		to.granted(t)
		w, wby := commandsPer(before, middle, 1)
		h, hby := commandsPer(middle, after, 1)
		if i == 0 {
			t.Logf("commands of Waiters (one waiter): %.0f (%s); of a hand-off: %.0f (%s)", w, wby, h, hby)
		}
		waiters += w
		handOffsOnly += h
		assert.Equal(t, int64(1), scripts(after)-scripts(middle), "one script")
	}
	assert.LessOrEqual(t, waiters/handOffs, 4.0, "the script, TIME, ZRANGE, and HGET per waiter")
	assert.LessOrEqual(t, handOffsOnly/handOffs, 18.0)
}
