package goroutine

import (
	"fmt"
	"strings"
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

func TestStacksHasEveryGoroutine(t *testing.T) {
	started := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go parked(started, stop, done)
	defer func() { close(stop); <-done }()
	// A goroutine not yet run shows only the go statement's wrapper, not its function.
	<-started
	var mine, its int
	for _, s := range Stacks() {
		if strings.HasPrefix(s, fmt.Sprintf("goroutine %d [", ID())) {
			mine++
		}
		if strings.Contains(s, "goroutine.parked(") {
			its++
		}
	}
	assert.Equal(t, 1, mine, "the caller's stack, once")
	assert.Equal(t, 1, its, "the parked goroutine's stack, once")
}

func parked(started chan<- struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	close(started)
	<-stop
}
