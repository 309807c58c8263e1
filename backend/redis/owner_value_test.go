package redis_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/options"
)

// olderFence is how versions before owner values read the token key (prelude.lua's
// splitFence): token, expiry, and the rest as the owner's ID.
var olderFence = regexp.MustCompile(`^([^@]*)@@(\d*)@@(.*)$`)

// The owner value is a fourth field of the token key, "<token>@@<expires>@@<owner>@@<value>",
// written only for a tenure that has one: JVM Simba's keys and messages do not change, a
// tenure without a value keeps the older format, and an older version still reads the
// token of one with a value. A waiter's registration carries its value, so that a release
// that grants it the mutex writes the waiter's value, not its own.
func TestStorageFormatOwnerValue(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"
	opts := []simba.Option{simba.WithTTL(3 * time.Second), simba.WithTransition(2 * time.Second)}
	lookup := func() simba.Owner {
		o, err := simba.Lookup(ctx, newBackend(t, newClient(t, srv.Addr())), mutex, opts...)
		require.NoError(t, err)
		return o
	}

	plain, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex, options.As[simba.LockerOption](opts, simba.WithContenderID("plain"))...)
	require.NoError(t, err)
	lease, err := plain.Acquire(ctx)
	require.NoError(t, err)
	tok := strconv.FormatUint(lease.Token(), 10)
	assert.Regexp(t, "^"+tok+"@@[0-9]+@@plain$", admin.Get(ctx, key+":token").Val(), "no value: the older format")
	require.NoError(t, lease.Release(ctx))

	holder, err := simba.NewLocker(newBackend(t, newClient(t, srv.Addr())), mutex,
		options.As[simba.LockerOption](opts, simba.WithContenderID("holder@10.0.0.1"), simba.WithOwnerValue("10.0.0.1:8080 v1 @@ {\"a\": 1}"))...)
	require.NoError(t, err)
	lease, err = holder.Acquire(ctx)
	require.NoError(t, err)
	tok = strconv.FormatUint(lease.Token(), 10)
	assert.Equal(t, "holder@10.0.0.1", admin.Get(ctx, key).Val(), "JVM Simba's owner key is the ID alone")
	fence := admin.Get(ctx, key+":token").Val()
	assert.Regexp(t, "^"+tok+`@@[0-9]+@@holder@10\.0\.0\.1@@10\.0\.0\.1:8080 v1 @@ \{"a": 1\}$`, fence)
	if m := olderFence.FindStringSubmatch(fence); assert.NotNil(t, m) {
		assert.Equal(t, tok, m[1], "an older version reads the token, and so keeps tokens increasing")
	}
	o := lookup()
	assert.Equal(t, "holder@10.0.0.1", o.ID)
	assert.Equal(t, lease.Token(), o.Token)
	assert.Equal(t, "10.0.0.1:8080 v1 @@ {\"a\": 1}", o.Value)

	// A waiter registers with its value; the release grants it the mutex and writes it.
	s, err := simba.NewService(newBackend(t, newClient(t, srv.Addr())), simba.ContenderFuncs{MutexName: mutex, ID: "waiter"},
		options.As[simba.ServiceOption](opts, simba.WithOwnerValue("10.0.0.2:8080 v2"))...)
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	defer s.Close()
	var reg string
	poll(t, "the waiting service registered with its value", func() bool {
		reg = admin.HGet(ctx, key+":grant", "waiter").Val()
		return strings.HasSuffix(reg, "@@1@@10.0.0.2:8080 v2") // listening, and its value
	})
	assert.Len(t, strings.Split(reg, "@@"), 7, "registration %q", reg)
	assert.Equal(t, "10.0.0.1:8080 v1 @@ {\"a\": 1}", s.Owner().Value, "a waiter sees the owner's value")
	require.NoError(t, lease.Release(ctx))
	poll(t, "the waiter granted the mutex", s.IsOwner)
	assert.Regexp(t, "^[0-9]+@@[0-9]+@@waiter@@10\\.0\\.0\\.2:8080 v2$", admin.Get(ctx, key+":token").Val())
	o = lookup()
	assert.Equal(t, "waiter", o.ID)
	assert.Equal(t, "10.0.0.2:8080 v2", o.Value)
	assert.Equal(t, "10.0.0.2:8080 v2", s.Owner().Value)
	require.NoError(t, s.Stop(ctx))

	// An older version's token key has no value; a token key of another owner's shows
	// neither its token nor its value.
	require.NoError(t, admin.Set(ctx, key, "old", time.Minute).Err())
	require.NoError(t, admin.Set(ctx, key+":token", "5@@0@@old", time.Minute).Err())
	o = lookup()
	assert.Equal(t, simba.Owner{ID: "old", Token: 5}, simba.Owner{ID: o.ID, Token: o.Token, Value: o.Value})
	require.NoError(t, admin.Set(ctx, key, "jvm", time.Minute).Err())
	require.NoError(t, admin.Set(ctx, key+":token", "6@@0@@holder@@someone's value", time.Minute).Err())
	o = lookup()
	assert.Equal(t, simba.Owner{ID: "jvm"}, simba.Owner{ID: o.ID, Token: o.Token, Value: o.Value})
	require.NoError(t, admin.Del(ctx, key, key+":token").Err())
}

// A Quorum keeps no owner values: one is refused at construction, not dropped.
func TestQuorumRefusesOwnerValue(t *testing.T) {
	q, err := redis.NewQuorum([]goredis.UniversalClient{newClient(t, server(t).Addr())})
	require.NoError(t, err)
	defer q.Close()
	_, err = simba.NewLocker(q, "m", simba.WithOwnerValue("10.0.0.1:8080"))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.ErrorContains(t, err, "keeps none")
	b := newBackend(t, newClient(t, server(t).Addr()))
	_, err = simba.NewSemaphore(b, "s", 2, simba.WithOwnerValue("10.0.0.1:8080"))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "nor does a semaphore")
}
