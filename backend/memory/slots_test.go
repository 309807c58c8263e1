package memory_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// A slot whose instant Unix nanoseconds cannot hold is refused as bad input, and a closed
// backend's contention answers ErrClosed; neither records anything.
func TestClaimSlotRefusesWhatItCannotRecord(t *testing.T) {
	store := memory.NewStore()
	b, err := memory.New(store)
	require.NoError(t, err)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: "m", ContenderID: "c", TTL: time.Second})
	require.NoError(t, err)
	defer c.StopContend(t.Context())
	rec := c.(backend.SlotRecorder)
	for _, at := range []time.Time{{}, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		ok, err := rec.ClaimSlot(t.Context(), backend.Slot{At: at, Token: 1})
		assert.False(t, ok)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "slot at %v", at)
	}
	require.NoError(t, b.Close())
	ok, err := rec.ClaimSlot(t.Context(), backend.Slot{At: time.Now(), Token: 1})
	assert.False(t, ok)
	assert.ErrorIs(t, err, simba.ErrClosed)
	_, err = rec.LastSlot(t.Context())
	assert.ErrorIs(t, err, simba.ErrClosed)
	b2, err := memory.New(store)
	require.NoError(t, err)
	c2, err := b2.StartContend(t.Context(), backend.Participant{Mutex: "m", ContenderID: "d", TTL: time.Second})
	require.NoError(t, err)
	defer c2.StopContend(t.Context())
	last, err := c2.(backend.SlotRecorder).LastSlot(t.Context())
	require.NoError(t, err)
	assert.Equal(t, backend.Slot{}, last)
}
