package dispatch

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// resumed returns a queue that delivers from the start.
func resumed(onPanic func(v any)) *Queue {
	q := NewHeld(onPanic)
	q.Resume()
	return q
}

func TestOrderAndOneAtATime(t *testing.T) {
	q := resumed(nil)
	var (
		mu      sync.Mutex
		got     []int
		running int
		maxRun  int
	)
	const n = 1000
	var pushers sync.WaitGroup
	// Pushes from one goroutine keep their order; concurrent pushers interleave.
	pushers.Go(func() {
		for i := range n {
			q.Push(func() {
				mu.Lock()
				running++
				maxRun = max(maxRun, running)
				got = append(got, i)
				mu.Unlock()
				mu.Lock()
				running--
				mu.Unlock()
			})
		}
	})
	pushers.Wait()
	q.Close()
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i, v)
	}
	assert.Equal(t, 1, maxRun)
}

func TestPanicRecoveredAndDeliveryGoesOn(t *testing.T) {
	var panics []any
	q := resumed(func(v any) { panics = append(panics, v) })
	delivered := make(chan int, 2)
	q.Push(func() { delivered <- 1 })
	q.Push(func() { panic("boom") })
	q.Push(func() { delivered <- 3 })
	q.Close()
	assert.Equal(t, 1, <-delivered)
	assert.Equal(t, 3, <-delivered)
	assert.Equal(t, []any{"boom"}, panics)
}

func TestCloseWaitsForSlowCallbackAndRejectsLaterPushes(t *testing.T) {
	q := resumed(nil)
	release := make(chan struct{})
	done := make(chan struct{})
	q.Push(func() { <-release; close(done) })
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned before the queued callback finished")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	<-done
	assert.False(t, q.Push(func() {}), "push after Close must be refused")
	q.Close() // idempotent
}

func TestDeliveringKnowsItsGoroutine(t *testing.T) {
	q := resumed(nil)
	defer q.Close()
	assert.False(t, q.Delivering(), "not from outside")
	inside := make(chan bool, 1)
	q.Push(func() { inside <- q.Delivering() })
	assert.True(t, <-inside, "from inside a queued function")
}

func TestHeldDeliversNothingUntilResume(t *testing.T) {
	for _, how := range []string{"Resume", "Close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewHeld(nil)
				var got []int
				q.Push(func() { got = append(got, 1) })
				q.Push(func() { got = append(got, 2) })
				synctest.Wait()
				assert.Empty(t, got, "nothing delivered while held")
				if how == "Resume" {
					q.Resume()
					synctest.Wait()
					assert.Equal(t, []int{1, 2}, got)
				}
				q.Close()
				assert.Equal(t, []int{1, 2}, got, "Close delivers what was queued")
			})
		})
	}
}
