package redis_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After a failover to a replica that had not received the latest hand-over, the owner key
// and the token key name the former owner again, with its old token. When that contender
// starts a new contention (issue 16, item 2: it had stopped, and contends again), it must
// begin a new tenure with a token above every token the failover lost (on one server
// clock: the clock has moved on since), not resume the old tenure's, which is smaller
// than the lost successor's: the successor may still believe, and the resource must
// fence its late writes out.
func TestOwnKeyBroughtBackBeginsANewTenure(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}"

	first := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "first", &wakes{})
	rec, err := first.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "first", rec.Owner)
	lost := rec.Token
	// What the replica holds: the owner key and the token key of the first tenure.
	ttl := admin.PTTL(ctx, key).Val()
	fence := admin.Get(ctx, key+":token").Val()
	require.NoError(t, first.Release(ctx))

	// The successor's tenure, which the failover loses.
	second := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "second", &wakes{})
	rec, err = second.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "second", rec.Owner)
	successor := rec.Token
	require.Greater(t, successor, lost)

	// The failover: the promoted replica has the first tenure's keys.
	require.NoError(t, admin.Set(ctx, key, "first", ttl).Err())
	require.NoError(t, admin.Set(ctx, key+":token", fence, ttl).Err())

	again := contend(t, newBackend(t, newClient(t, srv.Addr())), mutex, "first", &wakes{})
	rec, err = again.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "first", rec.Owner)
	assert.Greater(t, rec.Token, successor, "the new contention resumed the old tenure's token %d (the successor's was %d)", rec.Token, successor)
	assert.Regexp(t, "^"+strconv.FormatUint(rec.Token, 10)+"@@[0-9]+@@first$", admin.Get(ctx, key+":token").Val(), "the token key records the new token")
}
