package chaos

import (
	"context"
	"time"

	"github.com/simba-go/simba/internal/testserver"
)

// The scenarios of a Redis Sentinel deployment (issue 16), beyond the single-node plan. Redis
// replicates asynchronously, so a failover can lose the owner key and the fence key: both
// scenarios are out of the lease model, where overlaps are measured rather than
// forbidden, and the checker still holds tokens (C3) and the referee (C4) to account.
func init() {
	addScenarios(
		scenario{num: 33, name: "primary_killed", stores: "S", out: true, run: primaryKilled},
		scenario{num: 34, name: "unreplicated_handover", stores: "S", out: true, run: unreplicatedHandover, timing: outlastFailover},
	)
}

// 33. The primary is killed (SIGKILL) during contention; the sentinels promote the
// replica, and the contenders' FailoverClients follow it. Someone believes again within
// 30 s; the old primary comes back empty and the sentinels make it a replica.
func primaryKilled(s *S) {
	d := serverOf[*testserver.RedisSentinel](s)
	procs := s.spawnDirect(3)
	s.owner(procs, 10*time.Second)
	t0 := Now()
	s.failOver(d, "the primary killed", func() { _ = d.Primary.Kill() })
	s.awaitHolder(t0, "the primary was killed")
	s.restart(d.Primary)
	s.pause(s.Timing.TTL)
	s.finish()
}

// 34. A hand-over the replica never received: replication is cut, the owner stops and a
// waiter acquires on the primary alone, then the primary is killed. The promoted replica
// still holds the former owner's key (and the fence key of its tenure): the new owner's
// renewals fail there, and a third contender may acquire once that key lapses. The
// overlap between the new owner and that third one is measured; the tokens must still
// grow (on one host, the server clock keeps them increasing once the fence key is lost).
func unreplicatedHandover(s *S) {
	d := serverOf[*testserver.RedisSentinel](s)
	procs := s.spawnDirect(3)
	first := s.owner(procs, 10*time.Second)
	s.Fault("cut", "replication from the primary", d.CutReplication, func() {})
	t0 := Now()
	first.Send("stop")
	s.awaitSuccessor(first.ID, t0, s.failoverBound())
	t1 := Now()
	s.failOver(d, "the primary killed after an unreplicated hand-over", func() { _ = d.Primary.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	owner, err := s.Kit.Owner(ctx, s.Server.Addr(), s.Mutex)
	cancel()
	s.note("the promoted replica names %q as the owner (%v); the owner before the failover was %s", owner, err, Holder(s.Events()))
	first.Send("start")
	s.awaitHolder(t1, "the primary was killed")
	s.restart(d.Primary)
	s.pause(s.Timing.TTL)
	f := s.finish()
	s.note("after the failover: max overlap %v, %d token regressions seen by the checker", f.MaxOverlap, f.TokenRegressions)
}

// failOver runs fail, a fault of the master, and waits up to 30 s for the sentinels to
// name another master.
func (s *S) failOver(d *testserver.RedisSentinel, what string, fail func()) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before, err := d.Master(ctx)
	if err != nil {
		s.T.Fatal(err)
	}
	t0 := time.Now()
	s.Fault("failover", what, fail, func() {})
	for {
		now, err := d.Master(ctx)
		if err == nil && now != before {
			s.note("the sentinels named %s master %v after %s", now, time.Since(t0).Round(time.Millisecond), what)
			return
		}
		select {
		case <-ctx.Done():
			s.T.Fatalf("the sentinels still name %s master 30s after %s", before, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// outlastFailover makes the TTL longer than a failover takes (about 2 s here), so that the
// keys a failover loses or brings back are still live on the promoted replica.
func outlastFailover(t Timing) Timing {
	t.TTL = 5 * time.Second
	t.Transition = time.Second
	return t
}
