package simba_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// Issue 35: a held mutex's memory grew by ~200 bytes with the default logger, because a
// contender's logger was derived with one With per attribute (mutex, then contender),
// each copying the logger and its handler.
func TestNewLockerDerivesItsLoggerOnce(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		l, err := simba.NewLocker(b, "logger", simba.WithContenderID("c"))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
	assert.LessOrEqual(t, allocs, 16.0) // 20 with a With per attribute
}
