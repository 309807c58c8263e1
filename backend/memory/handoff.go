package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.HandOffer = (*contention)(nil)

// Waiters lists the contenders waiting for the mutex, oldest first, with their values; see
// backend.HandOffer. A contender whose Backend was closed still waits: the store cannot
// tell a dead process from a slow one.
func (c *contention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	if err := c.checkHandOff(ctx); err != nil {
		return nil, err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[c.mutex]
	if !ok {
		return nil, nil
	}
	waiters := make([]backend.Waiter, 0, len(r.waiters))
	for _, w := range r.waiters {
		waiters = append(waiters, backend.Waiter{ID: w.id, Value: w.value})
	}
	return waiters, nil
}

// HandOff makes the waiting contender to the owner, with a new token and its value, and
// puts the caller at the back of the waiting list; to learns it by a Participant.Grant. A
// to whose Backend was closed (a dead process) learns nothing, and its tenure lapses after
// its TTL and transition window, as any owner's that died.
func (c *contention) HandOff(ctx context.Context, to string) error {
	if err := c.checkHandOff(ctx); err != nil {
		return err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	r, ok := s.records[c.mutex]
	if !ok || r.owner != c.id || r.transitionAt.Before(now) {
		return fmt.Errorf("simba/memory: hand-off of %q: %w: %q does not own it", c.mutex, simba.ErrNotOwner, c.id)
	}
	i := slices.IndexFunc(r.waiters, func(w *contention) bool { return w.id == to })
	if i < 0 {
		return fmt.Errorf("simba/memory: hand-off of %q: %w: %q", c.mutex, simba.ErrNotWaiting, to)
	}
	next := r.waiters[i]
	s.take(r, next, now)
	r.extend(next, now)
	r.waiters = append(r.waiters, c)
	if next.grant != nil && !next.backend.closed.Load() {
		// Under s.mu, as Release wakes a waiter: the grant is applied before any answer of
		// a later call. now is on the clock the contender reads too (one process).
		next.grant(r.answer(now), now)
	}
	return nil
}

// checkHandOff checks a HandOffer call: the backend is open and the name is a mutex's.
func (c *contention) checkHandOff(ctx context.Context) error {
	if err := c.backend.check(ctx); err != nil {
		return err
	}
	if c.hold.Kind != backend.Mutex {
		return fmt.Errorf("simba/memory: hand-off of a %v: %w", c.hold.Kind, errors.ErrUnsupported)
	}
	return nil
}
