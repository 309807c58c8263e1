package simba

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/clock"
)

// tenure is one continuous period of believed ownership. Its context ends, with a cause,
// when belief ends; its local end moves with every renewal, and a timer ends belief there
// unless a renewal came first. It is safe for concurrent use.
type tenure struct {
	ctx    context.Context // &own
	own    tenureContext   // on inner: a field, so that ctx costs no allocation of its own
	inner  context.Context // cancelled with a cause when belief ends
	cancel context.CancelCauseFunc
	clock  clock.Clock
	base   time.Time    // when the tenure began; end counts from it
	until  atomic.Int64 // the local end of belief, in ns after base; noEnd: none

	mu    sync.Mutex
	owner Owner  // the record as last renewed
	timer *relay // ends belief at the local end: calls of.expire
	spare *spareTimer
	of    expirer
}

// expirer ends belief in a tenure whose local end has passed (a lifecycle).
type expirer interface{ expire(*tenure) }

// noEnd marks a tenure without a local end (a session store that reports no TTL).
const noEnd = math.MaxInt64

// newTenure begins a tenure at now, with owner record o, believed until end (zero: no
// local end); of.expire is called on a timer once end has passed, unless a renewal moved it.
// The timer is spare's, if it keeps one, and goes back to it if the tenure ends before it fired.
func newTenure(c clock.Clock, o Owner, end, now time.Time, of expirer, spare *spareTimer) *tenure {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &tenure{inner: ctx, cancel: cancel, clock: c, base: now, owner: o, of: of, spare: spare}
	t.own = tenureContext{ctx, t}
	t.ctx = &t.own
	t.renew(o, end, now)
	return t
}

// renew records o as the tenure's record and end as its local end (zero: none), at now.
func (t *tenure) renew(o Owner, end, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.owner = o
	if end.IsZero() {
		t.until.Store(noEnd)
		if t.timer != nil {
			t.timer.Stop()
		}
		return
	}
	t.until.Store(int64(end.Sub(t.base)))
	if t.timer != nil {
		t.timer.Reset(end.Sub(now))
		return
	}
	t.timer = t.spare.take(t.clock, end.Sub(now), t)
}

// fire is the timer's function.
func (t *tenure) fire() { t.of.expire(t) }

// end ends belief with cause: the context is cancelled and the timer stopped.
func (t *tenure) end(cause error) {
	t.mu.Lock()
	if t.timer != nil && t.timer.Stop() {
		t.spare.keep(t.timer) // stopped before it fired: nothing of this tenure runs on it
		t.timer = nil
	}
	t.mu.Unlock()
	t.cancel(cause)
}

// record returns the owner record as last renewed.
func (t *tenure) record() Owner {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owner
}

// endTime returns the local end of belief, or the zero Time when there is none.
func (t *tenure) endTime() time.Time {
	end := t.until.Load()
	if end == noEnd {
		return time.Time{}
	}
	return t.base.Add(time.Duration(end))
}

// left returns how long belief lasts from now: negative once the local end has passed.
func (t *tenure) left(now time.Time) time.Duration {
	return time.Duration(t.until.Load() - int64(now.Sub(t.base)))
}

// believes reports whether the tenure's local end lies after now.
func (t *tenure) believes(now time.Time) bool {
	return int64(now.Sub(t.base)) < t.until.Load()
}

// lapse cancels the tenure's context, with cause ErrLeaseExpired, if its local end has
// passed. The timer does the same, and ends the tenure; lapse makes every reader of the
// context see the end at once, even when that timer has not run yet (a process resumed
// after a pause runs its goroutines in any order).
func (t *tenure) lapse() {
	if !t.believes(t.clock.Now()) {
		t.cancel(ErrLeaseExpired)
	}
}

// live reports whether the tenure is believed now: its context has not ended and its
// local end lies ahead.
func (t *tenure) live() bool { return t.ctx.Err() == nil }

// derive returns a context that ends with the tenure, or earlier by cancel, and checks the
// tenure's local end as the tenure's own context does: the context of one holder of a
// tenure that several holders share in turn (Mutexes).
func (t *tenure) derive() (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(t.inner) // the checks are the wrapper's
	return tenureContext{ctx, t}, cancel
}

// tenureContext is the context of a tenure (or of one holder of it). Besides the
// cancellation applied when belief ends, its Done, Err and Value (through which
// context.Cause reads) check the local end themselves: after a pause, the first look at
// the context tells that belief has lapsed, whatever the timers have done.
//
// Contexts derived from it by context.WithCancel and the like end when it is cancelled:
// at the first look at it after the local end, or when the tenure's timer runs.
type tenureContext struct {
	context.Context
	t *tenure
}

func (c tenureContext) Done() <-chan struct{} {
	c.t.lapse()
	return c.Context.Done()
}

func (c tenureContext) Err() error {
	c.t.lapse()
	return c.Context.Err()
}

func (c tenureContext) Value(key any) any {
	c.t.lapse()
	return c.Context.Value(key)
}
