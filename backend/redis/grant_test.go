package redis_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/options"
)

// registration returns a waiter's registration: nonce, server ms, lease ms, ttl ms, until
// ms, heard, and the owner value if it has one; ok false when there is none.
func registration(t testing.TB, admin goredis.UniversalClient, mutex, id string) (fields []string, ok bool) {
	t.Helper()
	v, err := admin.HGet(t.Context(), "simba:{"+mutex+"}:grant", id).Result()
	if err == goredis.Nil {
		return nil, false
	}
	require.NoError(t, err)
	fields = strings.SplitN(v, "@@", 7)
	require.GreaterOrEqual(t, len(fields), 6, "registration %q", v)
	return fields, true
}

// inbox subscribes admin to the channel of contender id of mutex.
func inbox(t testing.TB, admin *goredis.Client, mutex, id string) *goredis.PubSub {
	t.Helper()
	ps := admin.Subscribe(t.Context(), "simba:{"+mutex+"}:"+id)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(t.Context()) // confirmed
	require.NoError(t, err)
	return ps
}

func receive(t testing.TB, ps *goredis.PubSub) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventDeadline)
	defer cancel()
	msg, err := ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	return msg.Payload
}

// The release hands the mutex straight to the oldest waiter that registered for a grant:
// the owner key names it, and the waiter hears the token on its own channel.
func TestReleaseGrantsTheOldestWaiter(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	opts := []simba.Option{simba.WithTTL(3 * time.Second), simba.WithTransition(2 * time.Second)}
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("holder"))...)
	require.NoError(t, err)
	waiter, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("waiter"))...)
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)
	in := inbox(t, admin, mutex, "waiter")

	type result struct {
		lease *simba.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(ctx)
		got <- result{l, err}
	}()
	var reg []string
	poll(t, "the waiter's registration", func() bool {
		var ok bool
		reg, ok = registration(t, admin, mutex, "waiter")
		return ok
	})
	assert.Regexp(t, `^[A-Z2-7]{8}-[1-9][0-9]*$`, reg[0], "nonce")
	now, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	at, err := strconv.ParseInt(reg[1], 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, now.UnixMilli(), at, 5000, "registered at server ms")
	assert.Equal(t, []string{"5000", "3000"}, reg[2:4], "lease and ttl in ms")

	require.NoError(t, lease.Release(ctx))
	msg := receive(t, in)
	parts := strings.Split(msg, "@@")
	require.Len(t, parts, 4, msg)
	assert.Equal(t, "granted", parts[0])
	// The waiter's latest registration: it may have attempted again since the one read
	// above (a confirmed subscription makes it try once more).
	prefix, _, _ := strings.Cut(reg[0], "-")
	assert.True(t, strings.HasPrefix(parts[1], prefix+"-"), "nonce %q of registration %q", parts[1], reg[0])
	assert.Equal(t, "holder", parts[3], "the releaser")
	var r result
	select {
	case r = <-got:
	case <-time.After(eventDeadline):
		t.Fatal("the waiter did not acquire")
	}
	require.NoError(t, r.err)
	assert.Equal(t, parts[2], strconv.FormatUint(r.lease.Token(), 10), "the token of the grant")
	assert.Greater(t, r.lease.Token(), lease.Token())
	assert.Equal(t, "waiter", admin.Get(ctx, "simba:{"+mutex+"}").Val())
	pttl := admin.PTTL(ctx, "simba:{"+mutex+"}").Val()
	assert.True(t, pttl > 0 && pttl <= 5*time.Second, "expires a lease after the registration, got %v", pttl)
	_, ok := registration(t, admin, mutex, "waiter")
	assert.False(t, ok, "the grant used the registration up")

	require.NoError(t, r.lease.Release(ctx))
	assert.Zero(t, admin.Exists(ctx, "simba:{"+mutex+"}", "simba:{"+mutex+"}:contender", "simba:{"+mutex+"}:grant").Val())
}

// A registration too old to leave a tenth of the waiter's ttl gets JVM Simba's release
// message instead, and the waiter acquires by contending.
func TestStaleRegistrationGetsReleaseMessage(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex,
		simba.WithTTL(30*time.Second), simba.WithTransition(time.Second), simba.WithContenderID("holder"))
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)
	in := inbox(t, admin, mutex, "waiter")
	r := newRecorder()
	r.service(t, newBackend(t, newClient(t, srv.Addr())), mutex, "waiter") // ttl 1 s; next attempt after 31 s
	poll(t, "the waiter's registration to be older than 9/10 of its ttl", func() bool {
		reg, ok := registration(t, admin, mutex, "waiter")
		if !ok {
			return false
		}
		at, err := strconv.ParseInt(reg[1], 10, 64)
		require.NoError(t, err)
		now, err := admin.Time(ctx).Result()
		require.NoError(t, err)
		return now.UnixMilli()-at > 950
	})
	require.NoError(t, lease.Release(ctx))
	assert.Equal(t, "released@@holder", receive(t, in))
	await(t, &r.sig, "the waiter to acquire", func() bool { return r.acquisitions("waiter") == 1 })
}

// A waiter that gave up is not granted the mutex: its release took its registration away,
// and the next waiter gets the grant.
func TestWaiterThatLeftIsSkipped(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	locker := func(id string) *simba.Locker {
		l, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, simba.WithContenderID(id))
		require.NoError(t, err)
		return l
	}
	lease, err := locker("holder").Acquire(ctx)
	require.NoError(t, err)
	quitter := locker("quitter")
	qctx, quit := context.WithCancel(ctx)
	quitErr := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx)
		quitErr <- err
	}()
	poll(t, "the quitter's registration", func() bool { _, ok := registration(t, admin, mutex, "quitter"); return ok })
	next := make(chan *simba.Lease, 1)
	go func() {
		l, err := locker("next").Acquire(ctx)
		assert.NoError(t, err)
		next <- l
	}()
	poll(t, "the next waiter's registration", func() bool { _, ok := registration(t, admin, mutex, "next"); return ok })
	quit()
	require.ErrorIs(t, <-quitErr, context.Canceled)
	// The quitter's Acquire returned at once; its release follows in the background.
	poll(t, "leaving removes the registration", func() bool { _, ok := registration(t, admin, mutex, "quitter"); return !ok })
	assert.ErrorIs(t, admin.ZScore(ctx, "simba:{"+mutex+"}:contender", "quitter").Err(), goredis.Nil)

	require.NoError(t, lease.Release(ctx))
	select {
	case l := <-next:
		require.NotNil(t, l)
		require.NoError(t, l.Release(ctx))
	case <-time.After(eventDeadline):
		t.Fatal("the next waiter did not acquire")
	}
}

// Lockers that take turns are served first come, first served: each release hands the
// mutex to the waiter that has waited longest, so a releaser that asks again at once
// queues behind the others instead of taking the mutex back.
func TestGrantsAreFair(t *testing.T) {
	srv := server(t)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	const lockers, sections = 8, 400
	var (
		inside, overlaps atomic.Int32
		total            atomic.Int32
		served           atomic.Uint32 // bit i: locker i has had a turn
		counts           [lockers]int
		wg               sync.WaitGroup
	)
	// Warm up first: a backend's first start checks its server and dials; a locker that
	// starts while the others still do takes turns alone.
	all := make([]*simba.Locker, lockers)
	for i := range all {
		l, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, simba.WithContenderID("locker"+strconv.Itoa(i)))
		require.NoError(t, err)
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		all[i] = l
	}
	for i, l := range all {
		wg.Go(func() {
			for total.Add(1) <= sections {
				actx, cancel := context.WithTimeout(ctx, eventDeadline)
				lease, err := l.Acquire(actx)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				// Turns are counted once every locker has had one: until then, the first
				// lockers to run take turns among themselves.
				if served.Or(1<<i)|1<<i == 1<<lockers-1 {
					counts[i]++
				}
				inside.Add(-1)
				assert.NoError(t, lease.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.Zero(t, overlaps.Load())
	lo, hi := counts[0], counts[0]
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	t.Logf("sections per locker: %v", counts)
	// Turns: the counts differ by the sections claimed as the run ends, and by the turns a
	// locker missed because it was not yet waiting again when they came (on a loaded
	// machine its goroutine may wait for a core between Release and Acquire: 44 against 51
	// was seen under CI load). Without grants, a woken waiter races the releaser's next
	// attempt and often loses its place: min/max was 0.6 here.
	assert.GreaterOrEqual(t, float64(lo)/float64(hi), 0.8, "not served in turn: %v", counts)
}
