package jdbc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestGatherPassesABatchNobodyWaitsFor: a batch whose callers have all given up is not
// sent, and the gathering goes on: it ended, as if no renewal waited, and left the
// backend believing it ran, so that no later renewal was sent.
func TestGatherPassesABatchNobodyWaitsFor(t *testing.T) {
	q := newRenewals(nil)
	defer q.cancel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	q.queue = []*renewal{{ctx: ctx, arrived: time.Now(), sendBy: time.Now(), done: make(chan renewOutcome, 1)}}
	q.sending = true
	batch, _ := q.gather()
	assert.Nil(t, batch)
	assert.False(t, q.sending, "the gathering ended, and says it runs")
}
