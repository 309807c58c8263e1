package batch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/batch"
)

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
