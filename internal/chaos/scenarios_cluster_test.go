package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/internal/testserver"
)

// The scenarios of a Redis Cluster (issue 16), beyond the single-node plan: the mutex's keys
// share one hash slot, whose primary is failed over or which moves to another primary
// while contenders contend through ClusterClients.
func init() {
	addScenarios(
		scenario{num: 35, name: "slot_primary_killed", stores: "C", out: true, run: slotPrimaryKilled},
		scenario{num: 36, name: "slot_moved", stores: "C", run: slotMoved},
	)
}

// 35. The primary of the mutex's slot is killed (SIGKILL); its replica takes the slot over
// after the cluster's node timeout (2 s). Replication is asynchronous, so this is out of
// the lease model: overlaps are measured, tokens and stale writes judged. Someone
// believes again within 30 s; the old primary comes back as a replica.
func slotPrimaryKilled(s *S) {
	c := serverOf[*testserver.RedisCluster](s)
	procs := s.spawnDirect(3)
	s.owner(procs, 10*time.Second)
	slot := s.mutexSlot(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	primary, err := c.Primary(ctx, slot)
	if err != nil {
		s.T.Fatal(err)
	}
	t0 := Now()
	s.Fault("failover", fmt.Sprintf("%s, the primary of slot %d, killed", primary.Name, slot), func() { _ = primary.Kill() }, func() {})
	next, err := c.AwaitPrimary(ctx, slot, primary)
	if err != nil {
		s.T.Fatal(err)
	}
	s.note("%s took slot %d over %v after its primary was killed", next.Name, slot, time.Duration(Now()-t0).Round(time.Millisecond))
	s.awaitHolder(t0, "the primary of the mutex's slot was killed")
	s.restart(primary)
	s.pause(s.Timing.TTL)
	s.finish()
}

// 36. The mutex's slot moves from one primary to another, again and again, while
// contenders contend: keys move with MIGRATE, clients are redirected (ASK, MOVED) or told
// to try again (TRYAGAIN, a script whose keys are split). Nothing is lost, so this is in
// the model: one believer at a time, tokens that grow, and someone believing after each
// move.
func slotMoved(s *S) {
	c := serverOf[*testserver.RedisCluster](s)
	procs := s.spawnDirect(3)
	s.owner(procs, 10*time.Second)
	slot := s.mutexSlot(c)
	for round := range rounds(2, 6) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		from, err := c.Primary(ctx, slot)
		if err != nil {
			cancel()
			s.T.Fatal(err)
		}
		primaries, err := c.Primaries(ctx)
		if err != nil {
			cancel()
			s.T.Fatal(err)
		}
		to := primaries[0]
		if to == from {
			to = primaries[1]
		}
		t0 := Now()
		s.Fault("reshard", fmt.Sprintf("slot %d from %s to %s", slot, from.Name, to.Name), func() {
			if err := c.MoveSlot(ctx, slot, to); err != nil {
				s.T.Errorf("moving slot %d (round %d): %v", slot, round+1, err)
			}
		}, func() {})()
		cancel()
		s.note("slot %d moved from %s to %s in %v", slot, from.Name, to.Name, time.Duration(Now()-t0).Round(time.Millisecond))
		s.awaitHolder(t0, fmt.Sprintf("move %d of slot %d", round+1, slot))
	}
	s.finish()
}

// mutexSlot returns the hash slot of the run's mutex.
func (s *S) mutexSlot(c *testserver.RedisCluster) int {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slot, err := c.SlotOf(ctx, "simba:{"+s.Mutex+"}")
	if err != nil {
		s.T.Fatal(err)
	}
	return slot
}
