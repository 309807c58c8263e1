package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/options"
)

// foreignLease is the lease a foreign contender takes: long enough that a Go contender
// waiting for it would not try again within the event deadline on its contend period, so
// that only a message can explain a prompt hand-over.
const foreignLease = time.Minute

// foreign is a contender that is not simba for Go, driven with raw commands in JVM
// Simba's format.
type foreign struct {
	t     testing.TB
	admin goredis.UniversalClient
	mutex string
	id    string
}

// newForeign returns a foreign contender of mutex, subscribed to its two channels as a
// JVM Simba service is from its start, so that it counts as listening.
func newForeign(t testing.TB, admin goredis.UniversalClient, mutex, id string) foreign {
	t.Helper()
	f := foreign{t: t, admin: admin, mutex: mutex, id: id}
	ps := admin.Subscribe(t.Context(), f.key(), f.key()+":"+id)
	t.Cleanup(func() { _ = ps.Close() })
	for range 2 {
		_, err := ps.Receive(t.Context()) // the confirmations
		require.NoError(t, err)
	}
	return f
}

func (f foreign) key() string { return "simba:{" + f.mutex + "}" }

// acquire tries to take the mutex as JVM Simba's acquire script does: SET NX PX, and on
// success announce it; on failure join the waiting set. It reports success.
func (f foreign) acquire() bool {
	ctx := context.Background()
	ok, err := f.admin.SetNX(ctx, f.key(), f.id, foreignLease).Result()
	require.NoError(f.t, err)
	if ok {
		require.NoError(f.t, f.admin.Publish(ctx, f.key(), "acquired@@"+f.id).Err())
		return true
	}
	now, err := f.admin.Time(ctx).Result()
	require.NoError(f.t, err)
	require.NoError(f.t, f.admin.ZAddNX(ctx, f.key()+":contender", goredis.Z{Score: float64(now.Unix()), Member: f.id}).Err())
	return false
}

// release gives the mutex up as JVM Simba's release script does: delete the key, take the
// oldest waiter off the waiting set and tell it. It returns that waiter.
func (f foreign) release() string {
	ctx := context.Background()
	require.Equal(f.t, f.id, f.admin.Get(ctx, f.key()).Val(), "the foreign contender releases only what it owns")
	require.NoError(f.t, f.admin.Del(ctx, f.key()).Err())
	oldest, err := f.admin.ZRange(ctx, f.key()+":contender", 0, 0).Result()
	require.NoError(f.t, err)
	if len(oldest) == 0 {
		return ""
	}
	require.NoError(f.t, f.admin.ZRem(ctx, f.key()+":contender", oldest[0]).Err())
	require.NoError(f.t, f.admin.Publish(ctx, f.key()+":"+oldest[0], "released@@"+f.id).Err())
	return oldest[0]
}

// A foreign owner is seen as the owner, with its remaining lease; its release message
// wakes the Go contender it picks, which acquires at once.
func TestForeignOwnerWakesGoWaiter(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "7:4242@10.0.0.9")
	require.True(t, jvm.acquire())

	// Precisely, on a contention: the message itself wakes the waiter.
	var w wakes
	c := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go", &w)
	rec, err := c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, jvm.id, rec.Owner)
	assert.Zero(t, rec.Token, "no token for a tenure no Go contender began")
	assert.InDelta(t, foreignLease.Seconds(), rec.Transition.Seconds(), 5, "the foreign owner's remaining lease")
	w.waitMore(t, 0, "the wake-up once the subscription is confirmed")
	rec, err = c.Acquire(ctx) // the service's re-check after the wake-up
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	before := w.count()
	assert.Equal(t, "go", jvm.release(), "the Go contender is the oldest waiter")
	w.waitMore(t, before, "the release message")
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "go", rec.Owner)
	assert.NotZero(t, rec.Token)
	require.NoError(t, c.Release(ctx))

	// End to end, with a service.
	require.True(t, jvm.acquire())
	r := newRecorder()
	s := r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go-service")
	poll(t, "the service to see the foreign owner and wait", func() bool {
		return s.Owner().ID == jvm.id && numSub(t, admin, jvm.key()+":go-service") == 1 &&
			admin.ZScore(ctx, jvm.key()+":contender", "go-service").Err() == nil
	})
	assert.Equal(t, "go-service", jvm.release())
	await(t, &r.sig, "the service to acquire after the foreign release", func() bool { return r.acquisitions("go-service") == 1 })
	require.NoError(t, s.Stop(ctx))
}

// A Go release wakes the foreign waiter it picks; the foreign contender then acquires,
// Go contenders and retrievers see it as owner, and its release wakes a Go waiter.
func TestGoReleaseWakesForeignWaiter(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "W-jvm")
	inbox := admin.Subscribe(ctx, jvm.key()+":"+jvm.id)
	defer inbox.Close()
	_, err := inbox.Receive(ctx) // confirmed
	require.NoError(t, err)

	// A long TTL: nothing below may be explained by the Go side's contend periods.
	opts := longLease
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("go-holder"))...)
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)

	retrieverService, v := retriever(t, srv.Addr(), mutex)

	require.False(t, jvm.acquire(), "the foreign contender waits behind the Go holder")
	holderView := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go-holder", &wakes{})
	waiting, err := holderView.(backend.WaitList).OthersWaiting(ctx)
	require.NoError(t, err)
	assert.True(t, waiting, "the foreign waiter counts as waiting")
	r := newRecorder()
	waiter := r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "zgo-waiter", opts...)
	// Once subscribed, the waiter attempts again at once, and that attempt's registration
	// says it listens (heard "1"): only then does it wait for a message. An attempt after
	// the release below would find the mutex free and take it before the foreign waiter
	// (a CI run saw it).
	poll(t, "the Go waiter in the waiting set, after the foreign one, listening", func() bool {
		reg, ok := registration(t, admin, mutex, "zgo-waiter")
		return admin.ZScore(ctx, jvm.key()+":contender", "zgo-waiter").Err() == nil &&
			numSub(t, admin, jvm.key()+":zgo-waiter") == 1 && ok && reg[5] == "1"
	})

	require.NoError(t, lease.Release(ctx))
	mctx, cancel := context.WithTimeout(ctx, eventDeadline)
	defer cancel()
	msg, err := inbox.ReceiveMessage(mctx)
	require.NoError(t, err, "the foreign waiter hears of the release")
	assert.Equal(t, "released@@go-holder", msg.Payload)
	assert.ErrorIs(t, admin.ZScore(ctx, jvm.key()+":contender", jvm.id).Err(), goredis.Nil, "taken off the waiting set")

	require.True(t, jvm.acquire())
	await(t, &v.sig, "the retriever to see the foreign owner", func() bool { return v.owner() == jvm.id })
	late := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go-late", &wakes{})
	rec, err := late.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, jvm.id, rec.Owner, "a Go contender sees the foreign owner")
	require.NoError(t, late.Release(ctx), "leaves the waiting set")
	assert.Zero(t, r.acquisitions("zgo-waiter"))

	assert.Equal(t, "zgo-waiter", jvm.release())
	await(t, &r.sig, "the Go waiter to acquire after the foreign release", func() bool { return r.acquisitions("zgo-waiter") == 1 })
	assert.Equal(t, "zgo-waiter", admin.Get(ctx, jvm.key()).Val())
	await(t, &v.sig, "the retriever to see the Go owner", func() bool { return v.owner() == "zgo-waiter" })
	require.NoError(t, waiter.Stop(ctx))
	require.NoError(t, retrieverService.Stop(ctx))
}

// An owner that has waited before is subscribed; when a foreign contender announces an
// acquisition of its mutex (its key was lost and taken), the owner checks at once and
// stops believing, long before its next renewal.
func TestForeignAcquisitionEndsGoBelief(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	first := newForeign(t, admin, mutex, "first-jvm")
	require.True(t, first.acquire())
	r := newRecorder()
	// Renewals every 20s: the check below must come from the message.
	s := r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go", simba.WithTTL(30*time.Second), simba.WithTransition(time.Second))
	poll(t, "the Go contender to wait", func() bool { return numSub(t, admin, first.key()+":go") == 1 })
	first.release()
	await(t, &r.sig, "the Go contender to acquire", func() bool { return r.acquisitions("go") == 1 })

	// The key vanishes (an operator, an eviction) and a foreign contender takes it.
	require.NoError(t, admin.Del(ctx, first.key()).Err())
	thief := newForeign(t, admin, mutex, "thief-jvm")
	require.True(t, thief.acquire())
	await(t, &r.sig, "the Go owner to stop believing", func() bool { return r.releases("go") == 1 })
	// Belief may end on a check that ran between the delete and the theft (a late
	// message of the first release, on a loaded machine): the owner is then "no owner"
	// until the thief's announcement is checked.
	poll(t, "the service to name the foreign owner", func() bool { return s.Owner().ID == thief.id })
	require.NoError(t, s.Stop(ctx))
	assert.Equal(t, thief.id, admin.Get(ctx, thief.key()).Val(), "Stop leaves the foreign owner alone")
}
