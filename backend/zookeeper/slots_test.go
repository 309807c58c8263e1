package zookeeper_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// startContention starts a contention of id (a retriever when empty) on mutex, stopped
// when the test ends.
func startContention(t *testing.T, b backend.Backend, mutex, id string) backend.Contention {
	t.Helper()
	con, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: id,
		TTL: time.Second, Wake: func() {}, Report: func(backend.Record, time.Time) {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = con.StopContend(context.Background()) })
	return con
}

// The slot record is the persistent node /simba-slot/<mutex>, beside the mutex node:
// ClaimSlot records a slot only if it is later and its token not less, and a claim
// again (a retry after a lost reply) answers false.
func TestSlotRecord(t *testing.T) {
	mutex := mutexName(t)
	rec, ok := startContention(t, newBackend(t), mutex, "a").(backend.SlotRecorder)
	require.True(t, ok, "a contention records slots")
	ctx := t.Context()
	last, err := rec.LastSlot(ctx)
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last, "none recorded")

	at := time.Unix(1_800_000_000, 123456789)
	s1 := backend.Slot{At: at, Token: 7}
	claims := []struct {
		s    backend.Slot
		want bool
	}{
		{s1, true},
		{s1, false}, // again: a retry after a lost reply
		{backend.Slot{At: at.Add(-time.Minute), Token: 9}, false}, // earlier
		{backend.Slot{At: at.Add(time.Minute), Token: 6}, false},  // a lower token
		{backend.Slot{At: at.Add(time.Minute), Token: 7}, true},   // later, the same tenure
	}
	for i, c := range claims {
		got, err := rec.ClaimSlot(ctx, c.s)
		require.NoError(t, err, "claim %d", i)
		assert.Equal(t, c.want, got, "claim %d of %v", i, c.s)
	}
	last, err = rec.LastSlot(ctx)
	require.NoError(t, err)
	assert.True(t, last.At.Equal(at.Add(time.Minute)) && last.Token == 7, "last slot %v", last)

	admin := adminConn(t)
	data, st, err := admin.Get("/simba-slot/" + mutex)
	require.NoError(t, err)
	assert.Equal(t, "1800000060123456789 7", string(data))
	assert.Zero(t, st.EphemeralOwner, "persistent")
	kids, _, err := admin.Children("/simba/" + mutex)
	require.NoError(t, err)
	assert.Len(t, kids, 1, "the mutex node holds the contender's node only")
}

// Contenders of several sessions claim the same slot at once: one claim records it.
func TestSlotClaimedOnce(t *testing.T) {
	mutex := mutexName(t)
	const claimants = 6
	recs := make([]backend.SlotRecorder, claimants)
	for i := range recs {
		recs[i] = startContention(t, newBackend(t), mutex, "").(backend.SlotRecorder)
	}
	for round := range 5 {
		s := backend.Slot{At: time.Unix(1_800_000_000+int64(round), 0), Token: uint64(round)}
		var won atomic.Int32
		var wg sync.WaitGroup
		for _, r := range recs {
			wg.Go(func() {
				ok, err := r.ClaimSlot(t.Context(), s)
				assert.NoError(t, err)
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, won.Load(), "claims of round %d that recorded it", round)
	}
}

// A slot record that is not simba's is refused, not taken for a slot.
func TestSlotRecordMalformed(t *testing.T) {
	mutex := mutexName(t)
	admin := adminConn(t)
	if _, err := admin.CreateContainer("/simba-slot", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		require.ErrorIs(t, err, zk.ErrNodeExists)
	}
	_, err := admin.Create("/simba-slot/"+mutex, []byte("yesterday"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Delete("/simba-slot/"+mutex, -1) })
	rec := startContention(t, newBackend(t), mutex, "a").(backend.SlotRecorder)
	_, err = rec.LastSlot(t.Context())
	assert.ErrorContains(t, err, "yesterday")
	_, err = rec.ClaimSlot(t.Context(), backend.Slot{At: time.Now(), Token: 1})
	assert.ErrorContains(t, err, "yesterday")
}

// A slot whose instant Unix nanoseconds cannot hold is bad input, and recorded nowhere.
func TestSlotInstantOutOfRange(t *testing.T) {
	mutex := mutexName(t)
	rec := startContention(t, newBackend(t), mutex, "a").(backend.SlotRecorder)
	for _, at := range []time.Time{{}, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)} {
		ok, err := rec.ClaimSlot(t.Context(), backend.Slot{At: at, Token: 1})
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "at %v", at)
		assert.False(t, ok)
	}
	last, err := rec.LastSlot(t.Context())
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last, "recorded")
}
