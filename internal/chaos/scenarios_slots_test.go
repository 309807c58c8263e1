package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

func init() {
	addScenarios(
		scenario{num: 66, name: "slots_across_leader_kills", stores: "RMPZ", run: slotsAcrossLeaderKills, full: true, quickOn: "R"},
	)
}

// slotEvery is the slot length of the scheduler scenarios: several slots per failover.
const slotEvery = 200 * time.Millisecond

// 66. Each slot once across leader kills: three Scheduler processes on a Timetable of
// 200ms slots, whose runs take a quarter of a slot; the leader is killed (SIGKILL), or
// paused past its lease and resumed, again and again at a random phase of a slot (a run
// under way, a claim in flight, between runs). The store records each slot a leader
// starts: no slot is started twice (S1), whoever leads; a resumed leader believes beside
// no one (C2).
func slotsAcrossLeaderKills(s *S) {
	spawn := func(id string) *Proc {
		return s.SpawnWith(id, func(c *ContenderConfig) { c.SlotEvery, c.WorkPause = slotEvery, slotEvery/4 })
	}
	live := []*Proc{spawn("a"), spawn("b"), spawn("c")}
	for _, p := range live {
		p.Send("start")
	}
	n := rounds(4, 12)
	for i := range n {
		leader := s.owner(live, s.failoverBound()+5*time.Second)
		if _, ok := s.EventAfter(leader.ID, KindSlotRun, Now(), 5*time.Second); !ok {
			s.T.Fatalf("the leader %s ran no slot within 5s", leader.ID)
		}
		time.Sleep(rand.N(slotEvery))
		t0 := Now()
		if i%3 == 2 {
			s.Pause(leader)
			s.awaitSuccessor(leader.ID, t0, s.failoverBound())
			time.Sleep(s.lapse() - time.Duration(Now()-t0))
			s.Resume(leader)
			time.Sleep(s.Timing.TTL) // a run the resumed leader started now would be a slot's second
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
	if _, ok := s.EventAfter(leader.ID, KindSlotRun, Now(), 5*time.Second); !ok {
		s.T.Errorf("the last leader %s ran no slot within 5s", leader.ID)
	}
	s.finish()
	twice, slots := SlotsRunTwice(s.Events())
	for slot, runs := range twice {
		s.T.Errorf("S1 the slot %s was started %d times", slot, runs)
	}
	s.note("%d leaders killed or paused: %d slots run, %d of them more than once", n, slots, len(twice))
}
