package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// The faults of holds: semaphores and read-write locks, 51–54. Their holders are
// contender processes that hold through the Lease API (holder), one hold at a time, and
// act on the referee, whose fence for holds holdFence documents; the checker judges
// capacity rather than exclusion. Only 51's semaphore on Redis runs in make test; all in
// make chaos.
func init() {
	addScenarios(
		scenario{num: 51, name: "holds_kill_permit_holder", stores: "RMPZ", full: true, quickOn: "R", run: func(s *S) { holdsKillHolder(s, semaphoreOfTwo) }},
		scenario{num: 51, name: "holds_kill_reader_or_writer", stores: "RMPZ", full: true, run: func(s *S) { holdsKillHolder(s, HoldModel{}) }},
		scenario{num: 52, name: "holds_pause_reader_or_writer", stores: "RMPZ", full: true, out: true, run: func(s *S) { holdsPauseHolder(s, HoldModel{}) }},
		scenario{num: 52, name: "holds_pause_permit_holder", stores: "RMPZ", full: true, out: true, run: func(s *S) { holdsPauseHolder(s, semaphoreOfTwo) }},
		scenario{num: 53, name: "holds_store_restart", stores: "RMPZ", full: true, run: holdsStoreRestart, timing: sessionOfTwoSeconds},
		scenario{num: 54, name: "holds_replies_lost", stores: "RMPZ", full: true, run: holdsRepliesLost},
	)
}

// semaphoreOfTwo is what 51, 53 and 54 hold: two permits among four holders.
var semaphoreOfTwo = HoldModel{Permits: 2}

// spawnHolders starts n holder processes of m, each holding for holdFor at a time (and
// adjusted by adjust, if set), all holding.
func (s *S) spawnHolders(m HoldModel, n int, holdFor time.Duration, adjust func(*ContenderConfig)) []*Proc {
	s.hold = &m
	var procs []*Proc
	for i := range n {
		procs = append(procs, s.spawnHolder(fmt.Sprintf("h%d", i), holdFor, adjust))
	}
	return procs
}

func (s *S) spawnHolder(id string, holdFor time.Duration, adjust func(*ContenderConfig)) *Proc {
	p := s.SpawnWith(id, func(c *ContenderConfig) {
		c.Hold, c.HoldFor = s.hold, holdFor
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
func (s *S) newHolder(procs []*Proc, t0 int64) (*Proc, Event) {
	s.T.Helper()
	var found Event
	_, ok := s.Await(s.failoverBound()+5*time.Second, func(events []Event) bool {
		for _, e := range events {
			if e.At > t0 && e.Kind == KindAcquired && procNamed(procs, e.Proc) != nil {
				found = e
				return true
			}
		}
		return false
	})
	if !ok {
		s.T.Fatalf("no hold began within %v", s.failoverBound()+5*time.Second)
	}
	return procNamed(procs, found.Proc), found
}

// wakeBound is how long a holder may wait while a permit is free in belief: a killed
// holder's permit is free once the store's hold lapses, so the crash bound, with
// awaitSuccessor's margin. A waiter that polls asks again by the end of the soonest hold's
// transition window plus a jitter of up to a second, so one more of those.
func (s *S) wakeBound() time.Duration {
	b := s.failoverBound()
	if s.Kit.HoldsPoll {
		b += s.Timing.TTL + s.Timing.Transition + time.Second
	}
	return b + max(b/2, time.Second)
}

// 51. A holder of a semaphore (2 permits, 4 holders, holds of 2 T) or of a read-write lock
// is killed (SIGKILL), again and again, and replaced by a new process: the killed hold
// lapses and a waiter takes it within the crash bound (C6, checked over the whole
// history too: nobody waits longer than that while a permit is free in belief); never
// more than two holders, never a writer beside anyone, believe (C2); tokens grow with
// admission (C3); the fence rejects what it must (C4); every Acquire keeps its deadline
// (C9).
func holdsKillHolder(s *S, m HoldModel) {
	// Holds of 2 T are renewed, and a waiter asks again while both permits are held.
	holdFor := 2 * s.Timing.TTL
	procs := s.spawnHolders(m, 4, holdFor, nil)
	for kills := range rounds(2, 8) {
		victim, _ := s.newHolder(procs, Now())
		time.Sleep(s.Timing.TTL / 2) // a hold under way, beside the others
		t0 := Now()
		s.Kill(victim)
		// A semaphore's permits are both held again; a read-write lock is held by another.
		taken := func(e []Event) bool {
			if m.Permits > 0 {
				return len(believers(e)) == m.Permits
			}
			_, ok := FirstAcquiredAfter(e, t0, victim.ID)
			return ok
		}
		if _, ok := s.Await(s.wakeBound(), taken); !ok {
			s.T.Errorf("C6 the hold of the killed %s was not taken again within %v", victim.ID, s.wakeBound())
		} else {
			s.result.Failovers = append(s.result.Failovers, time.Duration(Now()-t0))
			s.result.Bound = s.failoverBound()
		}
		procs = remove(procs, victim)
		procs = append(procs, s.spawnHolder(fmt.Sprintf("r%d", kills), holdFor, nil))
	}
	time.Sleep(s.Timing.TTL)
	s.finishHolds(s.wakeBound())
}

// 52 [out]. A holder of a read-write lock, or of a semaphore's permit, is stopped
// (SIGSTOP) between checking its lease's context and acting on the referee, for 2 (T + G)
// (ZooKeeper: 2 S), past its lease, then resumed. The others hold meanwhile; on resume the
// lease's context has ended (C5), the holder acts at most once more (the act it had
// begun), and the fence rejects that act if later holds superseded it (C4). Overlaps are
// measured, not forbidden.
func holdsPauseHolder(s *S, m HoldModel) {
	procs := s.spawnHolders(m, 4, s.Timing.TTL, func(c *ContenderConfig) {
		c.WorkPause = 2 * s.Timing.TTL / 5 // a pause most likely falls between check and act
	})
	length := 2 * (s.Timing.TTL + s.Timing.Transition)
	if s.Kit.Session {
		length = 2 * s.Timing.Session
	}
	s.newHolder(procs, Now())
	// Pause a holder that has just checked its context, in the middle of its work.
	ready := Now()
	var work Event
	if _, ok := s.Await(s.failoverBound()+5*time.Second, func(events []Event) bool {
		for _, e := range events {
			if e.Kind == KindWork && e.At > ready {
				work = e
				return true
			}
		}
		return false
	}); !ok {
		s.T.Fatal("no holder acted")
	}
	victim := procNamed(procs, work.Proc)
	t0 := Now()
	s.Pause(victim)
	time.Sleep(length)
	resumed := Now()
	s.Resume(victim)
	if at, ok := s.EventAfter(victim.ID, KindLost, t0, 5*time.Second); ok {
		s.note("the resumed holder's context ended %v after SIGCONT", roundedNs(at-resumed))
	} else {
		s.T.Errorf("C5 the context of %s's hold (token %d) did not end after a pause past its lease", victim.ID, work.Token)
	}
	time.Sleep(s.Timing.TTL)
	var acts, rejected int
	for _, e := range s.Events() {
		if e.Proc == victim.ID && e.Token == work.Token && e.At > resumed && (e.Kind == KindWriteOK || e.Kind == KindWriteStale) {
			acts++
			if e.Kind == KindWriteStale {
				rejected++
			}
		}
	}
	if acts > 1 {
		s.T.Errorf("C5 %s acted %d times with its lapsed hold (token %d) after it was resumed: at most the act it had begun", victim.ID, acts, work.Token)
	}
	f := s.finishHolds(0)
	s.note("pause %v of %s (token %d): %d act after resume, %d rejected; max crowd %v, %d stale acts rejected in all",
		length, victim.ID, work.Token, acts, rejected, f.MaxOverlap.Round(time.Millisecond), f.WritesRejected)
	for _, e := range s.Events() {
		if e.Kind == KindWriteStale {
			s.note("rejected: an act of %s (%s, token %d) %v after the resume", e.Proc, e.Mode, e.Token, roundedNs(e.At-resumed))
		}
	}
}

// 53. The store is killed and started again while a semaphore's permits are held: Redis
// after T + G (it restarts empty), the SQL servers and ZooKeeper at once. The holders stop
// believing by their local TTL end (ZooKeeper: at disconnect) (C5), both permits are
// held again once the store is back, never more than two believed at once (C2), and tokens
// keep growing with admission (C3).
func holdsStoreRestart(s *S) {
	f := storeFaults{s}
	procs := s.spawnHolders(semaphoreOfTwo, 4, s.Timing.TTL, nil)
	for range rounds(1, 3) {
		victim, _ := s.newHolder(procs, Now())
		var t0 int64
		heal := s.Fault("store crash", "kill -9 the server, restart it", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)
		if s.Kit.Name == "redis" {
			// Restarted empty: in the model only once every lease it held has lapsed.
			f.awaitLoss(victim.ID, t0, f.lossLimit())
			sleepUntilNs(t0 + int64(s.Timing.TTL+s.Timing.Transition))
		}
		restart, _ := healAt(heal)
		f.awaitLoss(victim.ID, t0, max(f.lossLimit(), time.Duration(restart-t0)))
		limit := s.failoverBound() + 10*time.Second // pools redial, ZooKeeper sessions reconnect
		if _, ok := s.Await(limit, func(e []Event) bool {
			n := 0
			for _, ev := range e {
				if ev.At > restart && ev.Kind == KindAcquired {
					n++
				}
			}
			return n >= 2
		}); !ok {
			s.T.Errorf("C6 fewer than two holds began within %v after the restart", limit)
		} else {
			s.note("two holds began %v after the restart (server down %v)", roundedNs(Now()-restart), roundedNs(restart-t0))
		}
	}
	s.finishHolds(0)
	f.noteLosses()
}

// 54. Replies lost: a holder's link swallows the store's answers for T (its renewals are
// applied, their answers never come), then its requests too for 2 (T + G), then heals.
// The holder stops believing by its local TTL end (C5), which a hold that began just
// before comes to long before its HoldFor of 4 T ends; the store lets the hold lapse and a
// waiter in, and never more than two holders believe at once (C2).
func holdsRepliesLost(s *S) {
	procs := s.spawnHolders(semaphoreOfTwo, 4, 4*s.Timing.TTL, nil)
	for range rounds(2, 6) {
		victim, began := s.newHolder(procs, Now())
		t0 := Now()
		heal := s.Fault("blackhole", "replies of "+victim.ID, func() { victim.Proxy.Blackhole(faultproxy.Down) }, victim.Proxy.Heal)
		bound := s.Timing.TTL
		if s.Kit.Session {
			bound = s.Timing.Session
		}
		if at, ok := s.EventAfter(victim.ID, KindLost, t0, bound+time.Second); ok {
			d := time.Duration(at - t0)
			s.result.Losses = append(s.result.Losses, d)
			if d > bound+4*s.Timing.Epsilon {
				s.T.Errorf("C5 %s believed its hold (token %d) %v after its replies were lost, past its local TTL end (%v)", victim.ID, began.Token, d, bound)
			}
		} else {
			s.T.Errorf("C5 %s still believes its hold (token %d) %v after its replies were lost", victim.ID, began.Token, bound+time.Second)
		}
		sleepUntilNs(t0 + int64(s.Timing.TTL))
		victim.Proxy.Blackhole(faultproxy.Both)
		time.Sleep(2 * (s.Timing.TTL + s.Timing.Transition))
		heal()
	}
	time.Sleep(s.Timing.TTL)
	s.finishHolds(0)
}

// finishHolds checks the run's history as holds of the run's model, with the wake-up
// bound wake (zero: none, for scenarios whose faults keep holds from being taken).
func (s *S) finishHolds(wake time.Duration) Findings {
	f := s.Finish(Options{OutOfModel: s.sc.out, Hold: s.hold, WakeBound: wake})
	s.result.Findings = f
	s.note("%s: %d holds, longest crowd %v, longest wait beside room %v, acts %d accepted / %d rejected",
		s.hold, f.Tenures, f.MaxOverlap.Round(time.Millisecond), f.MaxFreeWait.Round(time.Millisecond), f.WritesAccepted, f.WritesRejected)
	return f
}
