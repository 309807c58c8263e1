package batch

import (
	"context"
	"testing"
	"time"
)

// given is a Call of the internal tests.
type given struct{ ctx context.Context }

func (g given) Context() context.Context { return g.ctx }
func (g given) SendBy() time.Time        { return time.Time{} }

// TestGatherPassesABatchNobodyWaitsFor: a batch whose callers have all given up is not
// sent, and the gathering goes on: it ended, as if no call waited, and left the queue
// believing it ran, so that no later call was sent.
func TestGatherPassesABatchNobodyWaitsFor(t *testing.T) {
	q := NewQueue(Options[given]{Gap: time.Millisecond, Max: 10,
		Send: func(context.Context, []given) { t.Error("a batch nobody waits for was sent") }})
	defer q.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	q.queue = []given{{ctx: ctx}}
	q.sending = true
	batch, _, _ := q.gather()
	if batch != nil {
		t.Errorf("gathered %v", batch)
	}
	if q.sending {
		t.Error("the gathering ended, and says it runs")
	}
}
