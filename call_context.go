package simba

import (
	"context"
	"sync"
	"time"
)

// callBounds bound the store calls a lifecycle makes one after another (its start-up, its
// attempts, its release at the end) by the call timeout, with a context that costs one
// object instead of context.WithTimeout's timer, context and registration with its parent.
// Err reads the clock; a timer, the service's spare, is set only once Done is asked for.
// A call that overlaps another, or whose parent can end or has a deadline, gets
// context.WithTimeout's.
type callBounds struct {
	spare *spareTimer // where the timer comes from and goes back to (a service's)

	mu     sync.Mutex // guards the fields below and those of the bounds' callContexts
	cur    *callContext
	halted bool // the lifecycle halted: its own calls end at once
}

// call is one bounded store call: ctx, and what ends it (cheap's, else cancel).
type call struct {
	ctx    context.Context
	cheap  *callContext
	cancel context.CancelFunc
}

// begin returns the context of a call bounded by d. parent is where its values come from
// and, if linked, the lifecycle's own context: the call then ends when the lifecycle halts.
// end must be called once the call has returned.
func (b *callBounds) begin(parent context.Context, d time.Duration, linked bool) call {
	values := parent
	if linked {
		values = context.Background() // the lifecycle's context carries no values
	}
	if _, ok := values.Deadline(); ok || values.Done() != nil {
		ctx, cancel := context.WithTimeout(parent, d)
		return call{ctx: ctx, cancel: cancel}
	}
	c := &callContext{values: values, deadline: time.Now().Add(d), b: b, linked: linked}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur != nil { // calls overlap: the second gets a context of its own
		ctx, cancel := context.WithTimeout(parent, d)
		return call{ctx: ctx, cancel: cancel}
	}
	b.cur = c
	if linked && b.halted {
		c.endLocked(context.Canceled)
	}
	return call{ctx: c, cheap: c}
}

// end ends call c, as the cancel of context.WithTimeout does.
func (b *callBounds) end(c call) {
	if c.cheap == nil {
		c.cancel()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == c.cheap {
		b.cur = nil
	}
	c.cheap.endLocked(context.Canceled)
}

// halt ends the lifecycle's own call under way, and those it begins from now on.
func (b *callBounds) halt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.halted = true
	if c := b.cur; c != nil && c.linked {
		c.endLocked(context.Canceled)
	}
}

// callContext is the context of one call of callBounds.
type callContext struct {
	values   context.Context // Value reads it; it cannot end
	deadline time.Time
	b        *callBounds
	linked   bool

	// guarded by b.mu
	done  chan struct{} // made by the first Done
	err   error
	timer *relay // set by the first Done, until the context ends
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callContext) Value(key any) any { return c.values.Value(key) }

func (c *callContext) Err() error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded) // Done's timer may not have run yet
	}
	return c.err
}

func (c *callContext) Done() <-chan struct{} {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	switch {
	case c.done != nil:
	case c.err != nil:
		c.done = closedChan
	default:
		c.done = make(chan struct{})
		c.timer = c.b.spare.take(nil, time.Until(c.deadline), c)
	}
	return c.done
}

// fire is the timer's function: the deadline has passed.
func (c *callContext) fire() {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.endLocked(context.DeadlineExceeded)
}

// endLocked ends the context with err, unless it has ended. Called with b.mu held.
func (c *callContext) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		if c.timer.Stop() {
			c.b.spare.keep(c.timer) // stopped before it fired: nothing of this call runs on it
		}
		c.timer = nil
	}
}

func (c *callContext) String() string { return "simba call context" }
