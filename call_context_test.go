package simba

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type valueKey struct{}

// A call's context ends at its deadline: Err by the clock, Done by its timer, which goes
// back to the spare when the call ends first.
func TestCallContextEndsAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var spare spareTimer
		b := callBounds{spare: &spare}
		parent := context.WithValue(context.Background(), valueKey{}, "v")
		began := time.Now()
		c := b.begin(parent, time.Second, false)
		require.NotNil(t, c.cheap)
		deadline, ok := c.ctx.Deadline()
		assert.True(t, ok)
		assert.Equal(t, began.Add(time.Second), deadline)
		assert.Equal(t, "v", c.ctx.Value(valueKey{}))
		assert.NoError(t, c.ctx.Err())

		time.Sleep(time.Second) // Err reads the clock: no timer was set
		assert.ErrorIs(t, c.ctx.Err(), context.DeadlineExceeded)
		assert.ErrorIs(t, context.Cause(c.ctx), context.DeadlineExceeded)
		<-c.ctx.Done()
		b.end(c)
		assert.ErrorIs(t, c.ctx.Err(), context.DeadlineExceeded, "ended already")

		c = b.begin(parent, time.Second, false)
		done := c.ctx.Done() // sets the timer
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("done before the deadline")
		default:
		}
		time.Sleep(time.Second)
		synctest.Wait()
		<-done
		assert.ErrorIs(t, c.ctx.Err(), context.DeadlineExceeded)
		b.end(c)

		c = b.begin(parent, time.Second, false)
		done = c.ctx.Done()
		b.end(c) // before the deadline: the timer is stopped and kept
		<-done
		assert.ErrorIs(t, c.ctx.Err(), context.Canceled)
		assert.NotNil(t, spare.r, "the stopped timer is kept for the next call")
	})
}

// A lifecycle's own calls end when it halts, the one under way and those begun later; a
// call on the caller's context does not.
func TestCallContextEndsAtHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := callBounds{}
		own := b.begin(context.Background(), time.Second, true)
		done := own.ctx.Done()
		b.halt()
		<-done
		assert.ErrorIs(t, own.ctx.Err(), context.Canceled)
		b.end(own)

		callers := b.begin(context.Background(), time.Second, false)
		assert.NoError(t, callers.ctx.Err(), "a call on the caller's context outlives the halt")
		b.end(callers)

		later := b.begin(context.Background(), time.Second, true)
		assert.ErrorIs(t, later.ctx.Err(), context.Canceled)
		<-later.ctx.Done()
		b.end(later)
	})
}

// A call whose parent can end, or that overlaps another, gets context.WithTimeout's
// context: it ends with its parent, and at its deadline.
func TestCallContextFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := callBounds{}
		parent, cancel := context.WithCancel(context.Background())
		c := b.begin(parent, time.Second, false)
		assert.Nil(t, c.cheap)
		cancel()
		<-c.ctx.Done()
		b.end(c)

		first := b.begin(context.Background(), time.Second, false)
		second := b.begin(context.Background(), 2*time.Second, false)
		require.NotNil(t, first.cheap)
		assert.Nil(t, second.cheap)
		time.Sleep(2 * time.Second)
		<-second.ctx.Done()
		<-first.ctx.Done()
		b.end(second)
		b.end(first)
		next := b.begin(context.Background(), time.Second, false)
		assert.NotNil(t, next.cheap, "the bounds are free again")
		b.end(next)
	})
}
