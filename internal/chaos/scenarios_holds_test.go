package chaos

import "time"

// The faults of holds: semaphores and read-write locks, 51–54. Their holders are
// contender processes that hold through the Lease API (holder), one hold at a time, and
// act on the referee, whose fence for holds holdFence documents; the checker judges
// capacity rather than exclusion. Only 51's semaphore on Redis runs in make test; all in
// make chaos.
func init() {
	addScenarios(
		scenario{num: 51, name: "holds_kill_permit_holder", stores: "RMPZ", full: true, quickOn: "R", run: func(s *S) { HoldsKillHolder(s.holds(semaphoreOfTwo)) }},
		scenario{num: 51, name: "holds_kill_reader_or_writer", stores: "RMPZ", full: true, run: func(s *S) { HoldsKillHolder(s.holds(HoldModel{})) }},
		scenario{num: 52, name: "holds_pause_reader_or_writer", stores: "RMPZ", full: true, out: true, run: func(s *S) { HoldsPauseHolder(s.holds(HoldModel{})) }},
		scenario{num: 52, name: "holds_pause_permit_holder", stores: "RMPZ", full: true, out: true, run: func(s *S) { HoldsPauseHolder(s.holds(semaphoreOfTwo)) }},
		scenario{num: 53, name: "holds_store_restart", stores: "RMPZ", full: true, run: holdsStoreRestart, timing: sessionOfTwoSeconds},
		scenario{num: 54, name: "holds_replies_lost", stores: "RMPZ", full: true, run: func(s *S) { HoldsRepliesLost(s.holds(semaphoreOfTwo)) }},
	)
}

// semaphoreOfTwo is what 51, 53 and 54 hold: two permits among four holders.
var semaphoreOfTwo = HoldModel{Permits: 2}

// holds returns the hold scenario run of m on s, whose figures go to s's result.
func (s *S) holds(m HoldModel) *Holds {
	return &Holds{Run: s.Run, Model: m, Out: s.sc.out, Result: s.result}
}

// 53. The store is killed and started again while a semaphore's permits are held: Redis
// after T + G (it restarts empty), the SQL servers and ZooKeeper at once. The holders stop
// believing by their local TTL end (ZooKeeper: at disconnect) (C5), both permits are
// held again once the store is back, never more than two believed at once (C2), and tokens
// keep growing with admission (C3).
func holdsStoreRestart(s *S) {
	h, f := s.holds(semaphoreOfTwo), storeFaults{s}
	procs := h.spawnHolders(4, s.Timing.TTL, nil)
	for range rounds(1, 3) {
		victim, _ := h.newHolder(procs, Now())
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
	h.finishHolds(0)
	f.noteLosses()
}
