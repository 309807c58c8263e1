package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// next receives from ch until it gets an owner named id ("": none), with a deadline.
func next(t *testing.T, ch <-chan simba.Owner, id string) simba.Owner {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case o, ok := <-ch:
			require.True(t, ok, "closed while waiting for %q", id)
			if o.ID == id {
				return o
			}
		case <-deadline:
			t.Fatalf("the owner %q never came", id)
		}
	}
}

func TestObserve(t *testing.T) {
	store := memory.NewStore()
	b, _ := memory.New(store)
	la, err := simba.NewLocker(b, "observed", simba.WithContenderID("a"))
	require.NoError(t, err)
	defer la.Close()
	lb, err := simba.NewLocker(b, "observed", simba.WithContenderID("b"))
	require.NoError(t, err)
	defer lb.Close()
	held, err := la.Acquire(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := simba.Observe(ctx, b, "observed")
	require.NoError(t, err)
	first := next(t, ch, "a")
	assert.Equal(t, held.Token(), first.Token, "the first value is the owner at the start")

	require.NoError(t, held.Release(t.Context()))
	next(t, ch, "")
	held, err = lb.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, held.Token(), next(t, ch, "b").Token)

	cancel()
	for range ch { // closed once the observation has stopped
	}
	require.NoError(t, held.Release(t.Context()))
	assert.Zero(t, store.Len(), "the observation left nothing on the store")
}

func TestObserveInvalid(t *testing.T) {
	b, _ := memory.New(memory.NewStore())
	var nilCtx context.Context
	_, err := simba.Observe(nilCtx, b, "m")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.Observe(t.Context(), b, "")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.Observe(t.Context(), nil, "m")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}
