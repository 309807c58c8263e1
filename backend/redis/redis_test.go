package redis_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/options"
)

// unreachable returns a client of a loopback port nobody listens on: a test that expects
// no I/O fails loudly if there is any.
func unreachable(t testing.TB) *goredis.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	opt := clientOptions(addr)
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestNewRejectsBadInput(t *testing.T) {
	client := unreachable(t)
	cases := []struct {
		name   string
		client goredis.UniversalClient
		opts   []redis.Option
		field  string
	}{
		{"nil client", nil, nil, "client"},
		{"nil *Client", (*goredis.Client)(nil), nil, "client"},
		{"nil *ClusterClient", (*goredis.ClusterClient)(nil), nil, "client"},
		{"nil logger", client, []redis.Option{redis.WithLogger(nil)}, "logger"},
		{"zero ping interval", client, []redis.Option{redis.WithPingInterval(0)}, "ping interval"},
		{"short ping interval", client, []redis.Option{redis.WithPingInterval(99 * time.Millisecond)}, "ping interval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := redis.New(c.client, c.opts...)
			assert.Nil(t, b)
			require.ErrorIs(t, err, simba.ErrInvalidArgument)
			var ae *simba.ArgumentError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, c.field, ae.Field)
		})
	}
	b, err := redis.New(client, redis.WithPingInterval(redis.MinPingInterval), nil)
	require.NoError(t, err, "the minimum ping interval and a nil option are accepted")
	require.NoError(t, b.Close())
}

// Names and IDs that would break the key layout or the reply and message format are
// rejected by every constructor, before any I/O.
func TestValidation(t *testing.T) {
	b := newBackend(t, unreachable(t))
	long := strings.Repeat("m", redis.MaxMutexLength)
	longID := strings.Repeat("c", redis.MaxContenderIDLength)
	cases := []struct {
		mutex, id string
		field     string // "" when valid
	}{
		{"orders", "0:42@10.0.0.1", ""},
		{long, longID, ""},
		{"a:b", "@first", ""},
		{"a-ß-ü", "a@b@c", ""},
		{"a{b", "c", "mutex"},
		{"}ab", "c", "mutex"}, // the hash tag would be empty: keys in different slots
		{"ab}", "c", "mutex"},
		{"{ab}", "c", "mutex"},
		{long + "m", "c", "mutex"},
		{"m", "a@@b", "contender ID"},
		{"m", "@@", "contender ID"},
		{"m", "@@a", "contender ID"},
		{"m", "ab@", "contender ID"},
		{"m", longID + "c", "contender ID"},
		// simba's own rules, checked before the backend's
		{"", "c", "mutex"},
		{" m", "c", "mutex"},
		{"m\x00", "c", "mutex"},
		{"m", "", "contender ID"},
		{"m", "c\n", "contender ID"},
	}
	for _, c := range cases {
		name := c.mutex + "|" + c.id
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if c.field == "" {
					assert.NoError(t, err, what)
					return
				}
				require.ErrorIs(t, err, simba.ErrInvalidArgument, what)
				var ae *simba.ArgumentError
				require.ErrorAs(t, err, &ae, what)
				assert.Equal(t, c.field, ae.Field, what)
			}
			_, err := simba.NewLocker(b, c.mutex, simba.WithContenderID(c.id))
			check("NewLocker", err)
			_, err = simba.NewService(b, simba.ContenderFuncs{MutexName: c.mutex, ID: c.id})
			check("NewService", err)
			if c.field == "mutex" && c.mutex != "" && strings.TrimSpace(c.mutex) == c.mutex && !strings.ContainsRune(c.mutex, 0) {
				_, err = simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: c.mutex})
				check("NewRetrievalService", err)
			}
			if c.field != "" && simba.ValidateMutex(c.mutex) == nil && simba.ValidateContenderID(c.id) == nil {
				// A backend used without a service checks its own rules too.
				_, err = b.StartContend(t.Context(), backend.Participant{Mutex: c.mutex, ContenderID: c.id, TTL: time.Second})
				check("StartContend", err)
			}
		})
	}
}

// Close frees what the backend made and nothing else: the user's client stays usable.
func TestCloseLeavesTheClientOpen(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	b, err := redis.New(client)
	require.NoError(t, err)
	mutex := uniqueName(t, "m")
	var w wakes
	c := contend(t, b, mutex, "c", &w)
	_, err = c.Acquire(t.Context())
	require.NoError(t, err)

	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")
	require.NoError(t, client.Ping(t.Context()).Err(), "the client must stay open")

	_, err = b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "d", TTL: time.Second})
	assert.ErrorIs(t, err, simba.ErrClosed)
	_, err = c.Acquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrClosed, "contentions of a closed backend fail")
	assert.ErrorIs(t, c.Release(t.Context()), simba.ErrClosed)
	assert.NoError(t, c.StopContend(t.Context()), "StopContend frees local state after Close")

	l, err := simba.NewLocker(b, mutex)
	require.NoError(t, err)
	_, err = l.Acquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrNotAcquired)
	assert.ErrorIs(t, err, simba.ErrClosed)
	assert.Equal(t, "c", client.Get(t.Context(), "simba:{"+mutex+"}").Val(), "Close released nothing")
}

// Store errors are wrapped with their cause; a missed deadline also matches the context's
// error; redis.Nil never escapes.
func TestStoreErrors(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		b := newBackend(t, unreachable(t))
		_, err := b.StartContend(t.Context(), backend.Participant{Mutex: "m", ContenderID: "c", TTL: testTTL})
		var op *net.OpError
		assert.ErrorAs(t, err, &op, "the dial error is kept")
		assert.ErrorIs(t, err, redis.ErrUnreachable)
		assert.NotErrorIs(t, err, simba.ErrInvalidArgument)
	})
	t.Run("deadline", func(t *testing.T) {
		srv := ownServer(t)
		b := newBackend(t, newClient(t, srv.Addr()))
		var w wakes
		c := contend(t, b, uniqueName(t, "m"), "c", &w)
		_, err := c.Acquire(t.Context()) // opens a connection
		require.NoError(t, err)
		require.NoError(t, srv.Pause())
		t.Cleanup(func() { _ = srv.Resume() })
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err = c.Acquire(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		oneLine(t, err)
		require.NoError(t, srv.Resume())
	})
	t.Run("foreign data", func(t *testing.T) {
		srv := server(t)
		admin := newClient(t, srv.Addr())
		b := newBackend(t, newClient(t, srv.Addr()))
		ctx := t.Context()

		mutex := uniqueName(t, "m")
		require.NoError(t, admin.HSet(ctx, "simba:{"+mutex+"}", "not", "a string").Err())
		var w wakes
		_, err := contend(t, b, mutex, "c", &w).Acquire(ctx)
		require.Error(t, err, "a hash under the owner key")
		assert.NotErrorIs(t, err, goredis.Nil)

		// A hash under the token key, which MGET reads as nothing: refused too, and kept.
		mutex = uniqueName(t, "m")
		require.NoError(t, admin.HSet(ctx, "simba:{"+mutex+"}:token", "not", "a string").Err())
		_, err = contend(t, b, mutex, "c", &w).Acquire(ctx)
		assert.ErrorIs(t, err, simba.ErrRefused, "a hash under the token key")
		assert.Equal(t, "hash", admin.Type(ctx, "simba:{"+mutex+"}:token").Val(), "the other program's data")
		assert.Zero(t, admin.Exists(ctx, "simba:{"+mutex+"}").Val(), "no owner key written")

		mutex = uniqueName(t, "m")
		require.NoError(t, admin.Set(ctx, "simba:{"+mutex+"}", "x", time.Minute).Err())
		require.NoError(t, admin.Set(ctx, "simba:{"+mutex+"}:token", "not a number@@0@@x", time.Minute).Err())
		_, err = contend(t, b, mutex, "c", &w).Acquire(ctx)
		assert.ErrorIs(t, err, redis.ErrUnexpectedReply)
		oneLine(t, err)
		assert.NotContains(t, err.Error(), mutex, "simba names the mutex")
	})
}

// The stored data is JVM Simba's: the owner key with its PX, the acquisition message, and
// the waiting set with scores in server seconds.
func TestStorageFormat(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	events := admin.Subscribe(ctx, key)
	defer events.Close()
	_, err := events.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)

	opts := []simba.Option{simba.WithTTL(3 * time.Second), simba.WithTransition(2 * time.Second)}
	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("holder@10.0.0.1"))...)
	require.NoError(t, err)
	lease, err := holder.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "holder@10.0.0.1", admin.Get(ctx, key).Val())
	pttl := admin.PTTL(ctx, key).Val()
	assert.True(t, pttl > 0 && pttl <= 5*time.Second, "PX is ttl + transition, got %v", pttl)
	msg, err := events.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Equal(t, "acquired@@holder@10.0.0.1", msg.Payload)

	waiter, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("waiter"))...)
	require.NoError(t, err)
	_, err = waiter.TryAcquire(ctx)
	require.ErrorIs(t, err, simba.ErrNotAcquired)
	// TryAcquire stopped again, and a non-owner's release leaves the waiting set.
	assert.Zero(t, admin.ZCard(ctx, key+":contender").Val())

	// A service that keeps waiting stays in the set, scored in server seconds (with
	// microseconds), and registers for a grant.
	s, err := simba.NewService(newBackend(t, newClient(t, srv.Addr())), simba.ContenderFuncs{MutexName: mutex, ID: "service"}, options.As[simba.ServiceOption](opts)...)
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	defer s.Close()
	var score float64
	// The script queues the service before the service has applied its answer.
	poll(t, "the waiting service in the waiting set, told of the owner", func() bool {
		score, err = admin.ZScore(ctx, key+":contender", "service").Result()
		return err == nil && s.Owner().ID != ""
	})
	now, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(now.UnixMicro())/1e6, score, 5)
	_, registered := registration(t, admin, mutex, "service")
	assert.True(t, registered)
	o := s.Owner()
	assert.Equal(t, "holder@10.0.0.1", o.ID)
	assert.Equal(t, 2*time.Second, o.TransitionAt.Sub(o.TTLAt), "ttlAt is transitionAt minus the transition")
	assert.Equal(t, lease.Token(), o.Token, "a waiter sees the owner's token")

	require.NoError(t, lease.Release(ctx))
	require.NoError(t, s.Stop(ctx))
	assert.Zero(t, admin.Exists(ctx, key, key+":contender", key+":grant").Val())
}

// lossy is a go-redis hook that lets the next armed script calls reach the server and
// then drops their replies, as a connection that fails after sending does.
type lossy struct{ armed atomic.Int32 }

var errLost = errors.New("test: reply lost")

func (l *lossy) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (l *lossy) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		script := cmd.Name() == "fcall" || cmd.Name() == "evalsha" || cmd.Name() == "eval" // not the connection's HELLO
		if err == nil && script && l.armed.Add(-1) >= 0 {
			cmd.SetErr(errLost)
			return errLost
		}
		return err
	}
}

func (l *lossy) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// Retried requests are idempotent per contender: an acquire, renewal or release whose
// reply was lost, retried, has the effect of one.
func TestRetriedRequestsAreIdempotent(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	client := newClient(t, srv.Addr())
	hook := &lossy{}
	client.AddHook(hook)
	b := newBackend(t, client)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	var w wakes
	c := contend(t, b, mutex, "c", &w)

	hook.armed.Store(1)
	_, err := c.Acquire(ctx)
	require.ErrorIs(t, err, errLost)
	require.Equal(t, "c", admin.Get(ctx, key).Val(), "the lost acquire went through")
	rec, err := c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "c", rec.Owner, "the retry finds the contender owning the mutex")
	assert.NotZero(t, rec.Token)
	assert.Equal(t, testTTL, rec.TTL)
	assert.Equal(t, testTTL+testTransition, rec.Transition)
	assert.Zero(t, admin.Exists(ctx, key+":contender").Val(), "the retry did not queue the owner as a waiter")
	token := rec.Token

	hook.armed.Store(1)
	_, err = c.Acquire(ctx) // a renewal now
	require.ErrorIs(t, err, errLost)
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "c", rec.Owner)
	assert.Equal(t, token, rec.Token, "the tenure goes on")

	other := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "other", &w)
	hook.armed.Store(1)
	require.ErrorIs(t, c.Release(ctx), errLost)
	assert.Zero(t, admin.Exists(ctx, key).Val(), "the lost release went through")
	rec, err = other.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "other", rec.Owner)
	require.NoError(t, c.Release(ctx), "the retried release")
	assert.Equal(t, "other", admin.Get(ctx, key).Val(), "a retried release leaves the next owner alone")
	require.NoError(t, other.Release(ctx))
}

// An uncontended acquisition does not subscribe. A contender that has to wait subscribes
// its own channel and the mutex's, on the one subscription connection of its backend, and
// is woken once the subscription is confirmed; Stop unsubscribes; Close closes the
// connection.
func TestSubscriptions(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	client, name := namedClient(t, srv.Addr())
	b, err := redis.New(client)
	require.NoError(t, err)
	defer b.Close()
	ctx := t.Context()

	// The owners are contentions without a service: a service's first renewal, which the
	// renewal grid may bring at any moment, subscribes simba:{mutex}.
	var mutexes []string
	var owners []backend.LeaseContention
	for i := range 3 {
		mutexes = append(mutexes, uniqueName(t, "m"))
		c := contend(t, b, mutexes[i], "c"+strconv.Itoa(i), &wakes{})
		rec, err := c.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "c"+strconv.Itoa(i), rec.Owner)
		owners = append(owners, c)
	}
	_, subscribed := clientsNamed(t, admin, name)
	assert.Zero(t, subscribed, "uncontended acquisitions subscribe nothing")

	// Waiters for each of the three mutexes on another backend: one connection carries all.
	waiterClient, waiterName := namedClient(t, srv.Addr())
	wb, err := redis.New(waiterClient)
	require.NoError(t, err)
	var waiting []*wakes
	var contentions []backend.LeaseContention
	for i, mutex := range mutexes {
		w := &wakes{}
		c := contend(t, wb, mutex, "w"+strconv.Itoa(i), w)
		rec, err := c.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "c"+strconv.Itoa(i), rec.Owner)
		waiting = append(waiting, w)
		contentions = append(contentions, c)
	}
	for i, w := range waiting {
		w.waitMore(t, 0, "the wake-up after the subscription of waiter "+strconv.Itoa(i))
		assert.EqualValues(t, 1, numSub(t, admin, "simba:{"+mutexes[i]+"}:w"+strconv.Itoa(i)))
		assert.EqualValues(t, 1, numSub(t, admin, "simba:{"+mutexes[i]+"}"))
	}
	conns, subscribed := clientsNamed(t, admin, waiterName)
	assert.Equal(t, 1, subscribed, "one subscription connection for all contentions of a backend")
	assert.LessOrEqual(t, conns, 2, "the subscription connection and the pool's")

	// A release wakes the oldest waiter through its channel.
	before := waiting[0].count()
	require.NoError(t, owners[0].Release(ctx))
	waiting[0].waitMore(t, before, "the release message")
	rec, err := contentions[0].Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "w0", rec.Owner)
	require.NoError(t, contentions[0].Release(ctx))

	for i, c := range contentions {
		require.NoError(t, c.Release(ctx))
		require.NoError(t, c.StopContend(ctx))
		poll(t, "Stop to unsubscribe", func() bool {
			return numSub(t, admin, "simba:{"+mutexes[i]+"}:w"+strconv.Itoa(i)) == 0 &&
				numSub(t, admin, "simba:{"+mutexes[i]+"}") == 0
		})
	}
	conns, subscribed = clientsNamed(t, admin, waiterName)
	assert.Zero(t, subscribed)
	assert.LessOrEqual(t, conns, 2, "the connection stays open for the backend's next waiter")
	require.NoError(t, wb.Close())
	poll(t, "the subscription connection to close", func() bool {
		conns, _ := clientsNamed(t, admin, waiterName)
		return conns <= 1
	})
	for _, c := range owners[1:] {
		require.NoError(t, c.Release(ctx))
	}
}

// Tokens stay the same across renewals, increase with every tenure, and keep increasing
// when the data is lost as in a restart without persistence. An owner that no Go
// contender started (a JVM contender) has token 0.
func TestTokens(t *testing.T) {
	srv := ownServer(t) // FLUSHALL below
	admin := newClient(t, srv.Addr())
	b := newBackend(t, newClient(t, srv.Addr()))
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	var w wakes
	c := contend(t, b, mutex, "c", &w)

	var last uint64
	for tenure := range 3 {
		rec, err := c.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "c", rec.Owner)
		assert.Greater(t, rec.Token, last, "tenure %d", tenure)
		for range 3 {
			again, err := c.Acquire(ctx)
			require.NoError(t, err)
			assert.Equal(t, rec.Token, again.Token, "renewals keep the token")
		}
		last = rec.Token
		if tenure == 1 {
			require.NoError(t, admin.FlushAll(ctx).Err(), "lose everything, as a restart without persistence does")
			rec, err := c.Acquire(ctx)
			require.NoError(t, err)
			assert.Empty(t, rec.Owner, "the owner's renewal learns that its tenure ended")
		} else {
			require.NoError(t, c.Release(ctx))
		}
	}
	now, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(now.UnixMicro()), float64(last), float64(time.Minute.Microseconds()), "tokens come from the server clock in µs")

	// Tenures begun within one microsecond still get increasing tokens: a token from the
	// future stands for that (or for a server clock that stepped back a little).
	require.NoError(t, c.Release(ctx))
	future := now.Add(time.Hour).UnixMicro()
	require.NoError(t, admin.Set(ctx, "simba:{"+mutex+"}:token", strconv.FormatInt(future, 10)+"@@0@@x", time.Minute).Err())
	rec, err := c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(future)+1, rec.Token)
	require.NoError(t, c.Release(ctx))

	// A foreign owner.
	require.NoError(t, admin.Set(ctx, "simba:{"+mutex+"}", "jvm", time.Minute).Err())
	rec, err = c.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, "jvm", rec.Owner)
	assert.Zero(t, rec.Token)
	assert.Zero(t, b.TokenRegressions())
}

// A token smaller than one seen before is counted and logged, not silent.
func TestTokenRegressionIsDetected(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	owner := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "owner", &wakes{})
	wb := newBackend(t, newClient(t, srv.Addr()))
	waiter := contend(t, wb, mutex, "waiter", &wakes{})

	rec, err := owner.Acquire(ctx)
	require.NoError(t, err)
	// The server's clock runs an hour ahead while the owner starts a tenure...
	require.NoError(t, owner.Release(ctx))
	require.NoError(t, admin.Set(ctx, "simba:{"+mutex+"}:token", strconv.FormatUint(rec.Token+uint64(time.Hour.Microseconds()), 10)+"@@0@@owner", time.Minute).Err())
	rec, err = owner.Acquire(ctx)
	require.NoError(t, err)
	seen, err := waiter.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, rec.Token, seen.Token)
	// ... then the data is lost and the clock is right again.
	require.NoError(t, admin.Del(ctx, "simba:{"+mutex+"}", "simba:{"+mutex+"}:token").Err())
	rec, err = waiter.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "waiter", rec.Owner)
	assert.Less(t, rec.Token, seen.Token)
	assert.EqualValues(t, 1, wb.TokenRegressions())
	require.NoError(t, waiter.Release(ctx))
}

// A waiter is told how long the owner key has left, also after the owner renewed: the
// token key records when the key expires, and a renewal moves that along with the key.
func TestWaiterSeesTheOwnersRemainingLease(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	owner := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "owner", &wakes{})
	waiter := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "waiter", &wakes{})
	_, err := owner.Acquire(ctx)
	require.NoError(t, err)
	began := admin.Time(ctx).Val()
	poll(t, "half a second of the server's clock", func() bool { return admin.Time(ctx).Val().Sub(began) > 500*time.Millisecond })
	rec, err := owner.Acquire(ctx) // renews
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	rec, err = waiter.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	pttl := admin.PTTL(ctx, key).Val()
	assert.InDelta(t, pttl.Seconds(), rec.Transition.Seconds(), 0.2, "the owner key has %v left", pttl)
	assert.Equal(t, rec.Transition-testTransition, rec.TTL)
}
