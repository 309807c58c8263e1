package simba_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

func TestLookupInvalid(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	var nilCtx context.Context
	_, err = simba.Lookup(nilCtx, b, "m")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.Lookup(t.Context(), b, " ")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.Lookup(t.Context(), nil, "m")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.Lookup(t.Context(), b, "m", simba.WithContenderID("x"))
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// ExampleLookup reads who owns a mutex without running a service.
func ExampleLookup() {
	store := memory.NewStore()
	b, _ := memory.New(store)
	ctx := context.Background()
	l, _ := simba.NewLocker(b, "nightly-report", simba.WithContenderID("worker-1"))
	defer l.Close()
	lease, _ := l.Acquire(ctx)

	o, err := simba.Lookup(ctx, b, "nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.ID, o.Token == lease.Token())
	_ = lease.Release(ctx)
	o, _ = simba.Lookup(ctx, b, "nightly-report")
	fmt.Println(o.IsZero())
	// Output:
	// worker-1 true
	// true
}
