package goroutine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIDTellsGoroutinesApart(t *testing.T) {
	here := ID()
	assert.NotZero(t, here)
	assert.Equal(t, here, ID(), "the same goroutine has one number")
	other := make(chan uint64)
	go func() { other <- ID() }()
	there := <-other
	assert.NotZero(t, there)
	assert.NotEqual(t, here, there)
}
