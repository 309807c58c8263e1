package simba_test

import (
	"context"
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
}
