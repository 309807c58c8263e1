package clock

import (
	"slices"
	"sync"
	"time"
)

// Pausable is a clock for tests that models a process that is paused (SIGSTOP, a long GC
// pause, a stopped VM): time goes on, but while paused none of the timers set on this
// clock fires. Timers that came due during the pause are held; after Resume the test
// fires them itself, one at a time and in an order of its choosing, as a resumed
// process's goroutines run in an order nobody chose.
//
// Time itself comes from Base (the system clock, or synctest's fake time inside a
// bubble), so a Pausable and the stores a test runs agree on it.
type Pausable struct {
	Base Clock

	mu     sync.Mutex
	paused bool
	held   []*heldTimer // came due while paused, in the order they came due
}

// NewPausable returns a running Pausable on base.
func NewPausable(base Clock) *Pausable { return &Pausable{Base: base} }

// Now returns Base's time: a paused process's clock keeps running.
func (c *Pausable) Now() time.Time { return c.Base.Now() }

// AfterFunc sets a timer whose f does not run while the clock is paused.
func (c *Pausable) AfterFunc(d time.Duration, f func()) Timer {
	t := &heldTimer{c: c, f: f}
	t.base = c.Base.AfterFunc(d, t.fire)
	return t
}

// Pause stops the timers from firing: those that come due are held.
func (c *Pausable) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = true
}

// Paused reports whether the clock is paused.
func (c *Pausable) Paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// Resume lets timers fire again and returns those held during the pause, in the order
// they came due. The caller fires them (Fire), in any order; until it does they stay
// held, as the timers of a resumed process whose goroutines have not run yet.
func (c *Pausable) Resume() []Due {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = false
	held := c.held
	c.held = nil
	due := make([]Due, len(held))
	for i, t := range held {
		due[i] = Due{t}
	}
	return due
}

// Due is a timer that came due while its clock was paused.
type Due struct{ t *heldTimer }

// Fire runs the timer's function on a goroutine of its own, unless the timer was
// stopped or reset meanwhile.
func (d Due) Fire() {
	t := d.t
	t.c.mu.Lock()
	live := t.pending
	t.pending = false
	t.c.mu.Unlock()
	if live {
		go t.f()
	}
}

type heldTimer struct {
	c       *Pausable
	f       func()
	base    Timer
	pending bool // held and neither fired, stopped nor reset since; guarded by c.mu
}

func (t *heldTimer) fire() {
	c := t.c
	c.mu.Lock()
	if c.paused {
		t.pending = true
		c.held = append(c.held, t)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	t.f()
}

// unhold forgets a held firing; it reports whether there was one. Called with c.mu held.
func (t *heldTimer) unhold() bool {
	if !t.pending {
		return false
	}
	t.pending = false
	t.c.held = slices.DeleteFunc(t.c.held, func(h *heldTimer) bool { return h == t })
	return true
}

func (t *heldTimer) Stop() bool {
	t.c.mu.Lock()
	held := t.unhold()
	t.c.mu.Unlock()
	return t.base.Stop() || held
}

func (t *heldTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	held := t.unhold()
	t.c.mu.Unlock()
	return t.base.Reset(d) || held
}
