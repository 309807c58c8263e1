package batch

import (
	"context"
	"sync"
	"time"
)

// Queue gathers calls into batches (Wait, Take) and sends them, from a goroutine that runs
// while calls wait. Close fails the calls waiting, cuts the sends in flight short and
// joins every goroutine the queue started.
type Queue[C Call] struct {
	opts   Options[C]
	ctx    context.Context // ends at Close: cuts the sends in flight short
	cancel context.CancelFunc
	wg     sync.WaitGroup
	flying chan struct{} // a token per send in flight (Options.InFlight)

	mu      sync.Mutex
	queue   []C
	sending bool // the goroutine runs: it sends until the queue is empty
	closed  bool
	stop    chan struct{} // closed at Close
}

// Options say how a Queue gathers its calls and sends its batches.
type Options[C Call] struct {
	// Gap: a batch goes once no call has come for this long, or one of its calls must go
	// (Call.SendBy)...
	Gap time.Duration
	// Max: ... or once it holds this many calls.
	Max int
	// InFlight bounds the batches sent at once, each on a goroutine of its own; with 0,
	// the gathering goroutine sends each batch itself before it gathers the next.
	InFlight int
	// Send sends batch, whose callers all still wait. Its ctx ends at Close, and at the
	// latest of their deadlines when each has one.
	Send func(ctx context.Context, batch []C)
	// Fail hands c the error Closed: the queue closed before c was sent. It must not block.
	Fail func(c C, err error)
	// Closed is what Add returns after Close, and what Fail hands the calls left.
	Closed error
	// Taken, when set, is called with each batch before it goes, and the latest of its
	// calls' deadlines, under the lock Locked takes.
	Taken func(batch []C, latest time.Time)
}

// NewQueue returns an empty queue that gathers and sends as opts say.
func NewQueue[C Call](opts Options[C]) *Queue[C] {
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue[C]{opts: opts, ctx: ctx, cancel: cancel, stop: make(chan struct{})}
	if opts.InFlight > 0 {
		q.flying = make(chan struct{}, opts.InFlight)
	}
	return q
}

// Add queues c for a coming batch, or returns Options.Closed after Close.
func (q *Queue[C]) Add(c C) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return q.opts.Closed
	}
	q.queue = append(q.queue, c)
	if !q.sending {
		q.sending = true
		q.wg.Go(q.run)
	}
	return nil
}

// Locked runs f under the lock Options.Taken runs under.
func (q *Queue[C]) Locked(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
}

// Closing reports whether Close has begun: a send that fails then fails because of it.
func (q *Queue[C]) Closing() bool { return q.ctx.Err() != nil }

// run sends batches until no call waits.
func (q *Queue[C]) run() {
	for {
		taken, ctx, cancel := q.gather()
		if taken == nil {
			return
		}
		if q.flying == nil {
			q.opts.Send(ctx, taken)
			cancel()
			continue
		}
		select {
		case q.flying <- struct{}{}:
		case <-q.stop:
			cancel()
			for _, c := range taken {
				q.opts.Fail(c, q.opts.Closed)
			}
			continue // gather fails the others
		}
		q.wg.Go(func() {
			defer func() { <-q.flying }()
			defer cancel()
			q.opts.Send(ctx, taken)
		})
	}
}

// gather waits while calls keep coming (see Wait) and returns the next batch (see Take)
// of calls whose callers still wait, with the context to send it in; nil once none waits,
// the goroutine then ends. After Close, it fails every call waiting and returns nil.
func (q *Queue[C]) gather() ([]C, context.Context, context.CancelFunc) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		Wait(&q.mu, &q.queue, &q.closed, q.opts.Gap, q.opts.Max, q.stop)
		if len(q.queue) == 0 || q.closed {
			for _, c := range q.queue {
				q.opts.Fail(c, q.opts.Closed)
			}
			q.queue, q.sending = nil, false
			return nil, nil, nil
		}
		var live []C
		var latest time.Time
		bounded := true
		for _, c := range Take(&q.queue, q.opts.Max) {
			if c.Context().Err() != nil {
				continue // its caller has given up
			}
			live = append(live, c)
			if d, ok := c.Context().Deadline(); !ok {
				bounded = false
			} else if d.After(latest) {
				latest = d
			}
		}
		if live == nil {
			continue // nobody waits for this batch: the next one
		}
		if q.opts.Taken != nil {
			q.opts.Taken(live, latest)
		}
		if !bounded {
			ctx, cancel := context.WithCancel(q.ctx)
			return live, ctx, cancel
		}
		ctx, cancel := context.WithDeadline(q.ctx, latest)
		return live, ctx, cancel
	}
}

// Close fails the calls waiting with Options.Closed, ends the context of the sends in
// flight, and waits for them and for the gathering goroutine to end.
func (q *Queue[C]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.stop)
		q.cancel()
	}
	q.mu.Unlock()
	q.wg.Wait()
}
