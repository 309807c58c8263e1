package redis_test

import (
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
)

// quorumSlots returns the slot recorder of a new contention of mutex on q.
func quorumSlots(t testing.TB, q *redis.Quorum, mutex string) backend.SlotRecorder {
	t.Helper()
	c := contend(t, q, mutex, uniqueName(t, "c"), &wakes{})
	r, ok := c.(backend.SlotRecorder)
	require.True(t, ok, "a Quorum's contention records slots")
	return r
}

// A Quorum records a slot on every instance by the single-instance rules: a claim is
// recorded only when it is later than the recorded slot and its token not less, a retry
// of the recorded claim answers false, and another contention reads the last claim.
func TestQuorumClaimSlotOrdering(t *testing.T) {
	servers := instances(t, 3)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	r := quorumSlots(t, newQuorum(t, servers), mutex)
	reader := quorumSlots(t, newQuorum(t, servers), mutex)

	last, err := reader.LastSlot(ctx)
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last, "no slot recorded yet")

	steps, _ := orderedClaims()
	for i, step := range steps {
		got, err := r.ClaimSlot(ctx, step.slot)
		require.NoError(t, err, "claim %d", i)
		assert.Equal(t, step.want, got, "claim %d: %+v", i, step.slot)
		if got {
			last = step.slot
		}
		read, err := reader.LastSlot(ctx)
		require.NoError(t, err, "read after claim %d", i)
		assert.True(t, read.At.Equal(last.At) && read.Token == last.Token, "read after claim %d: %+v, want %+v", i, read, last)
		// A claim returns once a quorum recorded it: the last instance records it by then
		// or soon after, and the next claim must find it there.
		awaitSlotEverywhere(t, servers, mutex, last)
	}
	_, err = r.ClaimSlot(ctx, backend.Slot{At: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), Token: 9})
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// awaitSlotEverywhere waits until every instance's slot record of mutex is s.
func awaitSlotEverywhere(t *testing.T, servers []*testserver.Server, mutex string, s backend.Slot) {
	t.Helper()
	want := strconv.FormatInt(s.At.UnixNano(), 10) + "@@" + strconv.FormatUint(s.Token, 10)
	admins := make([]*goredis.Client, len(servers))
	for i, srv := range servers {
		admins[i] = newClient(t, srv.Addr())
	}
	poll(t, "slot "+want+" on every instance", func() bool {
		for _, admin := range admins {
			if admin.Get(t.Context(), "simba:{"+mutex+"}:slot").Val() != want {
				return false
			}
		}
		return true
	})
}

// Of contenders on backends of their own that claim the same slot at once, at most one
// records it on a quorum: none when the instances split their votes so that nobody has a
// quorum (the slot is then skipped). Two contenders over five instances that all answer
// cannot split them: exactly one wins.
func TestQuorumConcurrentClaimsOneWins(t *testing.T) {
	servers := instances(t, 5)
	mutex := uniqueName(t, "m")
	recorders := make([]backend.SlotRecorder, 6)
	for i := range recorders {
		recorders[i] = quorumSlots(t, newQuorum(t, servers), mutex)
	}
	at := time.Now()
	for round := range 40 {
		contenders := recorders[:2]
		if round%2 == 1 {
			contenders = recorders
		}
		slot := backend.Slot{At: at.Add(time.Duration(round) * time.Minute), Token: uint64(100 + round)}
		wins := claimAtOnce(t, contenders, slot)
		if len(contenders) == 2 {
			require.Equal(t, 1, wins, "round %d, two contenders: claims that recorded %+v", round, slot)
		} else {
			require.LessOrEqual(t, wins, 1, "round %d, %d contenders: claims that recorded %+v", round, len(contenders), slot)
		}
	}
}

// With one of three instances down a claim still makes a quorum, and a retry answers
// false (two refusals leave no quorum whatever the third did); with two down the outcome
// is unknown: an error, not false, and LastSlot cannot tell either.
func TestQuorumClaimSlotWithInstancesDown(t *testing.T) {
	servers := instances(t, 3)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	q := newQuorum(t, servers, redis.WithRecheckAfter(time.Hour))
	r := quorumSlots(t, q, mutex)
	at := time.Now()
	ok, err := r.ClaimSlot(ctx, backend.Slot{At: at, Token: 1})
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, servers[2].Kill())
	next := backend.Slot{At: at.Add(time.Minute), Token: 1}
	ok, err = r.ClaimSlot(ctx, next)
	require.NoError(t, err, "two of three are a quorum")
	assert.True(t, ok)
	ok, err = r.ClaimSlot(ctx, next)
	require.NoError(t, err)
	assert.False(t, ok, "a retry")
	last, err := r.LastSlot(ctx)
	require.NoError(t, err)
	assert.True(t, last.At.Equal(next.At), "last slot at %v, want %v", last.At, next.At)

	require.NoError(t, servers[1].Kill())
	ok, err = r.ClaimSlot(ctx, backend.Slot{At: at.Add(2 * time.Minute), Token: 1})
	assert.False(t, ok)
	assert.ErrorIs(t, err, redis.ErrTooFewInstances, "one of three answered")
	_, err = r.LastSlot(ctx)
	assert.ErrorIs(t, err, redis.ErrTooFewInstances)
}

// An instance that lost its record (FLUSHALL: restarted without persistence) costs
// nothing: any quorum read holds the last claim, a retry of it answers false, and the
// next claim is recorded.
func TestQuorumLastSlotAfterAnInstanceLostItsRecord(t *testing.T) {
	servers := instances(t, 3)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	r := quorumSlots(t, newQuorum(t, servers), mutex)
	at := time.Now()
	claimed := backend.Slot{At: at.Add(time.Minute), Token: 3}
	for _, s := range []backend.Slot{{At: at, Token: 3}, claimed} {
		ok, err := r.ClaimSlot(ctx, s)
		require.NoError(t, err)
		require.True(t, ok)
	}
	awaitSlotEverywhere(t, servers, mutex, claimed)
	require.NoError(t, newClient(t, servers[0].Addr()).FlushAll(ctx).Err())

	for i := range 10 { // each on a new Quorum: whichever quorum answers first
		last, err := quorumSlots(t, newQuorum(t, servers), mutex).LastSlot(ctx)
		require.NoError(t, err)
		require.True(t, last.At.Equal(claimed.At) && last.Token == claimed.Token, "read %d: %+v, want %+v", i, last, claimed)
	}
	ok, err := r.ClaimSlot(ctx, claimed)
	require.NoError(t, err)
	assert.False(t, ok, "a retry: instance 0 alone records it")
	ok, err = r.ClaimSlot(ctx, backend.Slot{At: claimed.At.Add(time.Minute), Token: 3})
	require.NoError(t, err)
	assert.True(t, ok)
}

// A claim that fell short of a quorum stays recorded on the instance that missed the claim
// before it, and a quorum's LastSlot may read it: later than the last claim that won
// (which is what the conformance suite's WithMinorityClaims allows), never earlier.
func TestQuorumLastSlotReadsAClaimLeftOnAMinority(t *testing.T) {
	servers := instances(t, 3)
	ctx := t.Context()
	mutex := uniqueName(t, "m")
	r := quorumSlots(t, newQuorum(t, servers, redis.WithRecheckAfter(time.Hour)), mutex)
	at := time.Now()
	won := backend.Slot{At: at, Token: 5}
	ok, err := r.ClaimSlot(ctx, won)
	require.NoError(t, err)
	require.True(t, ok)
	awaitSlotEverywhere(t, servers, mutex, won)
	first := newClient(t, servers[0].Addr())
	require.NoError(t, first.FlushAll(ctx).Err()) // instance 0 missed it

	refused := backend.Slot{At: at, Token: 6}
	ok, err = r.ClaimSlot(ctx, refused)
	require.NoError(t, err)
	require.False(t, ok, "instances 1 and 2 hold %+v", won)
	poll(t, "the refused claim on instance 0", func() bool {
		return first.Get(ctx, "simba:{"+mutex+"}:slot").Val() == strconv.FormatInt(at.UnixNano(), 10)+"@@6"
	})
	require.NoError(t, servers[2].Kill()) // the quorum left is instances 0 and 1
	last, err := r.LastSlot(ctx)
	require.NoError(t, err)
	assert.True(t, last.At.Equal(refused.At) && last.Token == refused.Token, "LastSlot = %+v, want the minority's %+v", last, refused)
}
