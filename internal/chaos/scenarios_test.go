package chaos

import (
	"fmt"
	"sort"
	"time"
)

// scenarios is the fault plan; each scenario file adds its own from init, and TestChaos runs
// them in the order of their numbers.
var scenarios []scenario

func addScenarios(list ...scenario) {
	scenarios = append(scenarios, list...)
	sort.SliceStable(scenarios, func(i, j int) bool { return scenarios[i].num < scenarios[j].num })
}

func init() {
	addScenarios(
		scenario{num: 1, name: "steady", stores: "RMPZ", run: steady},
		scenario{num: 1, name: "steady_no_transition", stores: "RMPZ", run: steady, timing: noTransition},
		scenario{num: 7, name: "kill_owner", stores: "RMPZ", run: killOwner},
	)
}

// 1. Steady contention: five contender processes and one in-process contender, nobody
// stops: exactly one tenure, renewals invisible. Run with the default timing and again
// with no transition window, where renewals must come before the local TTL end.
func steady(s *S) {
	procs := s.spawn(5)
	s.owner(procs, 5*time.Second)
	s.pause(phase(6*time.Second, 60*time.Second))
	if n := Check(s.Events(), Options{Epsilon: s.Timing.Epsilon}).Tenures; n != 1 {
		s.T.Errorf("C3 one tenure: nobody stopped, yet %d tenures (a token that changes within a tenure ends it)", n)
	}
	s.finish()
}

// 7. kill -9 the owner, again and again: a survivor takes over once the lease lapses (the
// session expires), within the crash bound; the killed owner is replaced by a new process.
func killOwner(s *S) {
	procs := s.spawn(5)
	for kills := 0; kills < rounds(4, 20); {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		if owner.cmd == nil { // the in-process contender cannot be killed: make it step down
			t0 := Now()
			owner.Send("stop")
			s.awaitSuccessor(owner.ID, t0, s.failoverBound())
			owner.Send("start")
			continue
		}
		t0 := Now()
		s.Kill(owner)
		s.awaitSuccessor(owner.ID, t0, s.failoverBound())
		procs = remove(procs, owner)
		p := s.Spawn(fmt.Sprintf("r%d", kills))
		p.Send("start")
		procs = append(procs, p)
		kills++
	}
	s.finish()
}

func noTransition(t Timing) Timing {
	t.Transition = 0
	return t
}

// pause lets a phase run its course.
func (s *S) pause(d time.Duration) { time.Sleep(d) }
