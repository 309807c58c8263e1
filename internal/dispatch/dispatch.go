// Package dispatch runs callbacks one at a time, in the order they were queued, on a
// goroutine of its own.
package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/simba-go/simba/internal/goroutine"
)

// Queue delivers queued functions in order on one goroutine, which it starts on the first
// Push after Resume and stops in Close. The queue is unbounded: Push never blocks, so the
// goroutine that talks to a store never waits for a slow callback.
//
// A Queue must not be copied after first use.
type Queue struct {
	onPanic func(v any)

	mu      sync.Mutex
	items   []func()
	running bool // the delivery goroutine exists
	held    bool // functions are queued but not delivered until Resume
	closed  bool
	wg      sync.WaitGroup

	deliverer atomic.Uint64 // the delivering goroutine's number, 0 when none
}

// NewHeld returns an empty queue that delivers nothing until Resume is called. onPanic is
// called, on the delivery goroutine, with the value of any panic raised by a queued
// function; delivery then goes on with the next function.
func NewHeld(onPanic func(v any)) *Queue {
	return &Queue{onPanic: onPanic, held: true}
}

// Resume lets a queue made by NewHeld deliver what was queued and what comes next.
func (q *Queue) Resume() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held = false
	q.start()
}

// start starts the delivery goroutine if there is something to deliver and none runs.
// Called with q.mu held.
func (q *Queue) start() {
	if !q.running && !q.held && len(q.items) > 0 {
		q.running = true
		q.wg.Go(q.deliver)
	}
}

// Push queues f. It reports false, and drops f, once Close has been called.
func (q *Queue) Push(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.items = append(q.items, f)
	q.start()
	return true
}

// Close stops accepting functions, waits until every function queued before it has
// returned, and waits for the delivery goroutine to exit; a held queue is resumed. It
// must not be called from a queued function. Close is idempotent.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.held = false
	q.start()
	q.mu.Unlock()
	q.wg.Wait()
}

// Delivering reports whether the calling goroutine is the one that delivers the queue's
// functions: whether it is called from inside one of them.
func (q *Queue) Delivering() bool {
	id := q.deliverer.Load()
	return id != 0 && id == goroutine.ID()
}

// deliver runs the queued functions until the queue is empty, then exits; the next Push
// starts a new delivery goroutine.
func (q *Queue) deliver() {
	q.deliverer.Store(goroutine.ID())
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			q.deliverer.Store(0)
			q.mu.Unlock()
			return
		}
		f := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.mu.Unlock()
		q.call(f)
	}
}

func (q *Queue) call(f func()) {
	defer func() {
		if v := recover(); v != nil && q.onPanic != nil {
			q.onPanic(v)
		}
	}()
	f()
}
