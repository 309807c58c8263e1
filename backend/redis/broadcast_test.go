package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/options"
)

// longLease: no contend period of these tests' services comes round within the event
// deadline, so that only a message can explain what they learn in time.
var longLease = []simba.Option{simba.WithTTL(30 * time.Second), simba.WithTransition(time.Second)}

// views collects what a retriever is told.
type views struct {
	sig   signal
	ch    chan simba.State
	state []simba.State
}

func newViews() *views { return &views{ch: make(chan simba.State, 64)} }

func (v *views) notify(s simba.State) {
	v.ch <- s
	v.sig.notify()
}

// owner returns the owner the retriever was last told of.
func (v *views) owner() string {
	for {
		select {
		case s := <-v.ch:
			v.state = append(v.state, s)
			continue
		default:
		}
		if len(v.state) == 0 {
			return ""
		}
		return v.state[len(v.state)-1].After.ID
	}
}

// retriever starts a retrieval service of mutex on a backend of its own.
func retriever(t *testing.T, addr, mutex string) (*simba.Service, *views) {
	t.Helper()
	v := newViews()
	s, err := simba.NewRetrievalService(newBackend(t, newClient(t, addr)),
		simba.RetrieverFunc{MutexName: mutex, Notify: v.notify}, longLease...)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Close() })
	return s, v
}

// A retriever hears of a graceful release with nobody waiting within a round trip, not
// at its next lookup a lease later (issue 14, item 2).
func TestRetrieverHearsRelease(t *testing.T) {
	srv := server(t)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](longLease, simba.WithContenderID("holder"))...)
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)
	_, v := retriever(t, srv.Addr(), mutex)
	await(t, &v.sig, "the retriever to see the holder", func() bool { return v.owner() == "holder" })
	// Once its subscription is confirmed, it looks up again and marks the mutex watched:
	// from then on it hears releases.
	admin := newClient(t, srv.Addr())
	poll(t, "the retriever to mark the mutex watched", func() bool {
		return admin.Exists(ctx, "simba:{"+mutex+"}:retrievers").Val() == 1
	})

	require.NoError(t, lease.Release(ctx))
	await(t, &v.sig, "the retriever to hear of the release", func() bool { return v.owner() == "" })
}

// Waiting services learn of a hand-over to another waiter without a store call of
// their own: Owner() names the new owner within a round trip, and so does a retriever.
func TestWaitersHearHandOver(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](longLease, simba.WithContenderID("holder"))...)
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)
	r := newRecorder()
	first := r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "first", longLease...)
	poll(t, "the first waiter to wait", func() bool {
		return admin.ZScore(ctx, key+":contender", "first").Err() == nil && numSub(t, admin, key+":first") == 1
	})
	second := r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "second", longLease...)
	poll(t, "the second waiter to wait", func() bool {
		return admin.ZScore(ctx, key+":contender", "second").Err() == nil && numSub(t, admin, key+":second") == 1
	})
	_, v := retriever(t, srv.Addr(), mutex)
	await(t, &v.sig, "the retriever to see the holder", func() bool { return v.owner() == "holder" })
	require.Equal(t, "holder", second.Owner().ID)

	require.NoError(t, lease.Release(ctx))
	await(t, &r.sig, "the first waiter to be served", func() bool { return r.acquisitions("first") == 1 })
	poll(t, "the second waiter to see the first as owner", func() bool { return second.Owner().ID == "first" })
	await(t, &v.sig, "the retriever to see the first waiter as owner", func() bool { return v.owner() == "first" })

	// A JVM waiter is served by the release message on its channel; when it takes the
	// mutex, its announcement reaches the Go services.
	require.NoError(t, first.Stop(ctx))
	await(t, &r.sig, "the second waiter to be served", func() bool { return r.acquisitions("second") == 1 })
	jvm := newForeign(t, admin, mutex, "7:4242@10.0.0.9")
	require.False(t, jvm.acquire(), "the JVM contender waits")
	require.NoError(t, second.Stop(ctx))
	require.True(t, jvm.acquire(), "the mutex is free for the JVM waiter")
	await(t, &v.sig, "the retriever to see the JVM owner", func() bool { return v.owner() == jvm.id })
	jvm.release() // JVM Simba 3.x announces no release but to the waiter it wakes
}

// What a JVM Simba peer subscribed to its two channels receives while Go contenders
// acquire, hand over and release: only JVM Simba's own messages, each of which it parses
// (two parts split at "@@", an event it knows), and a release message only on its own
// channel, where it means "contend now". Whatever the backend publishes for Go
// subscribers goes elsewhere.
func TestJVMPeerSeesOnlyItsMessages(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "7:4242@10.0.0.9")
	peer := admin.Subscribe(ctx, jvm.key(), jvm.key()+":"+jvm.id)
	defer peer.Close()
	for range 2 {
		_, err := peer.Receive(ctx) // the confirmations
		require.NoError(t, err)
	}

	locker := func(id string) *simba.Locker {
		l, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](longLease, simba.WithContenderID(id))...)
		require.NoError(t, err)
		return l
	}
	_, v := retriever(t, srv.Addr(), mutex)
	a, b := locker("a"), locker("b")
	la, err := a.Acquire(ctx)
	require.NoError(t, err)
	got := make(chan *simba.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctx)
		assert.NoError(t, err)
		got <- lb
	}()
	poll(t, "b to wait", func() bool { _, ok := registration(t, admin, mutex, "b"); return ok })
	require.NoError(t, la.Release(ctx)) // grants b
	lb := <-got
	require.False(t, jvm.acquire())
	require.NoError(t, lb.Release(ctx)) // wakes the JVM waiter
	await(t, &v.sig, "the retriever to hear of the release", func() bool { return v.owner() == "" })
	require.True(t, jvm.acquire())
	jvm.release()
	la, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, la.Release(ctx)) // nobody waits
	await(t, &v.sig, "the retriever to hear of the last release", func() bool { return v.owner() == "a" || v.owner() == "" })

	want := []string{
		jvm.key() + " acquired@@a",
		jvm.key() + " acquired@@b",
		jvm.key() + ":" + jvm.id + " released@@b",
		jvm.key() + " acquired@@" + jvm.id,
		jvm.key() + " acquired@@a",
	}
	var seen []string
	for range want {
		mctx, cancel := context.WithTimeout(ctx, eventDeadline)
		msg, err := peer.ReceiveMessage(mctx)
		cancel()
		require.NoError(t, err, "after %v", seen)
		parts := strings.Split(msg.Payload, "@@")
		assert.Len(t, parts, 2, "JVM Simba splits at @@ and needs two parts: %q", msg.Payload)
		assert.Contains(t, []string{"acquired", "released"}, parts[0])
		seen = append(seen, msg.Channel+" "+msg.Payload)
	}
	assert.Equal(t, want, seen)
	require.NoError(t, admin.Publish(ctx, jvm.key(), "end@@test").Err())
	mctx, cancel := context.WithTimeout(ctx, eventDeadline)
	defer cancel()
	msg, err := peer.ReceiveMessage(mctx)
	require.NoError(t, err)
	assert.Equal(t, "end@@test", msg.Payload, "nothing more for the JVM peer")
}

// A Locker's waiter listens only for what concerns its turn (its own channel, and
// releases that left the mutex free), not for every acquisition: with N Lockers waiting,
// each hand-over woke all of them for a message none of them used, a hand-over's cost
// growing with the queue (8 Lockers: 3.4–3.7 thousand sections/s before, 4.7–5.3 after,
// in the contended bench). Once it owns and renews, it listens for acquisitions too, and
// a takeover ends its lease at once rather than at its next renewal.
func TestLockerWaiterHearsOnlyItsTurn(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	ttl := simba.WithTTL(6 * time.Second) // renewals every 4s
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](longLease, simba.WithContenderID("holder"))...)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx)
	require.NoError(t, err)
	waiter, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, ttl, simba.WithContenderID("waiter"))
	require.NoError(t, err)
	got := make(chan *simba.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctx)
		assert.NoError(t, err)
		got <- l
	}()
	poll(t, "the waiter to wait", func() bool {
		return admin.ZScore(ctx, key+":contender", "waiter").Err() == nil && numSub(t, admin, key+":waiter") == 1
	})
	assert.EqualValues(t, 1, numSub(t, admin, key+":@@released"), "the waiter hears releases that leave the mutex free")
	assert.Zero(t, numSub(t, admin, key), "the waiter does not listen for acquisitions")

	require.NoError(t, held.Release(ctx))
	var lease *simba.Lease
	select {
	case lease = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served within 5s")
	}
	require.NotNil(t, lease)
	poll(t, "the new owner to listen for acquisitions after its first renewal", func() bool {
		return numSub(t, admin, key) == 1
	})
	renewed := time.Now()

	// Another contender takes the mutex behind the owner's back (its key lost, say) and
	// announces it: the owner checks at once.
	require.NoError(t, admin.Set(ctx, key, "intruder", 10*time.Second).Err())
	require.NoError(t, admin.Publish(ctx, key, "acquired@@intruder").Err())
	select {
	case <-lease.Done():
		// The next renewal was due two thirds of the ttl after the first: 4s.
		assert.Less(t, time.Since(renewed), 3*time.Second, "ended by the announcement, not by a renewal")
	case <-time.After(5 * time.Second):
		t.Fatal("the owner did not stop believing within 5s of the takeover")
	}
	require.NoError(t, admin.Del(ctx, key).Err())
}

// A Locker's owner that acquired without waiting listens for acquisitions from its first
// renewal on, as every owner does; it does not wait for a second renewal (its first join
// subscribed only a waiter's channels).
func TestUncontendedLockerListensAtItsFirstRenewal(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	c, err := newBackend(t, newClient(t, srv.Addr())).StartContend(t.Context(), backend.Participant{
		Mutex: mutex, ContenderID: "once", TTL: testTTL, Transition: testTransition, WaitsOnly: true,
		Logger: slog.New(slog.DiscardHandler), Wake: func() {}, Grant: func(backend.Record, time.Time) {},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	lc := c.(backend.LeaseContention)

	rec, err := lc.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, "once", rec.Owner)
	assert.Zero(t, numSub(t, admin, key), "an uncontended acquisition subscribes nothing")
	rec, err = lc.Acquire(t.Context()) // the first renewal
	require.NoError(t, err)
	require.Equal(t, "once", rec.Owner)
	poll(t, "the owner to listen for acquisitions after its first renewal", func() bool {
		return numSub(t, admin, key) == 1
	})
	require.NoError(t, lc.Release(t.Context()))
}
