package etcd_test

import (
	"github.com/simba-go/simba/internal/chaos"
)

// The hold scenarios on the 3-member cluster: internal/chaos's 51, 52 and 54, whose
// holders hold a semaphore or a read-write lock through the Lease API, each connected to
// a member in turn, judged by the checker for capacity. They run in make chaos only.
func init() {
	etcdScenarios = append(etcdScenarios,
		etcdScenario{name: "51_holds_kill_permit_holder", run: holds(semaphoreOfTwo, chaos.HoldsKillHolder)},
		etcdScenario{name: "51_holds_kill_reader_or_writer", run: holds(chaos.HoldModel{}, chaos.HoldsKillHolder)},
		etcdScenario{name: "52_holds_pause_reader_or_writer", out: true, run: holds(chaos.HoldModel{}, chaos.HoldsPauseHolder)},
		etcdScenario{name: "52_holds_pause_permit_holder", out: true, run: holds(semaphoreOfTwo, chaos.HoldsPauseHolder)},
		etcdScenario{name: "54_holds_replies_lost", run: holds(semaphoreOfTwo, chaos.HoldsRepliesLost)},
	)
}

// semaphoreOfTwo is what 51, 52 and 54 hold as a semaphore: two permits among four holders.
var semaphoreOfTwo = chaos.HoldModel{Permits: 2}

// holds returns the run of hold scenario sc with holders of m, the members taking new
// holders in turn; it logs the scenario's figures (failovers, losses) at the end.
func holds(m chaos.HoldModel, sc func(*chaos.Holds)) func(*etcdRun) {
	return func(r *etcdRun) {
		res := &chaos.Result{}
		next := 0
		sc(&chaos.Holds{Run: r.Run, Model: m, Out: r.sc.out, Result: res, Upstream: func() string {
			member := r.c.Members[next%len(r.c.Members)]
			next++
			return member.Addr()
		}})
		if len(res.Failovers) > 0 {
			r.T.Logf("holds taken again after a kill: %v (bound %v)", res.Failovers, res.Bound)
		}
		if len(res.Losses) > 0 {
			r.T.Logf("belief lost after the fault: %v", res.Losses)
		}
	}
}
