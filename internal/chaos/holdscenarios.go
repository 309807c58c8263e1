package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// The hold scenarios any store's fault plan runs: 51, 52 and 54, here and in etcd's
// module (which keeps the etcd client out of this one). Their holders are contender
// processes that hold through the Lease API (holder), one hold at a time, and act on the
// referee, whose fence for holds holdFence documents; the checker judges capacity rather
// than exclusion.

// Holds is one hold scenario's run: the harness's run, what its holders hold, and the
// result its figures and notes go to.
type Holds struct {
	*Run
	Model  HoldModel
	Out    bool // out of the lease model: overlaps are measured, fencing carries the weight
	Result *Result
	// Upstream, if set, returns the server a new holder's proxy leads to (the members of a
	// cluster in turn); the run's server otherwise.
	Upstream func() string
}

// spawnHolders starts n holder processes of the run's model, each holding for holdFor
// at a time (and adjusted by adjust, if set), all holding.
func (h *Holds) spawnHolders(n int, holdFor time.Duration, adjust func(*ContenderConfig)) []*Proc {
	var procs []*Proc
	for i := range n {
		procs = append(procs, h.spawnHolder(fmt.Sprintf("h%d", i), holdFor, adjust))
	}
	return procs
}

func (h *Holds) spawnHolder(id string, holdFor time.Duration, adjust func(*ContenderConfig)) *Proc {
	upstream := h.Server.Addr()
	if h.Upstream != nil {
		upstream = h.Upstream()
	}
	p := h.SpawnOnWith(id, upstream, func(c *ContenderConfig) {
		c.Hold, c.HoldFor = &h.Model, holdFor
		if adjust != nil {
			adjust(c)
		}
	})
	p.Send("start")
	return p
}

// believers returns the holders that believe they hold at the end of events, in the
// order their holds began.
func believers(events []Event) []string {
	var list []string
	for _, e := range events {
		switch e.Kind {
		case KindAcquired:
			list = append(list, e.Proc)
		case KindReleased, KindKilled:
			list = slices.DeleteFunc(list, func(p string) bool { return p == e.Proc })
		}
	}
	return list
}

// newHolder waits for a hold to begin after t0 among procs and returns its holder and the
// event: a hold that has just begun lasts about HoldFor more.
func (h *Holds) newHolder(procs []*Proc, t0 int64) (*Proc, Event) {
	h.T.Helper()
	var found Event
	_, ok := h.Await(h.failoverBound()+5*time.Second, func(events []Event) bool {
		for _, e := range events {
			if e.At > t0 && e.Kind == KindAcquired && procNamed(procs, e.Proc) != nil {
				found = e
				return true
			}
		}
		return false
	})
	if !ok {
		h.T.Fatalf("no hold began within %v", h.failoverBound()+5*time.Second)
	}
	return procNamed(procs, found.Proc), found
}

// wakeBound is how long a holder may wait while a permit is free in belief: a killed
// holder's permit is free once the store's hold lapses, so the crash bound, with
// awaitSuccessor's margin. A waiter that polls asks again by the end of the soonest hold's
// transition window plus a jitter of up to a second, so one more of those.
func (h *Holds) wakeBound() time.Duration {
	b := h.failoverBound()
	if h.Kit.HoldsPoll {
		b += h.Timing.TTL + h.Timing.Transition + time.Second
	}
	return b + max(b/2, time.Second)
}

// HoldsKillHolder is scenario 51. A holder of a semaphore (2 permits, 4 holders, holds
// of 2 T) or of a read-write lock is killed (SIGKILL), again and again, and replaced by a new process: the killed hold
// lapses and a waiter takes it within the crash bound (C6, checked over the whole
// history too: nobody waits longer than that while a permit is free in belief); never
// more than two holders, never a writer beside anyone, believe (C2); tokens grow with
// admission (C3); the fence rejects what it must (C4); every Acquire keeps its deadline
// (C9).
func HoldsKillHolder(h *Holds) {
	// Holds of 2 T are renewed, and a waiter asks again while both permits are held.
	holdFor := 2 * h.Timing.TTL
	procs := h.spawnHolders(4, holdFor, nil)
	for kills := range rounds(2, 8) {
		victim, _ := h.newHolder(procs, Now())
		time.Sleep(h.Timing.TTL / 2) // a hold under way, beside the others
		t0 := Now()
		h.Kill(victim)
		// A semaphore's permits are both held again; a read-write lock is held by another.
		taken := func(e []Event) bool {
			if h.Model.Permits > 0 {
				return len(believers(e)) == h.Model.Permits
			}
			_, ok := FirstAcquiredAfter(e, t0, victim.ID)
			return ok
		}
		if _, ok := h.Await(h.wakeBound(), taken); !ok {
			h.T.Errorf("C6 the hold of the killed %s was not taken again within %v", victim.ID, h.wakeBound())
		} else {
			h.Result.Failovers = append(h.Result.Failovers, time.Duration(Now()-t0))
			h.Result.Bound = h.failoverBound()
		}
		procs = remove(procs, victim)
		procs = append(procs, h.spawnHolder(fmt.Sprintf("r%d", kills), holdFor, nil))
	}
	time.Sleep(h.Timing.TTL)
	h.finishHolds(h.wakeBound())
}

// HoldsPauseHolder is scenario 52 [out]. A holder of a read-write lock, or of a
// semaphore's permit, is stopped (SIGSTOP) between checking its lease's context and acting on the referee, for 2 (T + G)
// (ZooKeeper: 2 S), past its lease, then resumed. The others hold meanwhile; on resume the
// lease's context has ended (C5), the holder acts at most once more (the act it had
// begun), and the fence rejects that act if later holds superseded it (C4). Overlaps are
// measured, not forbidden.
func HoldsPauseHolder(h *Holds) {
	procs := h.spawnHolders(4, h.Timing.TTL, func(c *ContenderConfig) {
		c.WorkPause = 2 * h.Timing.TTL / 5 // a pause most likely falls between check and act
	})
	length := 2 * (h.Timing.TTL + h.Timing.Transition)
	if h.Kit.Session {
		length = 2 * h.Timing.Session
	}
	h.newHolder(procs, Now())
	// Pause a holder that has just checked its context, in the middle of its work.
	ready := Now()
	var work Event
	if _, ok := h.Await(h.failoverBound()+5*time.Second, func(events []Event) bool {
		for _, e := range events {
			if e.Kind == KindWork && e.At > ready {
				work = e
				return true
			}
		}
		return false
	}); !ok {
		h.T.Fatal("no holder acted")
	}
	victim := procNamed(procs, work.Proc)
	t0 := Now()
	h.Pause(victim)
	time.Sleep(length)
	resumed := Now()
	h.Resume(victim)
	if at, ok := h.EventAfter(victim.ID, KindLost, t0, 5*time.Second); ok {
		h.note("the resumed holder's context ended %v after SIGCONT", roundedNs(at-resumed))
	} else {
		h.T.Errorf("C5 the context of %s's hold (token %d) did not end after a pause past its lease", victim.ID, work.Token)
	}
	time.Sleep(h.Timing.TTL)
	var acts, rejected int
	for _, e := range h.Events() {
		if e.Proc == victim.ID && e.Token == work.Token && e.At > resumed && (e.Kind == KindWriteOK || e.Kind == KindWriteStale) {
			acts++
			if e.Kind == KindWriteStale {
				rejected++
			}
		}
	}
	if acts > 1 {
		h.T.Errorf("C5 %s acted %d times with its lapsed hold (token %d) after it was resumed: at most the act it had begun", victim.ID, acts, work.Token)
	}
	f := h.finishHolds(0)
	h.note("pause %v of %s (token %d): %d act after resume, %d rejected; max crowd %v, %d stale acts rejected in all",
		length, victim.ID, work.Token, acts, rejected, f.MaxOverlap.Round(time.Millisecond), f.WritesRejected)
	for _, e := range h.Events() {
		if e.Kind == KindWriteStale {
			h.note("rejected: an act of %s (%s, token %d) %v after the resume", e.Proc, e.Mode, e.Token, roundedNs(e.At-resumed))
		}
	}
}

// HoldsRepliesLost is scenario 54. Replies lost: a holder's link swallows the store's
// answers for T (its renewals are applied, their answers never come), then its requests too for 2 (T + G), then heals.
// The holder stops believing by its local TTL end (C5), which a hold that began just
// before comes to long before its HoldFor of 4 T ends; the store lets the hold lapse and a
// waiter in, and never more than two holders believe at once (C2).
func HoldsRepliesLost(h *Holds) {
	procs := h.spawnHolders(4, 4*h.Timing.TTL, nil)
	for range rounds(2, 6) {
		victim, began := h.newHolder(procs, Now())
		t0 := Now()
		heal := h.Fault("blackhole", "replies of "+victim.ID, func() { victim.Proxy.Blackhole(faultproxy.Down) }, victim.Proxy.Heal)
		bound := h.beliefBound()
		if at, ok := h.EventAfter(victim.ID, KindLost, t0, bound+time.Second); ok {
			d := time.Duration(at - t0)
			h.Result.Losses = append(h.Result.Losses, d)
			if d > bound+4*h.Timing.Epsilon {
				h.T.Errorf("C5 %s believed its hold (token %d) %v after its replies were lost, past its local TTL end (%v)", victim.ID, began.Token, d, bound)
			}
		} else {
			h.T.Errorf("C5 %s still believes its hold (token %d) %v after its replies were lost", victim.ID, began.Token, bound+time.Second)
		}
		sleepUntilNs(t0 + int64(h.Timing.TTL))
		victim.Proxy.Blackhole(faultproxy.Both)
		time.Sleep(2 * (h.Timing.TTL + h.Timing.Transition))
		heal()
	}
	time.Sleep(h.Timing.TTL)
	h.finishHolds(0)
}

// finishHolds checks the run's history as holds of the run's model, with the wake-up
// bound wake (zero: none, for scenarios whose faults keep holds from being taken).
func (h *Holds) finishHolds(wake time.Duration) Findings {
	f := h.Finish(Options{OutOfModel: h.Out, Hold: &h.Model, WakeBound: wake})
	h.Result.Findings = f
	h.note("%s: %d holds, longest crowd %v, longest wait beside room %v, acts %d accepted / %d rejected",
		h.Model, f.Tenures, f.MaxOverlap.Round(time.Millisecond), f.MaxFreeWait.Round(time.Millisecond), f.WritesAccepted, f.WritesRejected)
	return f
}

// note records a note in the scenario's result and logs it.
func (h *Holds) note(format string, args ...any) { h.record(h.Result, format, args...) }

func remove(list []*Proc, p *Proc) []*Proc {
	out := list[:0:0]
	for _, q := range list {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

func roundedNs(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }

func sleepUntilNs(t int64) {
	if d := time.Duration(t - Now()); d > 0 {
		time.Sleep(d)
	}
}

func procNamed(procs []*Proc, id string) *Proc {
	for _, p := range procs {
		if p.ID == id {
			return p
		}
	}
	return nil
}
