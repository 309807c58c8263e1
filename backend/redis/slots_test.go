package redis_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
)

// slots returns the slot recorder of a new contention of mutex on its own backend.
func slots(t testing.TB, client goredis.UniversalClient, mutex string) backend.SlotRecorder {
	t.Helper()
	c := contend(t, newBackend(t, client), mutex, uniqueName(t, "c"), &wakes{})
	r, ok := c.(backend.SlotRecorder)
	require.True(t, ok, "a Redis contention records slots")
	return r
}

// A claim is recorded only when it is later than the recorded slot and its token not
// less; a retry of the recorded claim (its answer lost) answers false. The record is
// "<Unix ns>@@<token>" under simba:{mutex}:slot, without expiry.
func TestClaimSlotOrdering(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	r := slots(t, newClient(t, srv.Addr()), mutex)

	last, err := r.LastSlot(ctx)
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last, "no slot recorded yet")

	steps, at := orderedClaims()
	for i, step := range steps {
		got, err := r.ClaimSlot(ctx, step.slot)
		require.NoError(t, err, "claim %d", i)
		assert.Equal(t, step.want, got, "claim %d: %+v", i, step.slot)
	}
	last, err = r.LastSlot(ctx)
	require.NoError(t, err)
	assert.True(t, last.At.Equal(at(time.Hour)), "last slot at %v", last.At)
	assert.Equal(t, uint64(1<<63), last.Token)

	key := "simba:{" + mutex + "}:slot"
	assert.Equal(t, strconv.FormatInt(at(time.Hour).UnixNano(), 10)+"@@9223372036854775808", admin.Get(ctx, key).Val())
	assert.Equal(t, time.Duration(-1), admin.PTTL(ctx, key).Val(), "a slot record does not expire")
	// Beside the mutex's keys, not among them: JVM Simba never reads it.
	assert.Zero(t, admin.Exists(ctx, "simba:{"+mutex+"}", "simba:{"+mutex+"}:token").Val())
}

// claimStep is a claim and whether it is recorded after the ones before it.
type claimStep struct {
	slot backend.Slot
	want bool
}

// orderedClaims returns claims in turn, each recorded or not by the rules of a slot record,
// the last recorded at(time.Hour) with token 1<<63; at gives the instants of the claims.
func orderedClaims() (steps []claimStep, at func(time.Duration) time.Time) {
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 123456789, time.UTC)
	at = func(d time.Duration) time.Time { return t0.Add(d) }
	return []claimStep{
		{backend.Slot{At: at(0), Token: 5}, true},
		{backend.Slot{At: at(0), Token: 5}, false},              // a retry after a lost reply
		{backend.Slot{At: at(0), Token: 6}, false},              // not later
		{backend.Slot{At: at(-time.Minute), Token: 6}, false},   // earlier
		{backend.Slot{At: at(time.Minute), Token: 4}, false},    // a stale tenure's
		{backend.Slot{At: at(time.Nanosecond), Token: 5}, true}, // the same tenure, a nanosecond on
		{backend.Slot{At: at(time.Hour), Token: 1 << 63}, true}, // a later tenure
		{backend.Slot{At: at(2 * time.Hour), Token: 1<<63 - 1}, false},
	}, at
}

// Instants before 1970 are negative Unix nanoseconds, compared as numbers; instants that
// int64 nanoseconds cannot hold are refused before any I/O.
func TestClaimSlotRange(t *testing.T) {
	srv := server(t)
	ctx := t.Context()
	r := slots(t, newClient(t, srv.Addr()), uniqueName(t, "m"))
	for i, step := range []struct {
		at   time.Time
		want bool
	}{
		{time.Unix(-20, 0), true},
		{time.Unix(-100, 0), false},
		{time.Unix(-3, 5), true},
		{time.Unix(0, -1), true},
		{time.Unix(0, -2), false},
		{time.Unix(0, 0), true},
		{time.Unix(-1, 0), false},
		{time.Unix(0, 1), true},
	} {
		got, err := r.ClaimSlot(ctx, backend.Slot{At: step.at, Token: 1})
		require.NoError(t, err, "claim %d", i)
		assert.Equal(t, step.want, got, "claim %d at %d ns", i, step.at.UnixNano())
	}
	for _, at := range []time.Time{{}, time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := r.ClaimSlot(ctx, backend.Slot{At: at, Token: 1})
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "at %v", at)
	}
	last, err := r.LastSlot(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), last.At.UnixNano())
}

// Of contenders that claim the same slot at once, one records it.
func TestConcurrentClaimsOneWins(t *testing.T) {
	srv := server(t)
	mutex := uniqueName(t, "m")
	const n = 8
	recorders := make([]backend.SlotRecorder, n)
	for i := range recorders {
		recorders[i] = slots(t, newClient(t, srv.Addr()), mutex)
	}
	at := time.Now()
	for round := range 20 {
		slot := backend.Slot{At: at.Add(time.Duration(round) * time.Minute), Token: uint64(100 + round)}
		require.Equal(t, 1, claimAtOnce(t, recorders, slot), "round %d: claims that recorded %+v", round, slot)
	}
}

// claimAtOnce has every recorder claim slot at once and returns how many recorded it.
func claimAtOnce(t *testing.T, recorders []backend.SlotRecorder, slot backend.Slot) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	start := make(chan struct{})
	for _, r := range recorders {
		wg.Go(func() {
			<-start
			ok, err := r.ClaimSlot(t.Context(), slot)
			assert.NoError(t, err)
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return wins
}

// Another program's data under the slot key is an error, never overwritten: a string
// that is no slot an unexpected reply, a key of another type a refusal (WRONGTYPE).
func TestClaimSlotForeignData(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	key := "simba:{" + mutex + "}:slot"
	r := slots(t, newClient(t, srv.Addr()), mutex)
	slot := backend.Slot{At: time.Now(), Token: 7}

	for _, v := range []string{"garbage", "12@@", "012@@3", "12@@-3", "-0@@3"} {
		require.NoError(t, admin.Set(ctx, key, v, 0).Err())
		_, err := r.ClaimSlot(ctx, slot)
		assert.ErrorIs(t, err, redis.ErrUnexpectedReply, "over %q", v)
		assert.Equal(t, v, admin.Get(ctx, key).Val(), "left alone")
	}
	for _, v := range []string{"garbage", "012@@3", "-0@@3", "12@@+3"} {
		require.NoError(t, admin.Set(ctx, key, v, 0).Err())
		_, err := r.LastSlot(ctx)
		assert.ErrorIs(t, err, redis.ErrUnexpectedReply, "%q", v)
	}

	require.NoError(t, admin.Del(ctx, key).Err())
	require.NoError(t, admin.HSet(ctx, key, "at", "1").Err())
	_, err := r.ClaimSlot(ctx, slot)
	assert.ErrorIs(t, err, simba.ErrRefused)
	_, err = r.LastSlot(ctx)
	assert.ErrorIs(t, err, simba.ErrRefused)
}

// A semaphore's contention records no slots; a closed backend's fails with ErrClosed.
func TestClaimSlotMisuse(t *testing.T) {
	srv := server(t)
	ctx := t.Context()
	b := newBackend(t, newClient(t, srv.Addr()))
	c, err := b.StartContend(ctx, backend.Participant{
		Mutex: uniqueName(t, "s"), ContenderID: "c", TTL: testTTL, Transition: testTransition,
		Hold: backend.Hold{Kind: backend.Semaphore, Permits: 2},
	})
	require.NoError(t, err)
	defer func() { _ = c.StopContend(context.Background()) }()
	_, err = c.(backend.SlotRecorder).ClaimSlot(ctx, backend.Slot{At: time.Now(), Token: 1})
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)

	closed := newBackend(t, newClient(t, srv.Addr()))
	rc := contend(t, closed, uniqueName(t, "m"), "c", &wakes{}).(backend.SlotRecorder)
	require.NoError(t, closed.Close())
	_, err = rc.ClaimSlot(ctx, backend.Slot{At: time.Now(), Token: 1})
	assert.ErrorIs(t, err, simba.ErrClosed)
	_, err = rc.LastSlot(ctx)
	assert.ErrorIs(t, err, simba.ErrClosed)
}

// A claim is one script (EVALSHA) of a GET and, when it records the slot, a SET; LastSlot
// one GET.
func TestClaimSlotCommands(t *testing.T) {
	srv := ownServer(t) // no other test's commands
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	r := slots(t, newClient(t, srv.Addr()), uniqueName(t, "m"))
	at := time.Now()
	_, err := r.ClaimSlot(ctx, backend.Slot{At: at, Token: 1}) // loads the script
	require.NoError(t, err)
	const claims = 50
	before := commandStats(t, admin)
	for i := range claims {
		ok, err := r.ClaimSlot(ctx, backend.Slot{At: at.Add(time.Duration(i+1) * time.Second), Token: 1})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = r.ClaimSlot(ctx, backend.Slot{At: at, Token: 1}) // refused
		require.NoError(t, err)
		require.False(t, ok)
		_, err = r.LastSlot(ctx)
		require.NoError(t, err)
	}
	after := commandStats(t, admin)
	per, by := commandsPer(before, after, claims)
	t.Logf("commands per recorded claim, refused claim and read: %.2f (%s)", per, by)
	assert.Equal(t, int64(2*claims), scripts(after)-scripts(before), "one script per claim")
	assert.Zero(t, after["eval"]-before["eval"])
	assert.Equal(t, 6.0, per, "the script, GET, SET; the script, GET; GET")
}
