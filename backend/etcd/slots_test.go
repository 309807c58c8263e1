package etcd_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// clearSlot deletes mutex's slot record, which an earlier run of the test left.
func clearSlot(t *testing.T, b *testBackend, mutex string) {
	t.Helper()
	_, err := b.client.Delete(t.Context(), b.SlotKey(mutex))
	require.NoError(t, err)
}

// A mutex's slot record is a key of its own, <prefix>/slot/<mutex>, outside the mutex's
// prefix: a claim records a slot later than the recorded one, with a token not below its
// token, and says whether it did; a retry of a claim that was made answers false.
func TestSlotRecord(t *testing.T) {
	b := newBackend(t)
	const mutex = "slots"
	clearSlot(t, b, mutex)
	c := startContention(t, b, mutex, "a", "")
	rec := c.owns(t, "a")
	r := as[backend.SlotRecorder](t, c)

	last, err := r.LastSlot(t.Context())
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last, "no slot recorded yet")

	at := time.Date(2026, 11, 27, 23, 0, 0, 123, time.UTC)
	s := backend.Slot{At: at, Token: rec.Token}
	ok, err := r.ClaimSlot(t.Context(), s)
	require.NoError(t, err)
	assert.True(t, ok, "the first claim")
	ok, err = r.ClaimSlot(t.Context(), s)
	require.NoError(t, err)
	assert.False(t, ok, "a retry of the claim")

	for _, tc := range []struct {
		what string
		s    backend.Slot
		ok   bool
	}{
		{"an earlier slot", backend.Slot{At: at.Add(-time.Minute), Token: rec.Token + 5}, false},
		{"a later slot with a lower token", backend.Slot{At: at.Add(time.Minute), Token: rec.Token - 1}, false},
		{"a later slot with the same token", backend.Slot{At: at.Add(time.Minute), Token: rec.Token}, true},
		{"a later slot with a greater token", backend.Slot{At: at.Add(2 * time.Minute), Token: rec.Token + 1}, true},
		{"the same slot with a greater token", backend.Slot{At: at.Add(2 * time.Minute), Token: rec.Token + 2}, false},
	} {
		before, err := r.LastSlot(t.Context())
		require.NoError(t, err)
		ok, err := r.ClaimSlot(t.Context(), tc.s)
		require.NoError(t, err, tc.what)
		assert.Equal(t, tc.ok, ok, tc.what)
		after, err := r.LastSlot(t.Context())
		require.NoError(t, err)
		want := before
		if tc.ok {
			want = tc.s
		}
		assert.True(t, want.At.Equal(after.At) && want.Token == after.Token, "%s: recorded %+v, want %+v", tc.what, after, want)
	}

	// Another backend reads the record; it lies outside the mutex's prefix.
	other := startContention(t, newBackend(t), mutex, "", "")
	last, err = as[backend.SlotRecorder](t, other).LastSlot(t.Context())
	require.NoError(t, err)
	assert.Equal(t, at.Add(2*time.Minute).UnixNano(), last.At.UnixNano())
	assert.Equal(t, rec.Token+1, last.Token)
	resp, err := b.client.Get(t.Context(), b.SlotKey(mutex))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, fmt.Sprintf("%d %d", last.At.UnixNano(), last.Token), string(resp.Kvs[0].Value))
	keys, _, _ := contenders(t, b.client, b.MutexPrefix(mutex))
	assert.Len(t, keys, 1, "the mutex's prefix holds its contender's key only")
	names, err := b.Mutexes(t.Context())
	require.NoError(t, err)
	assert.Contains(t, names, mutex)
	assert.NotContains(t, names, "", "the record names no mutex")
}

// Claims of one slot from contentions on several backends at once: exactly one records it.
func TestSlotClaimRace(t *testing.T) {
	const mutex, n = "slot-race", 6
	clearSlot(t, newBackend(t), mutex)
	var recorders []backend.SlotRecorder
	for i := range n {
		recorders = append(recorders, as[backend.SlotRecorder](t, startContention(t, newBackend(t), mutex, fmt.Sprintf("c%d", i), "")))
	}
	at := time.Now()
	for round := range 3 {
		s := backend.Slot{At: at.Add(time.Duration(round) * time.Second), Token: uint64(round + 1)}
		var won atomic.Int32
		var wg sync.WaitGroup
		for _, r := range recorders {
			wg.Go(func() {
				ok, err := r.ClaimSlot(t.Context(), s)
				assert.NoError(t, err)
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, won.Load(), "round %d: claims that recorded the slot", round)
	}
}

// On a cluster, a slot claimed through one member is read through another.
func TestSlotRecordCluster(t *testing.T) {
	c := cluster(t)
	eps := c.Endpoints()
	const mutex = "slots-cluster"
	clearSlot(t, newBackendAt(t, eps), mutex)
	a := as[backend.SlotRecorder](t, startContention(t, newBackendAt(t, eps[:1]), mutex, "a", ""))
	z := as[backend.SlotRecorder](t, startContention(t, newBackendAt(t, eps[2:]), mutex, "z", ""))
	s := backend.Slot{At: time.Now().Truncate(time.Second), Token: 7}
	ok, err := a.ClaimSlot(t.Context(), s)
	require.NoError(t, err)
	require.True(t, ok)
	last, err := z.LastSlot(t.Context())
	require.NoError(t, err)
	assert.True(t, s.At.Equal(last.At) && last.Token == 7, "read through another member: %+v", last)
	ok, err = z.ClaimSlot(t.Context(), s)
	require.NoError(t, err)
	assert.False(t, ok, "the slot is recorded already")
}

// A malformed record is an error, never a slot read as zero.
func TestSlotRecordMalformed(t *testing.T) {
	b := newBackend(t)
	const mutex = "slot-malformed"
	r := as[backend.SlotRecorder](t, startContention(t, b, mutex, "a", ""))
	_, err := b.client.Put(t.Context(), b.SlotKey(mutex), "yesterday")
	require.NoError(t, err)
	_, err = r.LastSlot(t.Context())
	assert.ErrorIs(t, err, simba.ErrRefused)
	_, err = r.ClaimSlot(t.Context(), backend.Slot{At: time.Now(), Token: 1})
	assert.ErrorIs(t, err, simba.ErrRefused)
}
