// Package batch gathers the calls of many contentions that reach a backend together, for
// the backends that send them as one request.
package batch

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Call is a call waiting in a queue for its batch.
type Call interface {
	// Context is the caller's context: its deadline orders the calls (ByDeadline).
	Context() context.Context
	// SendBy is when its batch must go at the latest, however many calls keep coming.
	SendBy() time.Time
}

// Wait waits while calls keep coming into *queue, and returns once its first max calls
// should go: no call has come for gap, one of them must go by now (Call.SendBy), max are
// waiting, stop is closed, or the queue is empty or closed (*closed). mu guards queue and
// closed; it is held when Wait is called and when it returns, and let go while it waits.
func Wait[C Call](mu *sync.Mutex, queue *[]C, closed *bool, gap time.Duration, max int, stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n := len(*queue)
		if n == 0 || *closed {
			return
		}
		wait := gap
		for _, c := range (*queue)[:min(n, max)] {
			wait = min(wait, time.Until(c.SendBy()))
		}
		if n >= max || wait <= 0 {
			return
		}
		mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-stop:
		}
		mu.Lock()
		if len(*queue) == n && !*closed {
			return // none came meanwhile
		}
	}
}

// Take removes the next batch from *queue and returns it: the first max calls, oldest
// first, or those due soonest (ByDeadline) when more wait. A grid instant's renewals come
// together, some a short renewal lead from their deadline, others later: in the order of
// arrival, the urgent ones would wait behind whole batches of the others.
func Take[C Call](queue *[]C, max int) []C {
	if len(*queue) > max {
		slices.SortStableFunc(*queue, func(a, b C) int { return ByDeadline(a.Context(), b.Context()) })
	}
	n := min(len(*queue), max)
	taken := (*queue)[:n:n]
	*queue = (*queue)[n:]
	return taken
}

// ByDeadline orders calls by their contexts' deadlines, soonest first, a call without a
// deadline last: a comparison function for slices.SortStableFunc.
func ByDeadline(a, b context.Context) int {
	da, aok := a.Deadline()
	db, bok := b.Deadline()
	switch {
	case aok && bok:
		return da.Compare(db)
	case aok:
		return -1
	case bok:
		return 1
	}
	return 0
}
