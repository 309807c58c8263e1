package batch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/batch"
)

// call is a batch.Call of the tests.
type call struct {
	ctx    context.Context
	sendBy time.Time
}

func (c *call) Context() context.Context { return c.ctx }
func (c *call) SendBy() time.Time        { return c.sendBy }

func TestByDeadline(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return ctx
	}
	none, late, soon := context.Background(), at(time.Second), at(time.Millisecond)
	got := []context.Context{none, late, soon}
	slices.SortStableFunc(got, batch.ByDeadline)
	if want := []context.Context{soon, late, none}; !slices.Equal(got, want) {
		t.Errorf("sorted by deadline: %v, want %v", got, want)
	}
}

// TestTakeSendsTheMostUrgentFirst: of more calls than a batch holds, the batch takes those
// whose deadlines come first, whatever their order of arrival. A grid instant's renewals
// reach a backend together, some with their deadline a short renewal lead away, others a
// period later: taken in arrival order, the urgent ones waited behind whole batches of
// the others (0 of 200 urgent renewals in the first batch of 1,000, on Redis and SQL).
func TestTakeSendsTheMostUrgentFirst(t *testing.T) {
	const max = 1000
	now := time.Now()
	var queue []*call
	add := func(n int, deadline time.Duration) []*call {
		ctx, cancel := context.WithDeadline(t.Context(), now.Add(deadline))
		t.Cleanup(cancel)
		var cs []*call
		for range n {
			c := &call{ctx: ctx, sendBy: now}
			queue = append(queue, c)
			cs = append(cs, c)
		}
		return cs
	}
	add(max, 10*time.Second)
	urgent := add(200, 300*time.Millisecond)
	taken := batch.Take(&queue, max)
	if len(taken) != max || len(queue) != 200 {
		t.Fatalf("took %d and left %d of %d, want %d and 200", len(taken), len(queue), max+200, max)
	}
	for _, c := range urgent {
		if !slices.Contains(taken, c) {
			t.Fatal("an urgent call was left for a later batch")
		}
	}
}
