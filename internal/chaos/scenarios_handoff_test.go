package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

func init() {
	addScenarios(
		scenario{num: 63, name: "handoff_past_the_head", stores: "RMPZ", run: handOffPastTheHead, full: true},
		scenario{num: 64, name: "handoff_target_paused_or_killed", stores: "RMPZ", run: handOffTargetLost, full: true},
		scenario{num: 65, name: "handoff_owner_killed", stores: "RMPZ", run: handOffOwnerKilled, full: true},
	)
}

// askHandOff tells p to hand the mutex to the contender to and returns when.
func (s *S) askHandOff(p *Proc, to string) int64 {
	t := Now()
	p.Send("handoff " + to)
	return t
}

// awaitHandOff waits for p's HandOff asked for at asked to return (C7), and reports its
// error text.
func (s *S) awaitHandOff(p *Proc, asked int64) string {
	s.T.Helper()
	return s.awaitStepDown(p, asked, KindHandedOff, "HandOff").Note
}

// removeAll returns procs without those in gone.
func removeAll(procs, gone []*Proc) []*Proc {
	return slices.DeleteFunc(slices.Clone(procs), func(p *Proc) bool { return slices.Contains(gone, p) })
}

// 63. Hand-off past the head of the line: the owner hands the mutex to the second
// contender waiting, not the first. The named one leads next (not the head, not the
// owner again), within a hand-over's time, and nobody believes beside anyone (C2); the
// gap from the ask to the target's OnAcquired is the figure of the report.
func handOffPastTheHead(s *S) {
	live := []*Proc{s.Spawn("a"), s.Spawn("b"), s.Spawn("c")}
	for _, p := range live {
		s.join(p)
	}
	var gaps []time.Duration
	n := rounds(4, 12)
	for range n {
		owner := s.owner(live, s.failoverBound()+5*time.Second)
		line := removeAll(live, []*Proc{owner})
		s.lineUp(line[0], line[1:])
		target := line[1]
		asked := s.askHandOff(owner, target.ID)
		if msg := s.awaitHandOff(owner, asked); msg != "" {
			s.T.Errorf("H1 the HandOff of %s to %s failed: %s", owner.ID, target.ID, msg)
			continue
		}
		events, ok := s.Await(s.failoverBound()+5*time.Second, func(e []Event) bool {
			_, found := FirstAcquiredAfter(e, asked, owner.ID)
			return found
		})
		if !ok {
			s.T.Errorf("C6 nobody led within %v after %s handed off to %s", s.failoverBound()+5*time.Second, owner.ID, target.ID)
			continue
		}
		e, _ := FirstAcquiredAfter(events, asked, owner.ID)
		if e.Proc != target.ID {
			s.T.Errorf("H1 %s handed off to %s, but %s led next", owner.ID, target.ID, e.Proc)
			continue
		}
		gaps = append(gaps, time.Duration(e.At-asked))
	}
	s.result.Failovers = append(s.result.Failovers, gaps...)
	s.result.Bound = s.gracefulBound()
	slices.Sort(gaps)
	if len(gaps) > 0 {
		s.note("%d hand-offs past the head: from the ask to the target's OnAcquired p50 %v, max %v",
			len(gaps), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	}
	s.finish()
}

// 64. The target paused or killed mid-hand-off: the owner hands off to a contender that is
// stopped (SIGSTOP) as it waits, or killed a few milliseconds either side of the hand-off
// reaching the store. The target blocks the mutex no longer than its lease or session: a
// contender leads within the crash bound; a resumed target does not believe beside the new
// owner (C2), and tokens grow (C3).
func handOffTargetLost(s *S) {
	live := []*Proc{s.Spawn("a"), s.Spawn("b")}
	for _, p := range live {
		s.join(p)
	}
	n := rounds(2, 6)
	for i := range n {
		owner := s.owner(live, s.failoverBound()+5*time.Second)
		target := s.Spawn(fmt.Sprintf("t%d", i))
		s.lineUp(target, removeAll(live, []*Proc{owner}))
		killed := i%2 == 1
		var asked, paused int64
		if killed {
			asked = s.askHandOff(owner, target.ID)
			time.Sleep(rand.N(5 * time.Millisecond)) // the phase of the kill in the hand-off
			s.Kill(target)
		} else {
			// Paused before the hand-off reaches it, the target is a waiter that cannot
			// take what it is given; paused after, it would be an owner paused past its
			// lease, which is out of the model (scenario 9 measures it).
			s.Pause(target)
			paused = Now()
			asked = s.askHandOff(owner, target.ID)
		}
		if msg := s.awaitHandOff(owner, asked); msg != "" {
			s.note("round %d: the HandOff failed (%s)", i, msg)
		}
		s.awaitSuccessor(target.ID, asked, s.failoverBound())
		if killed {
			continue
		}
		time.Sleep(s.lapse() - time.Duration(Now()-paused))
		s.Resume(target)
		time.Sleep(s.Timing.TTL) // a stale belief of the resumed target would overlap (C2)
		t := Now()
		target.Send("stop")
		if _, ok := s.EventAfter(target.ID, KindStopped, t, 10*time.Second); !ok {
			s.T.Errorf("C7 the resumed target %s did not stop", target.ID)
		}
	}
	s.finish()
}

// 65. The owner killed mid-hand-off: killed a few milliseconds after it was asked to hand
// off, before or after its hand-off reached the store. Either the target leads at once or
// the owner's lease (session) lapses and someone leads within the crash bound; never two
// at once (C2).
func handOffOwnerKilled(s *S) {
	live := []*Proc{s.Spawn("a"), s.Spawn("b"), s.Spawn("c")}
	for _, p := range live {
		s.join(p)
	}
	n := rounds(2, 6)
	for i := range n {
		owner := s.owner(live, s.failoverBound()+5*time.Second)
		line := removeAll(live, []*Proc{owner})
		asked := s.askHandOff(owner, line[len(line)-1].ID)
		time.Sleep(rand.N(5 * time.Millisecond))
		s.Kill(owner)
		s.awaitSuccessor(owner.ID, asked, s.failoverBound())
		live = remove(live, owner)
		p := s.Spawn(fmt.Sprintf("r%d", i))
		s.join(p)
		live = append(live, p)
	}
	s.finish()
}
