package redis_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// The owner holds, redis-server is killed (-9) and restarted empty on the same port, (a)
// at once, (b) after ttl + transition. The old owner stops believing by its local TTL end
// or at its first answer after the restart; one contender acquires afterwards with a token
// greater than every earlier one (the clock-based token survives the lost data), and no
// regression is counted. In (b) nobody overlaps; in (a) an overlap is possible until the
// old owner's next renewal and is reported.
func TestServerKilledDuringContention(t *testing.T) {
	for _, delayed := range []bool{false, true} {
		name := "immediate"
		if delayed {
			name = "delayed"
		}
		t.Run(name, func(t *testing.T) {
			srv := ownServer(t)
			admin := newClient(t, srv.Addr())
			ctx := t.Context()
			mutex := uniqueName(t, "m")
			r := newRecorder()
			var backends []*redis.Backend
			for i := range 3 {
				b := newBackend(t, newClient(t, srv.Addr()))
				backends = append(backends, b)
				r.service(t, b, mutex, "c"+strconv.Itoa(i), simba.WithCallTimeout(250*time.Millisecond))
			}
			await(t, &r.sig, "a first owner", func() bool { return r.holder() != "" })
			owner := r.holder()
			poll(t, "both waiters subscribed", func() bool { return numSub(t, admin, "simba:{"+mutex+"}") == 2 })
			r.mu.Lock()
			tokens := len(r.tokens)
			before := r.tokens[tokens-1]
			r.mu.Unlock()

			require.NoError(t, srv.Kill())
			killed := time.Now()
			if delayed {
				await(t, &r.sig, "the owner to stop believing while the server is down", func() bool { return r.releases(owner) == 1 })
				t.Logf("owner stopped believing %v after the kill (ttl %v)", time.Since(killed), testTTL)
				phase := time.NewTimer(time.Until(killed.Add(testTTL + testTransition)))
				<-phase.C
			}
			require.NoError(t, srv.Start(ctx))
			restarted := time.Now()

			await(t, &r.sig, "an owner after the restart", func() bool {
				r.mu.Lock()
				n := len(r.tokens)
				r.mu.Unlock()
				return n > tokens && r.holder() != ""
			})
			t.Logf("new owner %s %v after the restart; the longest overlap of beliefs was %v", r.holder(), time.Since(restarted), r.overlap())
			require.NoError(t, r.tokenCheck())
			r.mu.Lock()
			after := r.tokens[len(r.tokens)-1]
			r.mu.Unlock()
			assert.Greater(t, after, before, "the token after the restart")
			if delayed {
				assert.Zero(t, r.overlap(), "no overlap when the server comes back after every lease lapsed")
			} else {
				assert.Less(t, r.overlap(), testTTL+time.Second, "belief ends by the local TTL end")
			}
			for _, b := range backends {
				assert.Zero(t, b.TokenRegressions())
			}
			// Every backend's subscription connection reconnected and subscribed again.
			poll(t, "the subscriptions after the restart", func() bool { return numSub(t, admin, "simba:{"+mutex+"}") >= 2 })
		})
	}
}

// The subscription connection comes back after it is killed and after the server
// restarts: the waiter is woken once its channel is subscribed again (it may have missed a
// message) and a release message reaches it afterwards.
func TestSubscriptionSurvivesReconnect(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "jvm")
	var w wakes
	c := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "go", &w)
	handOver := func(what string) {
		t.Helper()
		n := w.count()
		require.Equal(t, "go", jvm.release())
		w.waitMore(t, n, "the release message "+what)
		rec, err := c.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "go", rec.Owner)
		require.NoError(t, c.Release(ctx))
	}
	require.True(t, jvm.acquire())
	rec, err := c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	w.waitMore(t, 0, "the first subscription")

	n := w.count()
	require.NoError(t, admin.Do(ctx, "client", "kill", "type", "pubsub").Err())
	w.waitMore(t, n, "the wake-up after subscribing on the new connection")
	rec, err = c.Acquire(ctx) // the re-check the wake-up asks for: still waiting
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	handOver("after the connection was killed")

	// A release published while the connection is being replaced is either heard, or made
	// up for by the wake-up after subscribing again.
	require.True(t, jvm.acquire())
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	n = w.count()
	require.NoError(t, admin.Do(ctx, "client", "kill", "type", "pubsub").Err())
	require.Equal(t, "go", jvm.release())
	w.waitMore(t, n, "a wake-up after the release")
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "go", rec.Owner)
	require.NoError(t, c.Release(ctx))

	require.True(t, jvm.acquire())
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	n = w.count()
	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Start(ctx))
	w.waitMore(t, n, "the wake-up after subscribing on the restarted server")
	require.True(t, jvm.acquire(), "the restart lost the foreign lease")
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner, "and the waiter queues again")
	handOver("after the server restarted")
}

// A subscription connection that stops answering (the server is stalled) is pinged and,
// when the answer does not come, replaced; afterwards one connection carries the channels
// again and messages arrive.
func TestSubscriptionSurvivesStall(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	jvm := newForeign(t, admin, mutex, "jvm")
	client, name := namedClient(t, srv.Addr())
	b := newBackend(t, client, redis.WithPingInterval(100*time.Millisecond), redis.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	var w wakes
	c := contend(t, b, mutex, "go", &w)
	require.True(t, jvm.acquire())
	rec, err := c.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, jvm.id, rec.Owner)
	w.waitMore(t, 0, "the first subscription")

	n := w.count()
	require.NoError(t, srv.Pause())
	stall := time.NewTimer(time.Second) // ten ping intervals: the connection is replaced
	<-stall.C
	require.NoError(t, srv.Resume())
	w.waitMore(t, n, "the wake-up after subscribing again")
	poll(t, "one subscription connection", func() bool {
		_, subscribed := clientsNamed(t, admin, name)
		return subscribed == 1
	})
	n = w.count()
	require.Equal(t, "go", jvm.release())
	w.waitMore(t, n, "the release message after the stall")
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "go", rec.Owner)
	require.NoError(t, c.Release(ctx))
}

// redis-server stalls (SIGSTOP) for 2 (ttl + transition). The owner stops believing by its
// local TTL end although no call returns; a Stop during the stall returns within about the
// call timeout, having delivered OnReleased; after the server resumes, the lapsed key lets
// one contender acquire, and nobody overlapped.
func TestServerStall(t *testing.T) {
	srv := ownServer(t)
	mutex := uniqueName(t, "m")
	r := newRecorder()
	const callTimeout = 250 * time.Millisecond
	var services []*simba.Service
	for i := range 3 {
		b := newBackend(t, newClient(t, srv.Addr()))
		services = append(services, r.service(t, b, mutex, "c"+strconv.Itoa(i), simba.WithCallTimeout(callTimeout)))
	}
	await(t, &r.sig, "a first owner", func() bool { return r.holder() != "" })
	owner := r.holder()
	ownerIndex, _ := strconv.Atoi(owner[1:])

	require.NoError(t, srv.Pause())
	stalled := time.Now()
	t.Cleanup(func() { _ = srv.Resume() })
	await(t, &r.sig, "the owner to stop believing during the stall", func() bool { return r.releases(owner) == 1 })
	t.Logf("the owner stopped believing %v into the stall (ttl %v)", time.Since(stalled), testTTL)

	stopper := services[(ownerIndex+1)%3]
	began := time.Now()
	require.Error(t, stopper.Stop(t.Context()), "Stop reports that the store was not told")
	took := time.Since(began)
	t.Logf("Stop during the stall took %v (call timeout %v)", took, callTimeout)
	assert.Less(t, took, callTimeout+time.Second, "Stop is bounded by the call timeout")

	phase := time.NewTimer(time.Until(stalled.Add(2 * (testTTL + testTransition))))
	<-phase.C
	require.NoError(t, srv.Resume())
	resumed := time.Now()
	await(t, &r.sig, "an owner after the stall", func() bool {
		h := r.holder()
		return h != "" && (h != owner || r.acquisitions(owner) == 2)
	})
	t.Logf("%s acquired %v after the server resumed", r.holder(), time.Since(resumed))
	assert.Zero(t, r.overlap())
	require.NoError(t, r.tokenCheck())
}
