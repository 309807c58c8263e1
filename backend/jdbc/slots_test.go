package jdbc_test

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// slotRecorder opens a contention of b for mutex and returns it as a backend.SlotRecorder,
// failing the test when it is not one.
func slotRecorder(t *testing.T, b *jdbc.Backend, mutex, id string) backend.SlotRecorder {
	t.Helper()
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: id, TTL: time.Second,
		Transition: time.Second, Wake: func() {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	r, ok := c.(backend.SlotRecorder)
	require.True(t, ok, "the contention records no slots")
	return r
}

// TestSlotClaims: a slot is recorded only when it is later than the recorded one and its
// token no smaller; a retry after a lost reply answers false; every contention of the
// mutex reads the last one. On MySQL also with clientFoundRows, under which rows affected
// do not tell an update from a duplicate left alone, and with MariaDB's
// SIMULTANEOUS_ASSIGNMENT, under which an update's assignments all read the row as it was.
func TestSlotClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		backends := map[string]*jdbc.Backend{"": s.backend(t)}
		if s.dialect == jdbc.MySQL {
			b, err := jdbc.New(s.db(t, "clientFoundRows=true"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			backends["clientFoundRows"] = b
			simultaneous := s.db(t, "sql_mode="+url.QueryEscape("CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"))
			var mode string
			require.NoError(t, simultaneous.QueryRowContext(t.Context(), "SELECT @@sql_mode").Scan(&mode))
			require.Contains(t, mode, "SIMULTANEOUS_ASSIGNMENT")
			b, err = jdbc.New(simultaneous)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			backends["SIMULTANEOUS_ASSIGNMENT"] = b
		}
		for name, b := range backends {
			mutex := mutexName(t)
			r := slotRecorder(t, b, mutex, "a")
			last, err := r.LastSlot(t.Context())
			require.NoError(t, err)
			assert.Zero(t, last, "%s: no slot recorded yet", name)

			t0 := time.Unix(1_700_000_000, 123_456_789)
			for i, step := range []struct {
				slot backend.Slot
				want bool
			}{
				{backend.Slot{At: t0, Token: 5}, true},
				{backend.Slot{At: t0, Token: 5}, false},                             // a retry after a lost reply
				{backend.Slot{At: t0.Add(time.Second), Token: 4}, false},            // an older tenure
				{backend.Slot{At: t0.Add(-time.Second), Token: 6}, false},           // an earlier slot
				{backend.Slot{At: t0, Token: 6}, false},                             // the same slot, a later tenure
				{backend.Slot{At: t0.Add(time.Nanosecond), Token: 5}, true},         // the same tenure's next slot
				{backend.Slot{At: t0.Add(2 * time.Second), Token: 7}, true},         // a later tenure's
				{backend.Slot{At: t0.Add(2*time.Second + 1), Token: 7}, true},       // a nanosecond later
				{backend.Slot{At: t0.Add(2*time.Second + 1), Token: 8}, false},      // as late, a later tenure
				{backend.Slot{At: t0.Add(-2 * time.Second), Token: 1 << 40}, false}, // earlier, with a far larger token
			} {
				got, err := r.ClaimSlot(t.Context(), step.slot)
				require.NoError(t, err, "%s: claim %d", name, i)
				assert.Equal(t, step.want, got, "%s: claim %d of %v", name, i, step.slot)
			}
			other := slotRecorder(t, s.backend(t), mutex, "b")
			last, err = other.LastSlot(t.Context())
			require.NoError(t, err)
			assert.True(t, last.At.Equal(t0.Add(2*time.Second+1)), "%s: last slot at %v", name, last.At)
			assert.Equal(t, uint64(7), last.Token, name)

			_, err = r.ClaimSlot(t.Context(), backend.Slot{Token: 9})
			assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%s: a zero instant", name)
		}
	})
}

// TestSlotClaimIsAtomic: contentions of several processes claim the same slot at once;
// exactly one records it.
func TestSlotClaimIsAtomic(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		const n = 8
		recorders := make([]backend.SlotRecorder, n)
		for i := range recorders {
			recorders[i] = slotRecorder(t, s.backend(t), mutex, "c")
		}
		at := time.Unix(1_800_000_000, 0)
		for round := range 5 {
			var won atomic.Int64
			var wg sync.WaitGroup
			for _, r := range recorders {
				wg.Go(func() {
					ok, err := r.ClaimSlot(t.Context(), backend.Slot{At: at.Add(time.Duration(round) * time.Minute), Token: 3})
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(1), won.Load(), "round %d: claims that recorded the slot", round)
		}
	})
}

// TestSlotsWithoutTheSlotTable: on a mutex table without the slot table beside it, a
// contention records no slots (a Scheduler then runs its slots unrecorded, as before).
func TestSlotsWithoutTheSlotTable(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		ddl, err := jdbc.DDL(jdbc.WithTable("noslots"), jdbc.WithDialect(s.dialect))
		require.NoError(t, err)
		_, err = s.db(t).ExecContext(t.Context(), ddl)
		require.NoError(t, err)
		b := s.backend(t, jdbc.WithTable("noslots"))
		c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutexName(t), ContenderID: "a", TTL: time.Second,
			Transition: time.Second, Wake: func() {}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.StopContend(context.Background()) })
		_, ok := c.(backend.SlotRecorder)
		assert.False(t, ok, "a contention without the slot table records slots")
	})
}
