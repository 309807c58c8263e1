package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/goroutine"
)

// violate records a broken rule. Called with w.mu held.
func (w *world) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// handOut registers a tenure context handed to a user and checks it at that instant: it
// is live (a lease, a Scheduler run), its token belongs to its owner and does not go
// back, and nobody else believes in another tenure of the mutex.
func (w *world) handOut(l *lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.ctx.Err() != nil {
		// OnAcquired may come after the tenure it tells of ended, and a concurrent Stop,
		// Release or Close may end a tenure as it is handed out: only a tenure that had
		// been lost must not be.
		if l.kind != "service" && errors.Is(context.Cause(l.ctx), simba.ErrOwnershipLost) {
			w.violate("%s of p%d handed out %s (token %d) on a tenure that had been lost", l.kind, l.proc.id, l.mutex, l.token)
		}
		return
	}
	key := fmt.Sprintf("%s#%d", l.mutex, l.token)
	switch owner, seen := w.tokenOwner[key]; {
	case seen && owner != l.owner:
		w.violate("token %d of %s belongs to %s and to %s", l.token, l.mutex, owner, l.owner)
	case !seen && l.token < w.maxToken[l.mutex]:
		w.violate("token of %s went back: %s got %d after %d", l.mutex, l.owner, l.token, w.maxToken[l.mutex])
	}
	w.tokenOwner[key] = l.owner
	w.maxToken[l.mutex] = max(w.maxToken[l.mutex], l.token)
	w.leases = append(w.leases, l)
	w.exclusive("the hand-out of " + key + " to " + l.owner)
}

// slotRun checks a Scheduler's run against the slot the store records (read past the
// links' faults): the run's tenure claimed it, a Period or more after the slot of the
// mutex's last run, whoever led: no slot runs twice.
func (w *world) slotRun(l *lease) {
	last, err := w.watch[w.mutexIndex(l.mutex)].(backend.SlotRecorder).LastSlot(context.Background())
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || l.ctx.Err() != nil {
		return // a run on an ended tenure is handOut's to judge
	}
	prev := w.ranSlot[l.mutex]
	switch {
	case last.Token != l.token:
		w.violate("a Scheduler run of %s by %s (token %d) began with the slot at %v recorded for token %d", l.mutex, l.owner, l.token, last.At, last.Token)
	case !prev.IsZero() && last.At.Sub(prev) < schedPeriod:
		w.violate("a Scheduler run of %s by %s (token %d) has the slot at %v, %v after the last run's at %v", l.mutex, l.owner, l.token, last.At, last.At.Sub(prev), prev)
	}
	w.ranSlot[l.mutex] = last.At
}

// exclusive checks that, per mutex, at most one tenure is believed: the live contexts all
// carry one token. A context's Err looks at its local TTL end itself. Called with w.mu
// held.
func (w *world) exclusive(when string) {
	for _, m := range w.names {
		live := map[uint64]*lease{}
		for _, l := range w.leases {
			if l.mutex != m || l.ctx.Err() != nil {
				continue
			}
			if o, ok := live[l.token]; ok && o.owner != l.owner {
				w.violate("at %s: token %d of %s is believed by %s and by %s", when, l.token, m, o.owner, l.owner)
			}
			live[l.token] = l
		}
		if len(live) > 1 {
			var who []string
			for tok, l := range live {
				who = append(who, fmt.Sprintf("%s (%s of p%d, token %d)", l.owner, l.kind, l.proc.id, tok))
			}
			slices.Sort(who)
			w.violate("at %s: %d believers of %s at once: %s", when, len(live), m, strings.Join(who, ", "))
		}
	}
}

// finish records that c returned err, and checks how: by its deadline, matching a context
// error only when its context ended, and (an Acquire that waits) with a lease or a reason
// other than giving up while its context was live.
func (w *world) finish(c *call, err error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	c.done, c.err = true, err
	if !c.deadline.IsZero() && now.After(c.deadline) {
		w.violate("%s returned %v after its deadline", c.what, now.Sub(c.deadline))
	}
	if err == nil || c.ctx.Err() != nil {
		return
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		w.violate("%s failed with a context error although its context had not ended: %v", c.what, err)
	}
	if c.waits && !errors.Is(err, simba.ErrClosed) && !errors.Is(err, simba.ErrOwnershipLost) && !errors.Is(err, simba.ErrAlreadyHeld) {
		w.violate("%s gave up although its context had not ended: %v", c.what, err)
	}
}

// check runs the checks of a step, once every goroutine of the run is blocked.
func (w *world) check(step int) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	when := fmt.Sprintf("step %d", step)
	for _, c := range w.calls {
		if !c.done && !c.deadline.IsZero() && !now.Before(c.deadline) {
			w.violate("%s still runs %v after its deadline", c.what, now.Sub(c.deadline))
			c.deadline = time.Time{} // said once
		}
	}
	w.exclusive(when)
	w.withinCapacity(when)
	w.ownEnds()
	w.waitersServed(now)
	for _, p := range w.procs {
		for _, a := range append(p.services, p.scheds...) {
			if a.run != nil && !a.run.done && a.closed {
				w.violate("Run of %s still blocks after its %s was closed", a.id, a.kind)
				a.run = nil
			}
		}
	}
	w.forget()
}

// ownEnds checks that a Locker's or Mutexes' lease context that the simulation has not
// given back ended only by a loss: a context that ends as if released, while the holder
// still holds, was given to it on a tenure that was being given back.
func (w *world) ownEnds() {
	for _, l := range w.leases {
		if l.done || l.ended || (l.kind != "locker" && l.kind != "mutexes" && !isHold(l.kind)) || l.ctx.Err() == nil {
			continue
		}
		if !errors.Is(context.Cause(l.ctx), simba.ErrOwnershipLost) {
			w.violate("the %s lease of p%d on %s (token %d) ended while held, not by a loss: %v", l.kind, l.proc.id, l.mutex, l.token, context.Cause(l.ctx))
		}
		l.ended = true
	}
}

// waitersServed checks liveness: an Acquire that waits while nobody holds the mutex (no
// lease not given back, no live tenure of a service or scheduler) is served within calm,
// unless a fault, a pause or a crash disturbed the run meanwhile.
func (w *world) waitersServed(now time.Time) {
	disturbed := now.Before(w.calmAt)
	for _, p := range w.procs {
		disturbed = disturbed || p.paused()
	}
	for _, m := range append(slices.Clone(w.names), semName, rwName) {
		waiting, holding := false, 0
		for _, c := range w.calls {
			waiting = waiting || (!c.done && c.waits && c.mutex == m)
		}
		for _, l := range w.leases {
			if l.mutex == m && ((!l.done && (l.kind == "locker" || l.kind == "mutexes" || isHold(l.kind))) || l.ctx.Err() == nil) {
				holding++
			}
		}
		if !waiting || holding >= capacity(m) || disturbed {
			w.idleSince[m] = time.Time{}
			continue
		}
		if w.idleSince[m].IsZero() {
			w.idleSince[m] = now
		} else if idle := now.Sub(w.idleSince[m]); idle > calm {
			w.violate("waiters for %s sleep while nobody holds it, for %v", m, idle)
			w.idleSince[m] = time.Time{}
		}
	}
}

// forget drops what no check needs any more: tenures that ended and calls that returned.
func (w *world) forget() {
	w.leases = slices.DeleteFunc(w.leases, func(l *lease) bool {
		return l.ctx.Err() != nil && (l.done || (l.kind != "locker" && l.kind != "mutexes" && !isHold(l.kind)))
	})
	w.calls = slices.DeleteFunc(w.calls, func(c *call) bool { return c.done })
}

// disturb marks a fault, a pause or a crash: the liveness checks wait for calm after it,
// and a TryAcquire under way cannot be blamed for failing.
func (w *world) disturb(until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := until.Add(calm); t.After(w.calmAt) {
		w.calmAt = t
	}
	for _, m := range w.names {
		w.epoch[m]++
	}
}

// leftovers returns the stacks of the goroutines of this bubble other than the caller's
// and those of testing/synctest itself.
func leftovers() []string {
	self := fmt.Sprintf("goroutine %d ", goroutine.ID())
	var out []string
	for _, s := range goroutine.Stacks() {
		header, _, _ := strings.Cut(s, "\n")
		if strings.Contains(header, "synctest bubble") && !strings.HasPrefix(s, self) && !strings.Contains(s, "testing/synctest.") {
			out = append(out, s)
		}
	}
	return out
}
