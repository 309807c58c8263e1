package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

func init() {
	addScenarios(
		scenario{num: 60, name: "yield_to_paused_successor", stores: "RMPZ", run: yieldToPausedSuccessor, full: true},
		scenario{num: 61, name: "yield_successor_killed", stores: "RMPZ", run: yieldSuccessorKilled, full: true},
		scenario{num: 62, name: "yielder_paused_or_killed", stores: "RMPZ", run: yielderPausedOrKilled},
	)
}

// yielded is a Yield that returned: its contender's belief ended with it.
type yielded struct {
	proc     string
	asked    int64 // when the harness asked for it
	returned int64 // when Yield returned
}

// awaitYield waits for p's Yield asked for at asked to return: without an error, within
// what a Stop may take (C7; its deadline is T + G).
func (s *S) awaitYield(p *Proc, asked int64) yielded {
	s.T.Helper()
	done := s.awaitStepDown(p, asked, KindYielded, "Yield")
	if done.Note != "" {
		s.T.Errorf("C7 the Yield of %s failed: %s", p.ID, done.Note)
	}
	return yielded{proc: p.ID, asked: asked, returned: done.At}
}

// awaitStepDown waits for the event of kind that ends p's step-down (call) asked for at
// asked, within what a Stop may take (C7), and returns it.
func (s *S) awaitStepDown(p *Proc, asked int64, kind Kind, call string) Event {
	s.T.Helper()
	var done Event
	_, ok := s.Await(10*time.Second, func(events []Event) bool {
		for _, e := range events {
			if e.At > asked && e.Proc == p.ID && e.Kind == kind {
				done = e
				return true
			}
		}
		return false
	})
	if !ok {
		s.T.Fatalf("C7 the %s of %s did not return within 10s (its deadline: %v)", call, p.ID, s.Timing.TTL+s.Timing.Transition)
	}
	if d := time.Duration(done.At - asked); d > s.stopBound() {
		s.T.Errorf("C7 the %s of %s took %v, over %v", call, p.ID, d, s.stopBound())
	}
	return done
}

// lineUp puts successor next in line behind the owner, and waiters behind it: the waiters
// step out (Stop), the successor starts, then the waiters start again, one at a time
// (join). A late first attempt only makes the round miss its mark: the notes say how
// often the store named the successor.
func (s *S) lineUp(successor *Proc, waiters []*Proc) {
	s.T.Helper()
	for _, w := range waiters {
		t := Now()
		w.Send("stop")
		if _, ok := s.EventAfter(w.ID, KindStopped, t, 10*time.Second); !ok {
			s.T.Fatalf("the waiter %s did not stop", w.ID)
		}
	}
	for _, p := range append([]*Proc{successor}, waiters...) {
		s.join(p)
	}
}

// join starts p and gives it a call timeout after its Start returned for its first
// attempt, which puts it in line.
func (s *S) join(p *Proc) {
	s.T.Helper()
	t := Now()
	p.Send("start")
	if _, ok := s.EventAfter(p.ID, KindStarted, t, startPatience+5*time.Second); !ok {
		s.T.Fatalf("%s did not start", p.ID)
	}
	time.Sleep(s.Timing.CallTimeout)
}

// storeNames reports whether the store names id as the owner now.
func (s *S) storeNames(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owner, err := s.Kit.Owner(ctx, s.Server.Addr(), s.Mutex)
	return err == nil && owner == id
}

// lapse is how long a paused contender is held: past the lease (T + G) or the session
// that a grant or a place in the queue gave it, twice over.
func (s *S) lapse() time.Duration {
	if s.Kit.Session {
		return 2 * s.Timing.Session
	}
	return 2 * (s.Timing.TTL + s.Timing.Transition)
}

// yieldPair starts two contender processes, a and b, and waits for one to lead.
func (s *S) yieldPair() []*Proc {
	live := []*Proc{s.Spawn("a"), s.Spawn("b")}
	for _, p := range live {
		p.Send("start")
	}
	s.owner(live, s.failoverBound()+5*time.Second)
	return live
}

// 60. Yield to a paused successor: the owner yields while the waiter next in line is
// stopped (SIGSTOP), so that the hand-over reaches a contender that cannot take it. The
// successor blocks the mutex no longer than its lease or session allows: another waiter
// or the yielder leads within the crash bound. Resumed past that, the successor does not
// believe beside the new owner (C2), and tokens grow (C3).
func yieldToPausedSuccessor(s *S) {
	live := s.yieldPair()
	var marks []yielded
	named := 0
	n := rounds(2, 4)
	for i := range n {
		leader := s.owner(live, s.failoverBound()+5*time.Second)
		successor := s.Spawn(fmt.Sprintf("s%d", i))
		s.lineUp(successor, remove(live, leader))
		paused := Now()
		s.Pause(successor)
		y := s.awaitYield(leader, s.ask(leader))
		marks = append(marks, y)
		if s.storeNames(successor.ID) {
			named++
		}
		s.awaitSuccessor(successor.ID, y.asked, s.failoverBound())
		time.Sleep(s.lapse() - time.Duration(Now()-paused))
		s.Resume(successor)
		// A stale belief of the resumed successor would overlap the owner's (C2).
		time.Sleep(s.Timing.TTL)
		t := Now()
		successor.Send("stop")
		if _, ok := s.EventAfter(successor.ID, KindStopped, t, 10*time.Second); !ok {
			s.T.Errorf("C7 the resumed successor %s did not stop", successor.ID)
		}
	}
	s.note("%d yields to a successor paused for %v: the store named it owner right after %d of them", n, s.lapse(), named)
	s.finish()
	s.checkYielders(marks)
}

// ask tells p to yield and returns when.
func (s *S) ask(p *Proc) int64 {
	t := Now()
	p.Send("yield")
	return t
}

// 61. The successor killed mid-hand-over: the owner yields, and the waiter next in line
// is killed (SIGKILL) at once, a few milliseconds either side of the release reaching the
// store. A hand-over to the dead process blocks the mutex no longer than its lease or
// session: another waiter or the yielder leads within the crash bound.
func yieldSuccessorKilled(s *S) {
	live := s.yieldPair()
	var marks []yielded
	n := rounds(3, 6)
	for i := range n {
		leader := s.owner(live, s.failoverBound()+5*time.Second)
		successor := s.Spawn(fmt.Sprintf("s%d", i))
		s.lineUp(successor, remove(live, leader))
		asked := s.ask(leader)
		time.Sleep(rand.N(5 * time.Millisecond)) // the phase of the kill in the hand-over
		s.Kill(successor)
		marks = append(marks, s.awaitYield(leader, asked))
		s.awaitSuccessor(successor.ID, asked, s.failoverBound())
	}
	s.finish()
	s.checkYielders(marks)
}

// 62. The yielder paused or killed as its Yield returns, with waiters: the mutex is back
// on the store by then, so a waiter leads as after a Stop, whatever becomes of the
// yielder. The paused one is held past its lease or session and resumed: it wrote
// nothing since its Yield returned, and believes only once it leads again (a stale write
// of its would be rejected by the referee, a stale belief overlap the new owner's).
func yielderPausedOrKilled(s *S) {
	// Work between checking the tenure context and writing, during which the owner
	// yields: Yield waits for it (OnReleased does), while a yielder that still believed
	// would be paused inside it and write with its token on resume.
	worker := func(id string) *Proc {
		return s.SpawnWith(id, func(c *ContenderConfig) { c.WorkPause = s.Timing.TTL / 5 })
	}
	live := []*Proc{worker("a"), worker("b"), worker("c")}
	for _, p := range live {
		s.join(p)
	}
	var marks []yielded
	n := rounds(2, 6)
	for i := range n {
		yielder := s.owner(live, s.failoverBound()+5*time.Second)
		if _, ok := s.EventAfter(yielder.ID, KindWork, Now(), 5*time.Second); !ok {
			s.T.Fatalf("the owner %s did not work", yielder.ID)
		}
		y := s.awaitYield(yielder, s.ask(yielder))
		marks = append(marks, y)
		// The hand-over begins once OnReleased has returned, after the work under way.
		released, ok := s.EventAfter(yielder.ID, KindReleased, y.asked, 0)
		if !ok {
			s.T.Errorf("C1 the Yield of %s returned before OnReleased", yielder.ID)
			released = y.asked
		}
		what := "paused"
		if i%2 == 1 {
			what = "killed"
			s.Kill(yielder)
		} else {
			s.Pause(yielder)
		}
		paused := Now()
		d := s.awaitSuccessor(yielder.ID, released, s.gracefulBound())
		s.note("yield %d: %s %s as its Yield returned, %v after it was asked for; the next owner led %v after its OnReleased",
			i, yielder.ID, what, time.Duration(y.returned-y.asked).Round(time.Millisecond), d.Round(time.Millisecond))
		if what == "killed" {
			live = remove(live, yielder)
			if i == n-1 {
				break
			}
			// The yielder went back in line before it died: a session store keeps its place
			// until the session expires (the crash bound), and a yield before that would
			// find it in front of the waiters.
			time.Sleep(s.failoverBound())
			p := worker(fmt.Sprintf("r%d", i))
			s.join(p) // a waiter in line at the next yield
			live = append(live, p)
			continue
		}
		time.Sleep(s.lapse() - time.Duration(Now()-paused))
		s.Resume(yielder)
		time.Sleep(s.Timing.TTL)
	}
	f := s.finish()
	s.checkYielders(marks)
	s.note("%d yields, %d writes rejected as stale", len(marks), f.WritesRejected)
}

// checkYielders checks that no yielder wrote to the referee after its Yield returned and
// before it led again (C4): Yield ends belief before it returns.
func (s *S) checkYielders(marks []yielded) {
	s.T.Helper()
	events := s.Events()
	for _, y := range marks {
		for _, e := range events {
			if e.At <= y.returned || e.Proc != y.proc {
				continue
			}
			if e.Kind == KindAcquired {
				break
			}
			if e.Kind == KindWriteOK || e.Kind == KindWriteStale {
				s.T.Errorf("C4 referee: %s wrote with token %d (%s) %v after its Yield returned", y.proc, e.Token, e.Kind,
					time.Duration(e.At-y.returned).Round(time.Millisecond))
				break
			}
		}
	}
}
