package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/internal/testserver"
)

// The scenarios of a ZooKeeper ensemble (issue 16), beyond the single-node plan: each
// contender is connected to one member of a three-server ensemble, and the faults are
// between the servers.
func init() {
	addScenarios(
		scenario{num: 30, name: "follower_cut_from_leader", stores: "E", run: followerCutFromLeader},
		scenario{num: 31, name: "leader_killed", stores: "E", run: leaderKilled},
		scenario{num: 32, name: "rolling_restart", stores: "E", run: rollingRestart},
	)
}

// 30. The owner's server, a follower, is cut off from the rest of the ensemble. It goes on
// answering its clients' reads and pings until it gives up on its leader (SyncLimit ticks,
// 2 s), while the leader expires the owner's session after its timeout (1 s) and a
// contender on the other side takes over. The owner must stop believing within the
// session timeout of the cut on its own (C5), the successor comes within the crash bound
// (C6), and the checker rules out two believers (C2).
func followerCutFromLeader(s *S) {
	e := serverOf[*testserver.ZooKeeperEnsemble](s)
	leader := s.leader(e)
	follower, other := (leader+1)%3, (leader+2)%3
	owner := s.SpawnOn("f", e.Servers[follower].Addr())
	owner.Send("start")
	s.owner([]*Proc{owner}, 10*time.Second)
	for i, at := range []int{leader, other} {
		p := s.SpawnOn(fmt.Sprintf("p%d", i), e.Servers[at].Addr())
		p.Send("start")
	}
	s.pause(s.Timing.Session / 2) // the others wait behind the owner

	t0 := Now()
	rejoin := s.Fault("isolate", fmt.Sprintf("%s (a follower, the owner's server) from the ensemble", e.Servers[follower].Name),
		func() { e.Isolate(follower) }, func() { e.Rejoin(follower) })
	bound := s.Timing.Session
	if at, ok := s.EventAfter(owner.ID, KindLost, t0, 3*time.Second); ok {
		d := time.Duration(at - t0)
		s.result.Losses = append(s.result.Losses, d)
		s.note("the owner stopped believing %v after its server was cut off from the leader (bound %v)", d.Round(time.Millisecond), bound)
		if d > bound+4*s.Timing.Epsilon {
			s.T.Errorf("C5 the owner believed %v after its server was cut off from the leader, past its session timeout (%v)", d, bound)
		}
	} else {
		s.T.Errorf("C5 the owner still believes 3s after its server was cut off from the leader")
	}
	// The leader expires the session within its timeout plus a tick of its own rounding.
	s.awaitSuccessor(owner.ID, t0, s.failoverBound()+100*time.Millisecond)
	s.pause(3*time.Second - time.Duration(Now()-t0)) // past the follower's SyncLimit
	rejoin()
	s.awaitServing(e, follower)
	s.pause(s.Timing.Session)
	s.finish()
}

// 31. The leader is killed (SIGKILL), again: the other two elect a new one, and every
// client is cut off meanwhile (a follower without a leader serves nobody). Contenders
// are on every server. A contender believes again (ZooKeeper's election and
// go-zookeeper's redials take seconds: within 30 s), the old leader rejoins, and the
// checker judges the whole run.
func leaderKilled(s *S) {
	e := serverOf[*testserver.ZooKeeperEnsemble](s)
	procs := s.spawnOnEach(e)
	for kill := range rounds(1, 3) {
		s.owner(procs, 10*time.Second)
		leader := s.leader(e)
		t0 := Now()
		restart := s.Fault("kill", e.Servers[leader].Name+", the leader", func() { _ = e.Servers[leader].Kill() },
			func() { s.restart(e.Servers[leader]) })
		s.awaitOwnerAfter(t0, fmt.Sprintf("the leader was killed (round %d)", kill+1))
		restart()
	}
	s.pause(s.Timing.Session)
	s.finish()
}

// 32. Rolling restart: each server in turn is stopped (SIGTERM) and started again while
// contenders on every server contend. The owner goes on believing through the restart of
// a server it is not connected to, unless that server led; someone believes after each
// restart (within 30 s), and the checker judges the whole run.
func rollingRestart(s *S) {
	e := serverOf[*testserver.ZooKeeperEnsemble](s)
	procs := s.spawnOnEach(e)
	s.owner(procs, 10*time.Second)
	for _, srv := range e.Servers {
		t0 := Now()
		s.Fault("restart", srv.Name, func() {
			_ = srv.Stop()
			s.restart(srv)
		}, func() {})()
		s.awaitHolder(t0, "the restart of "+srv.Name)
	}
	s.pause(s.Timing.Session)
	s.finish()
}

// leader returns the index of the ensemble's leader, waiting up to 30 s for an election.
func (s *S) leader(e *testserver.ZooKeeperEnsemble) int {
	s.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		i, err := e.Leader(ctx)
		cancel()
		if err == nil {
			return i
		}
		if time.Now().After(deadline) {
			s.T.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitServing waits up to 30 s for server i to serve clients again.
func (s *S) awaitServing(e *testserver.ZooKeeperEnsemble, i int) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.AwaitServing(ctx, i); err != nil {
		s.T.Fatal(err)
	}
}

// spawnOnEach starts one contender connected to each server of the ensemble, all
// contending.
func (s *S) spawnOnEach(e *testserver.ZooKeeperEnsemble) []*Proc {
	var procs []*Proc
	for i, srv := range e.Servers {
		p := s.SpawnOn(fmt.Sprintf("p%d", i), srv.Addr())
		p.Send("start")
		procs = append(procs, p)
	}
	return procs
}

// awaitOwnerAfter waits up to 30 s for a contender to begin a tenure after t0.
func (s *S) awaitOwnerAfter(t0 int64, what string) {
	s.T.Helper()
	events, ok := s.Await(30*time.Second, func(e []Event) bool {
		_, found := FirstAcquiredAfter(e, t0, "")
		return found
	})
	if !ok {
		s.T.Errorf("C6 nobody believed within 30s after %s", what)
		return
	}
	e, _ := FirstAcquiredAfter(events, t0, "")
	d := time.Duration(e.At - t0)
	s.result.Failovers = append(s.result.Failovers, d)
	s.note("%s believed %v after %s", e.Proc, d.Round(time.Millisecond), what)
}
