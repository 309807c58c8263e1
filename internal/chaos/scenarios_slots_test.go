package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

func init() {
	addScenarios(
		scenario{num: 66, name: "slots_across_leader_changes", stores: "RMPZ", run: slotsAcrossLeaderChanges, full: true},
	)
}

// slotPeriod is the period of the scheduler scenarios: longer than a yield's hand-over, so
// that a new leader that ran at once would run within a period of the last run.
const slotPeriod = 2 * time.Second

// 66. Each slot once across leader changes: three Scheduler processes of period 2s, whose
// runs take a tenth of it; the leader yields or is killed (SIGKILL), again and again at a
// random phase of the period (a run under way, a claim in flight, between runs), and the
// next leader takes over within the period. The store records each slot a leader starts,
// so a new leader runs a period or more after the last run, whoever ran it (S1). (A
// leader paused past its lease is out of the model: the simulation covers its slots.)
func slotsAcrossLeaderChanges(s *S) {
	spawn := func(id string) *Proc {
		return s.SpawnWith(id, func(c *ContenderConfig) { c.SlotEvery, c.WorkPause = slotPeriod, slotPeriod/10 })
	}
	live := []*Proc{spawn("a"), spawn("b"), spawn("c")}
	for _, p := range live {
		p.Send("start")
	}
	n := rounds(4, 12)
	for i := range n {
		leader := s.owner(live, s.failoverBound()+5*time.Second)
		if _, ok := s.EventAfter(leader.ID, KindSlotRun, Now(), slotPeriod+5*time.Second); !ok {
			s.T.Fatalf("the leader %s ran no slot within %v", leader.ID, slotPeriod+5*time.Second)
		}
		time.Sleep(rand.N(slotPeriod / 4))
		t0 := Now()
		if i%2 == 0 {
			s.awaitYield(leader, s.ask(leader))
			s.awaitSuccessor(leader.ID, t0, s.failoverBound())
			continue
		}
		s.Kill(leader)
		s.awaitSuccessor(leader.ID, t0, s.failoverBound())
		live = remove(live, leader)
		p := spawn(fmt.Sprintf("r%d", i))
		p.Send("start")
		live = append(live, p)
	}
	leader := s.owner(live, s.failoverBound()+5*time.Second)
	if _, ok := s.EventAfter(leader.ID, KindSlotRun, Now(), slotPeriod+5*time.Second); !ok {
		s.T.Errorf("the last leader %s ran no slot within %v", leader.ID, slotPeriod+5*time.Second)
	}
	s.finish()
	near, runs := SlotsTooClose(s.Events(), slotPeriod)
	for _, c := range near {
		s.T.Errorf("S1 %s ran the slot at %s only %v after %s ran the slot at %s (period %v)",
			c[1].proc, c[1].slot.Format("15:04:05.000"), c[1].slot.Sub(c[0].slot), c[0].proc, c[0].slot.Format("15:04:05.000"), slotPeriod)
	}
	s.note("%d leader changes (yields, kills): %d runs, %d within a period of the run before", n, runs, len(near))
}
