package redis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
)

// Two tenures of one mutex write through one fence: once the later one has written, the
// earlier one's late write is refused and changes nothing; each may write again.
func TestFencedSetRejectsAnEarlierTenure(t *testing.T) {
	client := newClient(t, server(t).Addr())
	b := newBackend(t, client)
	mutex := uniqueName(t, "m")
	fence, key := "{"+mutex+"}:fence", "{"+mutex+"}:state"
	tokens := make([]uint64, 2)
	for i := range tokens {
		l, err := simba.NewLocker(b, mutex)
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		tokens[i] = lease.Token()
		require.NoError(t, l.Close())
	}
	earlier, later := tokens[0], tokens[1]
	require.Less(t, earlier, later)

	require.NoError(t, redis.FencedSet(t.Context(), client, fence, key, "earlier", 0, earlier))
	require.NoError(t, redis.FencedSet(t.Context(), client, fence, key, "later", time.Minute, later))
	err := redis.FencedSet(t.Context(), client, fence, key, "late", 0, earlier)
	require.ErrorIs(t, err, simba.ErrFencedOut)
	require.Equal(t, "later", client.Get(t.Context(), key).Val())
	require.Positive(t, client.PTTL(t.Context(), key).Val())
	require.NoError(t, redis.FencedSet(t.Context(), client, fence, key, "again", 0, later))
	require.Equal(t, "again", client.Get(t.Context(), key).Val())
	require.Equal(t, -1*time.Nanosecond, client.PTTL(t.Context(), fence).Val(), "the fence must not expire")
}

// Tokens are compared as numbers, not as strings: 9 comes before 10.
func TestFencedSetComparesTokensAsNumbers(t *testing.T) {
	client := newClient(t, server(t).Addr())
	name := uniqueName(t, "f")
	fence, key := "{"+name+"}:fence", "{"+name+"}:state"
	require.NoError(t, redis.FencedSet(t.Context(), client, fence, key, "a", 0, 10))
	require.ErrorIs(t, redis.FencedSet(t.Context(), client, fence, key, "b", 0, 9), simba.ErrFencedOut)
	require.NoError(t, redis.FencedSet(t.Context(), client, fence, key, "c", 0, 18446744073709551615))
	require.ErrorIs(t, redis.FencedSet(t.Context(), client, fence, key, "d", 0, 18446744073709551614), simba.ErrFencedOut)
	require.Equal(t, "c", client.Get(t.Context(), key).Val())
}

func TestFencedSetRejectsBadInput(t *testing.T) {
	client := newClient(t, server(t).Addr())
	for name, call := range map[string]func() error{
		"nil client": func() error { return redis.FencedSet(t.Context(), nil, "f", "k", "v", 0, 1) },
		"no fence":   func() error { return redis.FencedSet(t.Context(), client, "", "k", "v", 0, 1) },
		"no key":     func() error { return redis.FencedSet(t.Context(), client, "f", "", "v", 0, 1) },
		"same keys":  func() error { return redis.FencedSet(t.Context(), client, "f", "f", "v", 0, 1) },
		"token 0":    func() error { return redis.FencedSet(t.Context(), client, "f", "k", "v", 0, 0) },
		"ttl < 0":    func() error { return redis.FencedSet(t.Context(), client, "f", "k", "v", -time.Second, 1) },
		"ttl < 1ms":  func() error { return redis.FencedSet(t.Context(), client, "f", "k", "v", time.Microsecond, 1) },
	} {
		err := call()
		if !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalidArgument", name, err)
		}
	}
}
