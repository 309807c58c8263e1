package simba

import (
	"sync"
	"time"

	"github.com/simba-go/simba/internal/clock"
)

// relay is a timer that calls the fire of what set it last: it can serve one lifecycle
// after another, reset rather than made anew (spareTimer).
type relay struct {
	clock.Timer
	mu sync.Mutex
	to firer // what it calls
}

// firer is what a relay calls.
type firer interface{ fire() }

func (r *relay) fire() {
	r.mu.Lock()
	to := r.to
	r.mu.Unlock()
	to.fire()
}

// set makes r call to from now on.
func (r *relay) set(to firer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to = to
}

// spareTimer keeps a relay stopped before it fired, between a service's lifecycles: the
// next one resets it rather than make a timer. A nil spareTimer keeps none.
type spareTimer struct {
	mu sync.Mutex
	r  *relay
}

// take returns a relay set to call to.fire after d: the spare, or a new one on c (nil: the
// system clock).
func (s *spareTimer) take(c clock.Clock, d time.Duration, to firer) *relay {
	var r *relay
	if s != nil {
		s.mu.Lock()
		r, s.r = s.r, nil
		s.mu.Unlock()
	}
	if r == nil {
		if c == nil {
			c = clock.System
		}
		r = &relay{to: to}
		r.Timer = c.AfterFunc(d, r.fire)
		return r
	}
	r.set(to) // before the reset: its call reads it
	r.Reset(d)
	return r
}

// keep keeps r, whose Stop has just returned true (its function neither runs nor will,
// until it is reset), for the next take.
func (s *spareTimer) keep(r *relay) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r == nil {
		s.r = r
	}
}
