package memory

import (
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Semaphores and read-write locks: a group per name and kind, with its holders and the
// contentions waiting to hold, oldest first. A waiter is admitted when its hold fits beside
// the holders together with the holds of every waiter ahead of it, so that none is passed
// over; a waiter that has not asked for a while (its process is gone or stalled) is passed
// over and dropped, so that it cannot keep live ones waiting.

// groupKey names a group: each kind's names are apart from the others' and from mutexes'.
type groupKey struct {
	kind backend.Kind
	name string
}

// group is a semaphore's or read-write lock's holders and waiters.
type group struct {
	permits int // a semaphore's, fixed while the group lives
	holders []*holder
	waiters []*waiter
}

// holder is one admitted hold. Its instants are as in a mutex's record.
type holder struct {
	id           string
	shared       bool
	acquiredAt   time.Time
	ttlAt        time.Time
	transitionAt time.Time
	token        uint64
}

// waiter is a contention waiting to hold; seen is when it last asked.
type waiter struct {
	c    *contention
	seen time.Time
}

// Holds reports that the backend keeps every kind; see backend.Holder.
func (b *Backend) Holds(backend.Kind) bool { return true }

// group returns c's group, creating it with c's permit count. Called with s.mu held.
func (s *Store) group(c *contention) *group {
	k := groupKey{c.hold.Kind, c.mutex}
	g, ok := s.groups[k]
	if !ok {
		g = &group{permits: c.hold.Permits}
		s.groups[k] = g
	}
	return g
}

// acquireHold admits or renews c's hold, or queues c. Called with s.mu held.
func (s *Store) acquireHold(c *contention, now time.Time) (backend.Record, error) {
	g := s.group(c)
	if c.hold.Kind == backend.Semaphore && g.permits != c.hold.Permits {
		return backend.Record{}, fmt.Errorf("simba/memory: semaphore %q has %d permits, not %d: %w",
			c.mutex, g.permits, c.hold.Permits, simba.ErrRefused)
	}
	g.prune(now)
	fresh := !c.asked
	c.asked = true
	if h := g.holder(c.id); h != nil {
		if fresh {
			// A new contention that finds its ID holding (an earlier one's release was
			// lost): a new hold begins, with a new token, as the earlier one has ended.
			s.tokens++
			h.token, h.acquiredAt = s.tokens, now
		}
		h.renew(c, now)
		return h.answer(now), nil
	}
	i := g.waiting(c)
	if i < 0 {
		g.waiters = append(g.waiters, &waiter{c: c})
		i = len(g.waiters) - 1
	}
	g.waiters[i].seen = now
	if !g.admits(c.hold, i) {
		return g.soonest(now), nil
	}
	g.waiters = slices.Delete(g.waiters, i, i+1)
	s.tokens++
	h := &holder{id: c.id, shared: c.hold.Shared, acquiredAt: now, token: s.tokens}
	h.renew(c, now)
	g.holders = append(g.holders, h)
	return h.answer(now), nil
}

// releaseHold gives c's hold up and takes c off the waiters. Called with s.mu held.
func (s *Store) releaseHold(c *contention, now time.Time) {
	if g, ok := s.groups[groupKey{c.hold.Kind, c.mutex}]; ok {
		g.holders = slices.DeleteFunc(g.holders, func(h *holder) bool { return h.id == c.id })
	}
	s.leaveHold(c, now)
}

// leaveHold takes c off the waiters, wakes those that now fit, and drops a group nobody
// holds or waits for. Called with s.mu held.
func (s *Store) leaveHold(c *contention, now time.Time) {
	k := groupKey{c.hold.Kind, c.mutex}
	g, ok := s.groups[k]
	if !ok {
		return
	}
	if i := g.waiting(c); i >= 0 {
		g.waiters = slices.Delete(g.waiters, i, i+1)
	}
	g.prune(now)
	if len(g.holders) == 0 && len(g.waiters) == 0 {
		delete(s.groups, k)
		return
	}
	g.wake()
}

// lookupHold answers c's Lookup: the hold that ends first. Called with s.mu held.
func (s *Store) lookupHold(c *contention, now time.Time) backend.Record {
	g, ok := s.groups[groupKey{c.hold.Kind, c.mutex}]
	if !ok {
		return backend.Record{}
	}
	g.prune(now)
	return g.soonest(now)
}

// prune drops holds whose transition window has ended and waiters that have not asked
// for longer than a live one can take between two attempts: a hold's ttl and transition
// (the longest a waiter sleeps until the first hold can lapse), and its retries' jitter.
func (g *group) prune(now time.Time) {
	g.holders = slices.DeleteFunc(g.holders, func(h *holder) bool { return !h.transitionAt.After(now) })
	g.waiters = slices.DeleteFunc(g.waiters, func(w *waiter) bool {
		patience := 2*(w.c.ttl+w.c.transition) + 2*time.Second
		return w.c.backend.closed.Load() || now.Sub(w.seen) > patience
	})
}

func (g *group) holder(id string) *holder {
	for _, h := range g.holders {
		if h.id == id {
			return h
		}
	}
	return nil
}

func (g *group) waiting(c *contention) int {
	return slices.IndexFunc(g.waiters, func(w *waiter) bool { return w.c == c })
}

// admits reports whether the hold of the waiter at index i fits beside the holders
// together with those of every waiter ahead of it, or is a downgrade's read hold beside
// its own write hold.
func (g *group) admits(hold backend.Hold, i int) bool {
	if hold.Beside != "" && hold.Shared && len(g.holders) == 1 {
		if h := g.holders[0]; h.id == hold.Beside && !h.shared {
			return true
		}
	}
	return g.fits(i + 1)
}

// fits reports whether the holds of the first n waiters fit beside the holders: as many
// as there are permits left, or, for a read-write lock, a write hold alone or read holds
// beside no write hold.
func (g *group) fits(n int) bool {
	waiters := g.waiters[:n]
	if len(waiters) > 0 && waiters[0].c.hold.Kind == backend.Semaphore {
		return len(g.holders)+n <= g.permits
	}
	for _, h := range g.holders {
		if !h.shared {
			return false
		}
	}
	for _, w := range waiters {
		if !w.c.hold.Shared && (len(g.holders) > 0 || n > 1) {
			return false
		}
	}
	return true
}

// wake asks every waiter that now fits to attempt.
func (g *group) wake() {
	for n := 1; n <= len(g.waiters) && g.fits(n); n++ {
		g.waiters[n-1].c.wake()
	}
}

// soonest answers a waiter: the hold that ends first, or none.
func (g *group) soonest(now time.Time) backend.Record {
	var first *holder
	for _, h := range g.holders {
		if first == nil || h.transitionAt.Before(first.transitionAt) {
			first = h
		}
	}
	if first == nil {
		return backend.Record{}
	}
	return first.answer(now)
}

func (h *holder) renew(c *contention, now time.Time) {
	h.ttlAt = now.Add(c.ttl)
	h.transitionAt = h.ttlAt.Add(c.transition)
}

func (h *holder) answer(now time.Time) backend.Record {
	return backend.Record{
		Owner:      h.id,
		TTL:        h.ttlAt.Sub(now),
		Transition: h.transitionAt.Sub(now),
		Held:       now.Sub(h.acquiredAt),
		Token:      h.token,
	}
}
