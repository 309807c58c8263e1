package jdbc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGatherSendsTheMostUrgentFirst: of more renewals than a batch holds, the batch takes
// those whose deadlines come first, whatever their order of arrival. A grid instant's
// renewals reach the backend together, some with their deadline a short renewal lead
// away, others a period later: sent in arrival order, the urgent ones would wait behind
// whole batches of the others.
func TestGatherSendsTheMostUrgentFirst(t *testing.T) {
	q := newRenewals(nil)
	defer q.cancel()
	now := time.Now()
	add := func(n int, deadline time.Duration) []*renewal {
		ctx, cancel := context.WithDeadline(t.Context(), now.Add(deadline))
		t.Cleanup(cancel)
		var rs []*renewal
		for range n {
			r := &renewal{ctx: ctx, arrived: now, sendBy: now.Add(-time.Millisecond), done: make(chan renewOutcome, 1)}
			q.queue = append(q.queue, r)
			rs = append(rs, r)
		}
		return rs
	}
	add(maxRenewBatch, 10*time.Second)
	urgent := add(200, 300*time.Millisecond)
	q.sending = true
	batch, _ := q.gather()
	require.Len(t, batch, maxRenewBatch)
	in := make(map[*renewal]bool, len(batch))
	for _, r := range batch {
		in[r] = true
	}
	taken := 0
	for _, r := range urgent {
		if in[r] {
			taken++
		}
	}
	assert.Equal(t, len(urgent), taken, "urgent renewals in the first batch")
}
