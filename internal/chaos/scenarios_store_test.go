package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testserver"
)

// The store faults of the plan: 17–21 and 25.
func init() {
	addScenarios(
		scenario{num: 17, name: "restart_at_once", stores: "R", out: true, run: redisRestartAtOnce},
		scenario{num: 17, name: "restart_delayed", stores: "R", run: redisRestartDelayed},
		scenario{num: 18, name: "stall", stores: "R", run: redisStall},
		scenario{num: 19, name: "crash_short", stores: "MP", run: sqlCrashShort},
		scenario{num: 19, name: "crash_long", stores: "MP", run: sqlCrashLong},
		scenario{num: 20, name: "stall", stores: "MP", run: sqlStall},
		scenario{num: 20, name: "row_lock", stores: "MP", run: sqlRowLock},
		scenario{num: 21, name: "restart_within_session", stores: "Z", run: zookeeperRestartWithinSession, timing: sessionOfTwoSeconds},
		scenario{num: 21, name: "server_down_past_session", stores: "Z", run: zookeeperServerDownPastSession, timing: sessionOfTwoSeconds},
		scenario{num: 21, name: "session_expiry", stores: "Z", run: zookeeperSessionExpiry, timing: sessionOfTwoSeconds},
		scenario{num: 21, name: "container_reaped", stores: "Z", run: zookeeperContainerReaped, timing: sessionOfTwoSeconds},
		scenario{num: 25, name: "unreachable_at_start", stores: "RMPZ", run: unreachableAtStart},
	)
}

// sessionOfTwoSeconds gives a scenario the longest session the test server grants (20
// ticks of 100ms). Scenario 21: go-zookeeper redials a lone server only a second after it
// lost it, and a restarted server gives every session its full timeout again from the
// moment it is up, so with 1s sessions a restart within S would expire them or not by a
// few milliseconds. Scenario 6: an owner believes until its last proof of life plus S,
// and a loaded machine's heartbeats answered a third of a second late ended a 1s session
// owner's belief without a fault.
func sessionOfTwoSeconds(t Timing) Timing {
	t.Session = 2 * time.Second
	return t
}

// 17a. Redis restart without persistence, at once [out]: redis-server is killed (-9) and
// restarted empty while the owner holds. A waiter may take the now missing key while the
// old owner believes until its next renewal, which finds no key (or another owner) and
// ends its belief. Tokens come from the server's clock, which has moved on, so the first
// tenure after the restart must still have the greater token: C3 holds (a regression
// would be detected by the checker and the referee, not silent). C2 is measured and must
// stay within T + D; C4 holds.
//
// Whether a regression would be detected rather than silent is what the Redis backend's
// TokenRegressions counter says: one more contender runs here, in this process, so that
// its counter can be read.
func redisRestartAtOnce(s *S) {
	f := storeFaults{s}
	procs := s.spawn(4)
	observer := f.direct("observer", s.Server.Addr(), "")
	if _, err := observer.start(); err != nil {
		s.T.Fatal(err)
	}
	counter, ok := observer.backend.(interface{ TokenRegressions() uint64 })
	if !ok {
		s.T.Fatalf("the Redis backend is a %T, without TokenRegressions", observer.backend)
	}
	for range rounds(2, 6) {
		owner := f.awaitHolder(procs)
		tok := f.awaitWrite(owner)
		var t0 int64
		heal := s.Fault("store crash", "kill -9 redis-server, restart it empty at once", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)
		restart, up := healAt(heal)
		f.note("17a: redis-server down for %v (kill to ready)", roundedNs(up-t0))
		f.awaitLoss(owner, t0, f.lossLimit())
		if e, ok := f.awaitAcquired("", restart, s.failoverBound(), "after the restart"); ok && e.Token <= tok {
			s.T.Errorf("C3 the first tenure after the restart (%s) has token %d, not above %d", e.Proc, e.Token, tok)
		}
	}
	counted := counter.TokenRegressions()
	observer.close()
	fnd := s.finish()
	if fnd.TokenRegressions > 0 && counted == 0 {
		s.T.Errorf("C3 %d token regressions, and the backend counted none: silent", fnd.TokenRegressions)
	}
	limit := s.Timing.TTL + s.Timing.CallTimeout + s.Timing.Epsilon
	if fnd.MaxOverlap > limit {
		s.T.Errorf("C2 the old owner believed %v alongside its successor, more than T + D + ε = %v", fnd.MaxOverlap, limit)
	}
	f.note("17a: max overlap %v (limit T + D + ε = %v), %d stale writes rejected, shadow counter lost %d; token regressions %d in the history, %d counted by the observer's backend: the clock-based token does not regress, so C3 is asserted rather than a detected regression",
		fnd.MaxOverlap.Round(time.Millisecond), limit, fnd.WritesRejected, fnd.ShadowLost, fnd.TokenRegressions, counted)
	f.noteLosses()
}

// 17b. Redis restart without persistence after T + G: the owner stops believing by its
// local TTL end while the server is down, and every lease has lapsed when it comes back,
// so nobody overlaps (C2 = 0), and the first tenure afterwards has a greater token (C3).
func redisRestartDelayed(s *S) {
	f := storeFaults{s}
	procs := s.spawn(4)
	outage := s.Timing.TTL + s.Timing.Transition
	for range rounds(1, 5) {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		tok := f.awaitWrite(owner.ID)
		var t0 int64
		heal := s.Fault("store crash", "kill -9 redis-server, restart it empty after T + G", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)
		f.awaitLoss(owner.ID, t0, f.lossLimit())
		sleepUntilNs(t0 + int64(outage))
		restart, _ := healAt(heal)
		if e, ok := f.awaitAcquired("", restart, s.failoverBound(), "after the restart"); ok && e.Token <= tok {
			s.T.Errorf("C3 the first tenure after the restart (%s) has token %d, not above %d", e.Proc, e.Token, tok)
		}
	}
	s.finish()
	f.noteLosses()
}

// 18. Redis stall: redis-server is stopped (SIGSTOP) for 2 (T + G). Every call times out;
// the owner stops believing by its local TTL end (C5); after SIGCONT the key has expired
// and one contender acquires (C6, measured from the resume); nobody overlaps (C2 = 0).
func redisStall(s *S) {
	f := storeFaults{s}
	procs := s.spawn(4)
	stall := 2 * (s.Timing.TTL + s.Timing.Transition)
	for range rounds(1, 5) {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		f.awaitWrite(owner.ID)
		var t0 int64
		heal := s.Fault("store stall", "SIGSTOP redis-server for 2 (T + G)", func() {
			t0 = Now()
			f.must(s.Server.Pause())
		}, func() { f.must(s.Server.Resume()) })
		f.awaitLoss(owner.ID, t0, f.lossLimit())
		sleepUntilNs(t0 + int64(stall))
		resumed, _ := healAt(heal)
		if e, ok := FirstAcquiredAfter(s.Events(), t0, ""); ok && e.At < resumed {
			s.T.Errorf("%s acquired while the server was stopped", e.Proc)
		}
		f.awaitAcquired("", resumed, s.failoverBound(), "after the resume")
	}
	s.finish()
	f.noteLosses()
}

// 19a. SQL server crash and restart after 0.3 T (mariadbd; postgres and its backends): the
// server keeps the row, and a renewal that
// fell into the outage should be retried and succeed before the local TTL end, so the
// owner should not change. The outage is 0.3 T plus the server's start-up (crash
// recovery), which may exceed the third of T that renewals are sent early: hand-overs are
// counted and reported as spurious (target 0), not asserted. Asserted: C2 = 0, C3.
func sqlCrashShort(s *S) {
	f := storeFaults{s}
	procs := s.spawn(4)
	n := rounds(3, 10)
	var handOvers, flaps int
	var outages []time.Duration
	for range n {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		f.awaitWrite(owner.ID)
		time.Sleep(rand.N(2 * s.Timing.TTL / 3)) // vary the crash's phase against the renewals
		var t0 int64
		heal := s.Fault("store crash", "kill -9 the server, restart after 0.3 T", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)
		time.Sleep(3 * s.Timing.TTL / 10)
		heal()
		outages = append(outages, time.Duration(Now()-t0))
		time.Sleep(s.Timing.TTL + s.Timing.Transition) // at least one renewal after the restart
		events := s.Events()
		if _, ok := ReleasedAfter(events, t0, owner.ID); ok {
			flaps++
		}
		if _, ok := FirstAcquiredAfter(events, t0, owner.ID); ok {
			handOvers++
		}
	}
	s.finish()
	f.note("19a: %d crashes: %d spurious hand-overs, %d in which the owner stopped believing (target 0 each); outage (kill to server ready) %s",
		n, handOvers, flaps, durationSpread(outages))
}

// 19b. SQL server crash, restart after 2 (T + G): the owner stops believing by its local TTL
// end (C5); whoever acquires first afterwards has a larger token, since the row's version
// survived (C3); the pools recover: after that first acquisition the owner stops, and a
// waiter, on its own pool, takes over.
func sqlCrashLong(s *S) {
	f := storeFaults{s}
	procs := s.spawn(4)
	outage := 2 * (s.Timing.TTL + s.Timing.Transition)
	for range rounds(1, 5) {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		tok := f.awaitWrite(owner.ID)
		var t0 int64
		heal := s.Fault("store crash", "kill -9 the server, restart after 2 (T + G)", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)
		f.awaitLoss(owner.ID, t0, f.lossLimit())
		sleepUntilNs(t0 + int64(outage))
		restart, _ := healAt(heal)
		e, ok := f.awaitAcquired("", restart, s.failoverBound(), "after the restart")
		if !ok {
			continue
		}
		if e.Token <= tok {
			s.T.Errorf("C3 the first tenure after the restart (%s) has token %d, not above %d: the version did not survive", e.Proc, e.Token, tok)
		}
		next := procNamed(procs, e.Proc)
		t1 := Now()
		next.Send("stop")
		if h, ok := f.awaitAcquiredQuiet(next.ID, t1, s.failoverBound()); ok {
			f.note("19b: after the restart, %s took over from %s, stopped, in %v", h.Proc, next.ID, roundedNs(h.At-t1))
		} else {
			s.T.Errorf("nobody took over from %s, stopped after the restart: the pools did not recover", next.ID)
		}
		next.Send("start")
	}
	s.finish()
	f.noteLosses()
}

// 20a. SQL server stall: the server (postgres: with its backends) is stopped (SIGSTOP)
// for 2 (T + G), twice. First the owner
// is left alone: it stops believing by its local TTL end although no call returns (C5),
// and a contender acquires after SIGCONT (C6). Then the owner is stopped during the
// stall: Stop returns within the call timeout, having delivered OnReleased (C7, C1).
func sqlStall(s *S) {
	f := storeFaults{s}
	procs := s.spawn(3)
	stall := 2 * (s.Timing.TTL + s.Timing.Transition)
	stallServer := func(what string) (heal func(), t0 int64) {
		heal = s.Fault("store stall", what, func() {
			t0 = Now()
			f.must(s.Server.Pause())
		}, func() { f.must(s.Server.Resume()) })
		return heal, t0
	}

	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	f.awaitWrite(owner.ID)
	heal, t0 := stallServer("SIGSTOP the server for 2 (T + G)")
	f.awaitLoss(owner.ID, t0, f.lossLimit())
	sleepUntilNs(t0 + int64(stall))
	resumed, _ := healAt(heal)
	f.awaitAcquired("", resumed, s.failoverBound(), "after the resume")

	owner = s.owner(procs, s.failoverBound()+2*time.Second)
	f.awaitWrite(owner.ID)
	heal, t0 = stallServer("SIGSTOP the server for 2 (T + G), Stop the owner meanwhile")
	time.Sleep(s.Timing.TTL / 10) // the owner still believes: its TTL end is at least T/3 away
	f.stopDuring(owner, "the stall", true)
	sleepUntilNs(t0 + int64(stall))
	resumed, _ = healAt(heal)
	f.awaitAcquired(owner.ID, resumed, s.failoverBound(), "after the resume")
	owner.Send("start")
	s.finish()
	f.noteLosses()
}

// 20b. Row-lock wait: an admin transaction holds SELECT ... FOR UPDATE on the mutex row for
// 2 T. Every statement stays bounded by its context (not by InnoDB's 50s lock wait, nor
// by PostgreSQL's, which has no limit unless lock_timeout sets one): the
// owner stops believing by its local TTL end (C5); then, still inside the lock, it stops
// (C7: within the call timeout although its release waits for the row) and starts again
// at once, so that a late release of the stopped lifecycle could erase a newer tenure of
// the same contender. After the commit one contender acquires, and the row names the
// contender that believes, and nobody else (no record naming an inactive lifecycle).
func sqlRowLock(s *S) {
	f := storeFaults{s}
	procs := s.spawn(3)
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	f.awaitWrite(owner.ID)
	db, sqlOf := f.sqlAdmin()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	f.must(err)
	defer func() { _ = tx.Rollback() }()
	var t0 int64
	heal := s.Fault("row lock", "an admin transaction holds SELECT ... FOR UPDATE on the mutex row for 2 T", func() {
		var version uint64
		f.must(tx.QueryRowContext(ctx, sqlOf("SELECT version FROM simba_mutex WHERE mutex = ? FOR UPDATE"), s.Mutex).Scan(&version))
		t0 = Now()
	}, func() { f.must(tx.Commit()) })
	f.awaitLoss(owner.ID, t0, f.lossLimit())
	time.Sleep(3 * s.Timing.TTL / 10)
	f.stopDuring(owner, "the row lock", false)
	owner.Send("start")
	sleepUntilNs(t0 + int64(2*s.Timing.TTL))
	committed, _ := healAt(heal)
	if e, ok := FirstAcquiredAfter(s.Events(), t0, ""); ok && e.At < committed {
		s.T.Errorf("%s acquired while the row was locked", e.Proc)
	}
	f.awaitAcquired("", committed, s.failoverBound(), "after the commit")
	// Late statements of the stopped lifecycle have landed by now, if any could; the row
	// must name the believer, twice a renewal apart.
	time.Sleep(s.Timing.TTL + s.Timing.Transition)
	f.rowNamesHolder(db, sqlOf)
	time.Sleep(s.Timing.TTL)
	f.rowNamesHolder(db, sqlOf)
	s.finish()
	f.noteLosses()
}

// 21a. ZooKeeper restart within the session timeout: the server is killed and started
// again at once (SIGTERM would take the JVM about 2s to shut down). The owner stops
// believing at disconnect (C5), the session survives, and the same node owns again: a
// new OnAcquired with the same token (alternation holds, C1), while nobody else acquired.
// The restarted server counts the sessions it loads from their loading on, and refuses
// clients until it serves: on a loaded machine it took longer than S between the two
// once, and expired every session (its log says so), the owner's too. Such a round is
// not a restart within the session; its safety is checked all the same (C2, C3).
func zookeeperRestartWithinSession(s *S) {
	f := storeFaults{s}
	procs := s.spawn(2)
	serverLog := filepath.Join(s.Dir, "server", "zookeeper.log")
	expiries := func() int {
		b, _ := os.ReadFile(serverLog)
		return bytes.Count(b, []byte("Expiring session"))
	}
	for range rounds(2, 8) {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		tok := f.awaitWrite(owner.ID)
		expired := expiries()
		var t0 int64
		s.Fault("store crash", "kill the ZooKeeper server, start it again at once (within S)", func() {
			t0 = Now()
			f.must(s.Server.Kill())
		}, f.startServer)()
		up := Now()
		f.note("21a: server down for %v (kill to ready), S %v", roundedNs(up-t0), s.Timing.Session)
		f.awaitLoss(owner.ID, t0, s.Timing.Session)
		events, ok := s.Await(2*s.Timing.Session+2*time.Second, func(e []Event) bool {
			_, ok := FirstAcquiredAfter(e, t0, "")
			return ok
		})
		if !ok {
			s.T.Errorf("nobody owns the mutex %v after the restart", 2*s.Timing.Session+2*time.Second)
			continue
		}
		e, _ := FirstAcquiredAfter(events, t0, "")
		switch {
		case e.Proc != owner.ID && expiries() > expired:
			f.note("21a: the restarted server expired the sessions before it served (%v kill to ready, S %v): %s acquired; not a restart within the session",
				roundedNs(up-t0), s.Timing.Session, e.Proc)
		case e.Proc != owner.ID:
			s.T.Errorf("%s acquired (token %d) after a restart within the session: the owner %s should have resumed", e.Proc, e.Token, owner.ID)
		case e.Token != tok:
			s.T.Errorf("%s resumed with token %d, not its node's %d", owner.ID, e.Token, tok)
		default:
			f.note("21a: %s owned again with the same token %v after the kill", owner.ID, roundedNs(e.At-t0))
		}
		time.Sleep(s.Timing.TTL / 2) // the resumed tenure writes to the referee
	}
	s.finish()
	f.noteLosses()
}

// 21b, first part: the ZooKeeper server is down for 2 S. That does not expire sessions:
// the restarted server gives every session it loads its full timeout again, and the
// clients redial within it (go-zookeeper every second). Checked here: the owner stops
// believing at disconnect (C5); afterwards exactly one contender owns, nobody overlapped
// (C2 = 0), tokens only grew (C3); and the outcome, which the library does not choose, is
// reported: the owner resumed with its node and token, or (its session expired after
// all) another contender took over with a greater token.
func zookeeperServerDownPastSession(s *S) {
	f := storeFaults{s}
	procs := s.spawn(2)
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	tok := f.awaitWrite(owner.ID)
	var t0 int64
	heal := s.Fault("store crash", "kill the ZooKeeper server, start it again after 2 S", func() {
		t0 = Now()
		f.must(s.Server.Kill())
	}, f.startServer)
	f.awaitLoss(owner.ID, t0, s.Timing.Session)
	sleepUntilNs(t0 + int64(2*s.Timing.Session))
	restart, up := healAt(heal)
	e, ok := f.awaitAcquired("", restart, s.failoverBound(), "after the restart")
	if !ok {
		s.finish()
		return
	}
	switch {
	case e.Proc == owner.ID && e.Token == tok:
		f.note("21b: after 2 S down, %s resumed with its node (token %d) %v after the restart: the session survived", owner.ID, tok, roundedNs(e.At-up))
	case e.Token > tok:
		f.note("21b: after 2 S down, %s took over with token %d > %d: the session expired", e.Proc, e.Token, tok)
	default:
		s.T.Errorf("C3 %s owned after the restart with token %d, not above %d, and not as the same tenure", e.Proc, e.Token, tok)
	}
	time.Sleep(s.Timing.Session) // one owner, and it stays
	if h := Holder(s.Events()); h != e.Proc {
		s.T.Errorf("%s acquired after the restart, but %q owns now", e.Proc, h)
	}
	s.finish()
	f.noteLosses()
}

// 21b. ZooKeeper session expiry: the owner's link is blackholed past S, so its session
// expires and its node is deleted. It stops believing at disconnect (C5); exactly one
// other contender acquires (C6, ≤ S + RTT); when the link heals, the old owner joins again
// with a new node and owns again only through it: once the others stop, its next
// OnAcquired has a greater token (C3).
//
// A server that is down for longer than S does not expire sessions (see the first part),
// so the owner is cut off instead, as the plan allows.
func zookeeperSessionExpiry(s *S) {
	f := storeFaults{s}
	procs := s.spawn(2)
	admin := f.zookeeperAdmin()
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	tok := f.awaitWrite(owner.ID)
	oldNode := admin.nodeOf(s.Mutex, owner.ID)
	if oldNode == "" {
		s.T.Fatalf("no node with the owner's ID %s", owner.ID)
	}
	var t0 int64
	heal := s.Fault("session expiry", "blackhole the owner's link past S", func() {
		t0 = Now()
		owner.Proxy.Blackhole(faultproxy.Both)
	}, owner.Proxy.Heal)
	f.awaitLoss(owner.ID, t0, s.Timing.Session)
	next, ok := f.awaitAcquired(owner.ID, t0, s.failoverBound(), "after the owner's session expired")
	if !ok {
		heal()
		s.finish()
		return
	}
	if next.Token <= tok {
		s.T.Errorf("C3 successor %s has token %d, not above %d", next.Proc, next.Token, tok)
	}
	if admin.exists(oldNode) {
		s.T.Errorf("the expired session's node %s is still there", oldNode)
	}
	healed, _ := healAt(heal)
	if !f.poll(10*time.Second, func() bool { n := admin.nodeOf(s.Mutex, owner.ID); return n != "" && n != oldNode }) {
		s.T.Errorf("%s did not join again with a new node within 10s of the heal", owner.ID)
	}
	time.Sleep(s.Timing.Session / 2) // it must stay behind the new owner
	events := s.Events()
	var acquired []string
	for _, e := range events {
		if e.At > t0 && e.Kind == KindAcquired {
			acquired = append(acquired, e.Proc)
		}
	}
	if len(acquired) != 1 {
		s.T.Errorf("want exactly one new owner after the session expired, got acquisitions by %v", acquired)
	}
	// The old owner owns again only through its new node: stop the others. They are
	// stopped one at a time, so one of them may own for a moment on the way (the queue
	// is the successor, another waiter, then the old owner's new node).
	for _, p := range procs {
		if p != owner {
			p.Send("stop")
		}
	}
	ownerAgain := func(e []Event) (Event, bool) {
		for _, ev := range e {
			if ev.At > healed && ev.Kind == KindAcquired && ev.Proc == owner.ID {
				return ev, true
			}
		}
		return Event{}, false
	}
	events, ok = s.Await(s.failoverBound()+2*time.Second, func(e []Event) bool {
		_, ok := ownerAgain(e)
		return ok
	})
	if e, _ := ownerAgain(events); !ok {
		first, _ := FirstAcquiredAfter(events, healed, "")
		s.T.Errorf("once the others stopped, %s did not own again (first acquisition after the heal by anyone: %+v)", owner.ID, first)
	} else if e.Token <= next.Token {
		s.T.Errorf("C3 %s owned again with token %d, not above its successor's %d: not through a new node", owner.ID, e.Token, next.Token)
	} else {
		f.note("21b: %s owned again with a new node, token %d > %d > %d", owner.ID, e.Token, next.Token, tok)
	}
	for _, p := range procs {
		if p != owner {
			p.Send("start")
		}
	}
	s.finish()
	f.noteLosses()
}

// 21c. ZooKeeper container reaping: every contender stops, the server reaps the empty
// container /simba/<mutex> (check interval 100ms), and the contenders start again. The
// parent's sequence numbers restart from zero; the new tenure's token, a czxid, must still
// be larger than every earlier one (C3).
func zookeeperContainerReaped(s *S) {
	f := storeFaults{s}
	procs := s.spawn(2)
	admin := f.zookeeperAdmin()
	parent := "/simba/" + s.Mutex
	n := rounds(3, 10)
	restarted := 0
	for range n {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		f.awaitWrite(owner.ID)
		highest := uint64(0)
		for _, e := range s.Events() {
			if e.Kind == KindAcquired {
				highest = max(highest, e.Token)
			}
		}
		s.Fault("container reaped", "every contender stops, the mutex node is reaped", func() {
			for _, p := range procs {
				p.Send("stop")
			}
		}, func() {})()
		if !f.poll(10*time.Second, func() bool { return !admin.exists(parent) }) {
			s.T.Errorf("%s was not reaped within 10s of every contender stopping", parent)
			break
		}
		t0 := Now()
		for _, p := range procs {
			p.Send("start")
		}
		e, ok := f.awaitAcquiredQuiet("", t0, s.failoverBound())
		if !ok {
			s.T.Errorf("nobody owns the mutex after the contenders started again")
			break
		}
		if e.Token <= highest {
			s.T.Errorf("C3 the tenure after the reaping has token %d, not above %d", e.Token, highest)
		}
		if slices.ContainsFunc(admin.children(parent), func(c string) bool { return strings.HasSuffix(c, "-latch-0000000000") }) {
			restarted++
		}
	}
	s.finish()
	f.note("21c: %d reapings; in %d the sequence numbers restarted at 0 (so a sequence-number token would have regressed), yet the tokens grew", n, restarted)
}

// 25. Store unreachable or misconfigured at start. Each case starts a contender (in this
// process, on a backend built here, so that errors keep their identity and the MariaDB
// kit's CREATE TABLE does not hide a missing table) against a broken store, checks what
// Start does, fixes the store and checks that Start works and the contender acquires
// exactly once (C9; Stop then releases, C7, and nothing is left, C8).
//
// Every store fails Start within the call timeout with an error that says why (the one
// start-up rule of the package documentation): never one that matches a context error,
// since the caller's context did not end.
func unreachableAtStart(s *S) {
	f := storeFaults{s}
	const retries = false
	var noSession []error
	switch s.Kit.Name {
	case "zookeeper":
		noSession = []error{zookeeper.ErrNoSession, simba.ErrTimeout}
	case "redis":
		noSession = []error{redis.ErrUnreachable}
	}

	// Nothing listens at the store's address.
	heal := s.Fault("unreachable", "closed port: the server is down at Start", func() { f.must(s.Server.Kill()) }, f.startServer)
	c := f.direct("closed", s.Server.Addr(), "")
	switch s.Kit.Name {
	case "mariadb", "postgres":
		f.startBroken("closed port", c, syscall.ECONNREFUSED)
	default:
		f.startBroken("closed port", c, noSession...)
	}
	fixed := Now()
	heal()
	if s.Kit.Name == "zookeeper" {
		// The server is fixed once it serves sessions, not when it answers ruok: a
		// restarted server's first session waits for its transaction log, which it
		// preallocates (64 MB), and in CI, every core busy, that took seconds.
		admin := f.zookeeperAdmin()
		admin.exists("/")
		admin.conn.Close()
		fixed = Now()
	}
	if s.Kit.Name == "mariadb" || s.Kit.Name == "postgres" {
		// The server is back, but no contender has created the table yet. It is back once
		// it serves a session, as ZooKeeper above: a PostgreSQL restarted after a kill
		// recovers, and its first session into the database took longer than the call
		// timeout with every core busy, so that Start reported that instead of the
		// missing table.
		db, _ := f.sqlAdmin()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		f.must(db.PingContext(ctx))
		f.startBroken("missing table", c, jdbc.ErrSchema)
		f.must(jdbc.CreateTable(ctx, db, jdbcOptions(s.Kit.Name)...))
		cancel()
		_ = db.Close()
		fixed = Now()
	}
	f.startFixed("closed port", c, retries, fixed)
	c.close()

	// A proxy that never accepts: connections open (the kernel's backlog) and nothing
	// answers.
	proxy, err := faultproxy.New(s.Server.Addr())
	f.must(err)
	defer proxy.Close()
	heal = s.Fault("unreachable", "a proxy that never accepts", func() { proxy.PauseAccept(true) }, func() { proxy.PauseAccept(false) })
	c = f.direct("unanswered", proxy.Addr(), "")
	switch s.Kit.Name {
	case "mariadb", "postgres":
		f.startBroken("accept paused", c, simba.ErrTimeout)
	case "redis":
		f.startBroken("accept paused", c, redis.ErrUnreachable, simba.ErrTimeout)
	default:
		f.startBroken("accept paused", c, noSession...)
	}
	fixed = Now()
	heal()
	f.startFixed("accept paused", c, retries, fixed)
	c.close()

	switch s.Kit.Name {
	case "redis":
		f.redisWrongPassword()
	case "mariadb":
		f.mariadbReadOnly()
	case "postgres":
		f.postgresReadOnly()
	case "zookeeper":
		f.note("25: missing chroot not tested: go-zookeeper v1.0.4 has no chroot, and the backend's paths are absolute (/simba/<mutex>)")
	}
	s.finish()
}

// redisWrongPassword is scenario 25's misconfiguration for Redis: the server's password
// was changed and the contender still has the old one. Start fails with ErrRefused; once
// the server accepts the contender's password again, it starts and acquires exactly once.
func (f storeFaults) redisWrongPassword() {
	admin := goredis.NewClient(redisOptions(f.Server.Addr()))
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := admin.Conn() // one connection, authenticated before the password is set
	defer conn.Close()
	const old, rotated = "simba-old", "simba-rotated"
	heal := f.Fault("misconfigured", "wrong password", func() {
		f.must(conn.ConfigSet(ctx, "requirepass", rotated).Err())
	}, func() {
		f.must(conn.ConfigSet(ctx, "requirepass", old).Err())
	})
	c := f.direct("password", f.Server.Addr(), old)
	f.startBroken("wrong password", c, redis.ErrRefused)
	fixed := Now()
	heal()
	f.startFixed("wrong password", c, false, fixed)
	c.close()
	f.must(conn.ConfigSet(ctx, "requirepass", "").Err())
}

// mariadbReadOnly is scenario 25's misconfiguration for MariaDB: a read-only server (a
// replica). Start fails with a *SchemaError that says so; once the server is writable,
// Start works.
func (f storeFaults) mariadbReadOnly() {
	m, ok := f.Server.(*testserver.MariaDB)
	if !ok {
		f.T.Fatalf("the MariaDB kit's server is a %T", f.Server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.readOnly("read_only = ON", func() {
		f.must(m.Exec(ctx, "SET GLOBAL read_only = ON"))
	}, func() {
		f.must(m.Exec(ctx, "SET GLOBAL read_only = OFF"))
	})
}

// readOnly makes the SQL store read-only with set, checks that Start fails with a
// *SchemaError, undoes it with unset and checks that Start works.
func (f storeFaults) readOnly(what string, set, unset func()) {
	heal := f.Fault("misconfigured", what, set, unset)
	c := f.direct("readonly", f.Server.Addr(), "")
	f.startBroken(what, c, jdbc.ErrSchema)
	fixed := Now()
	heal()
	f.startFixed(what, c, false, fixed)
	c.close()
}

// postgresReadOnly is scenario 25's misconfiguration for PostgreSQL: every transaction is
// read-only (default_transaction_read_only, as on a standby). Start fails with a
// *SchemaError that says so; once the server is writable, Start works.
func (f storeFaults) postgresReadOnly() {
	p, ok := f.Server.(*testserver.Postgres)
	if !ok {
		f.T.Fatalf("the PostgreSQL kit's server is a %T", f.Server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set := func(value string) {
		f.must(p.Exec(ctx, "ALTER SYSTEM SET default_transaction_read_only = "+value+"; SELECT pg_reload_conf();"))
		// The server reloads its configuration in the background: wait until new
		// sessions have it.
		check := "DO $$ BEGIN IF current_setting('default_transaction_read_only') <> '" + value + "' THEN RAISE 'not yet'; END IF; END $$"
		if !f.poll(10*time.Second, func() bool { return p.Exec(ctx, check) == nil }) {
			f.T.Fatalf("default_transaction_read_only is not %s after a reload", value)
		}
	}
	f.readOnly("default_transaction_read_only = on", func() { set("on") }, func() { set("off") })
}

// storeFaults carries the helpers of the store-fault scenarios.
type storeFaults struct{ *S }

// must fails the scenario on an error of the harness or of a server it drives.
func (f storeFaults) must(err error) {
	f.T.Helper()
	if err != nil {
		f.T.Fatal(err)
	}
}

// startServer starts the scenario's server again after a kill.
func (f storeFaults) startServer() {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.must(f.Server.Start(ctx))
}

// lossLimit is the assertion's limit for an owner cut off from its store to stop
// believing. It must do so by its local TTL end, within T of its last renewal and so
// within T of the fault (C5); the limit adds the transition window, after which another
// contender may acquire and exclusion would be at stake. The measured value is reported.
func (f storeFaults) lossLimit() time.Duration { return f.Timing.TTL + f.Timing.Transition }

// awaitHolder waits for a contender to believe it owns the mutex and returns its ID,
// which need not be one of procs (contenders of this process opened by the scenario).
func (f storeFaults) awaitHolder(procs []*Proc) string {
	f.T.Helper()
	wait := f.failoverBound() + 2*time.Second
	events, ok := f.Await(wait, func(e []Event) bool { return Holder(e) != "" })
	if !ok {
		f.T.Fatalf("no owner within %v among %d contenders", wait, len(procs)+1)
	}
	return Holder(events)
}

// awaitLoss waits for proc's OnReleased after t0 and records its latency from t0; it fails
// the scenario when that is more than limit.
func (f storeFaults) awaitLoss(proc string, t0 int64, limit time.Duration) {
	f.T.Helper()
	wait := limit + 2*time.Second
	events, ok := f.Await(wait, func(e []Event) bool {
		_, ok := ReleasedAfter(e, t0, proc)
		return ok
	})
	if !ok {
		f.T.Errorf("C5 %s still believes it owns the mutex %v after the fault", proc, wait)
		return
	}
	e, _ := ReleasedAfter(events, t0, proc)
	d := time.Duration(e.At - t0)
	f.result.Losses = append(f.result.Losses, d)
	if d > limit {
		f.T.Errorf("C5 %s stopped believing %v after the fault, later than %v", proc, d, limit)
	}
}

// awaitAcquired waits for an OnAcquired after t0 by anyone but except ("": anyone) and
// records its latency from t0 as a failover next to bound. The wait is as generous as
// awaitSuccessor's.
func (f storeFaults) awaitAcquired(except string, t0 int64, bound time.Duration, what string) (Event, bool) {
	f.T.Helper()
	e, ok := f.awaitAcquiredQuiet(except, t0, bound)
	if !ok {
		f.T.Errorf("C6 nobody acquired %s within %v (bound %v)", what, bound+max(bound/2, time.Second), bound)
		return e, false
	}
	f.result.Failovers = append(f.result.Failovers, time.Duration(e.At-t0))
	f.result.Bound = bound
	return e, true
}

// awaitAcquiredQuiet is awaitAcquired without recording or failing.
func (f storeFaults) awaitAcquiredQuiet(except string, t0 int64, bound time.Duration) (Event, bool) {
	events, ok := f.Await(bound+max(bound/2, time.Second), func(e []Event) bool {
		_, ok := FirstAcquiredAfter(e, t0, except)
		return ok
	})
	if !ok {
		return Event{}, false
	}
	e, _ := FirstAcquiredAfter(events, t0, except)
	return e, true
}

// awaitWrite waits until the referee has accepted a write of proc's current tenure, so
// that the fence knows its token before a fault, and returns the token. A tenure that
// ends first is no failure (the scenario's assertions say what may end it); it is noted.
func (f storeFaults) awaitWrite(proc string) uint64 {
	f.T.Helper()
	var tok uint64
	_, ok := f.Await(2*time.Second, func(events []Event) bool {
		wrote := false
		for _, e := range slices.Backward(events) {
			if e.Proc != proc {
				continue
			}
			switch e.Kind {
			case KindWriteOK:
				wrote = true
			case KindAcquired:
				tok = e.Token
				return wrote
			case KindReleased:
				return false
			}
		}
		return false
	})
	if !ok {
		f.note("the referee accepted no write of %s's tenure (token %d) within 2s: fencing was not exercised for it", proc, tok)
	}
	return tok
}

// stopDuring stops p while the store does not answer (stalled or holding the row) and
// checks C7: Stop returns within the call timeout, plus scheduling slack, and OnReleased
// came before it returned (alternation, checked by finish). The duration is reported.
// owner says whether p should still believe it owns the mutex when it stops.
func (f storeFaults) stopDuring(p *Proc, what string, owner bool) {
	f.T.Helper()
	t0 := Now()
	p.Send("stop")
	limit := f.Timing.CallTimeout + 250*time.Millisecond
	events, ok := f.Await(limit+5*time.Second, func(e []Event) bool { return stoppedEventAfter(e, p.ID, t0) != nil })
	if !ok {
		f.T.Errorf("C7 %s's Stop during %s has not returned after %v", p.ID, what, limit+5*time.Second)
		return
	}
	stopped := stoppedEventAfter(events, p.ID, t0)
	var began int64
	released := false
	for _, e := range events {
		if e.Proc == p.ID && e.At > t0 && e.At <= stopped.At {
			switch e.Kind {
			case KindStop:
				began = e.At
			case KindReleased:
				released = true
			}
		}
	}
	d := time.Duration(stopped.At - began)
	f.note("C7 Stop of the owner during %s took %v (call timeout %v): %q", what, d.Round(time.Millisecond), f.Timing.CallTimeout, stopped.Note)
	if d > limit {
		f.T.Errorf("C7 %s's Stop during %s took %v, more than the call timeout %v plus 250ms", p.ID, what, d, f.Timing.CallTimeout)
	}
	switch {
	case owner && !released:
		f.note("%s had stopped believing before its Stop during %s", p.ID, what)
	case !owner && released:
		f.T.Errorf("%s still believed it owned the mutex when it stopped during %s", p.ID, what)
	}
}

func stoppedEventAfter(events []Event, proc string, t int64) *Event {
	for i := range events {
		if e := &events[i]; e.At > t && e.Proc == proc && e.Kind == KindStopped {
			return e
		}
	}
	return nil
}

// rowNamesHolder checks the SQL row of the mutex against the events: the contender the
// row names as a live owner is the one that believes, and the other way round. A
// contender may acquire on the store shortly before its OnAcquired is logged, so the two
// are compared until they agree, for up to T. sqlOf is sqlAdmin's.
func (f storeFaults) rowNamesHolder(db *sql.DB, sqlOf func(string) string) {
	f.T.Helper()
	var row, holder string
	var version uint64
	var rowErr error
	agree := f.poll(f.Timing.TTL, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var live bool
		rowErr = db.QueryRowContext(ctx, sqlOf("SELECT owner_id, version, transition_at > {now} FROM simba_mutex WHERE mutex = ?"),
			f.Mutex).Scan(&row, &version, &live)
		if !live {
			row = ""
		}
		holder = Holder(f.Events())
		return rowErr == nil && row == holder
	})
	switch {
	case rowErr != nil:
		f.T.Errorf("reading the mutex row: %v", rowErr)
	case !agree:
		f.T.Errorf("the row names %q (version %d) while %q believes it owns the mutex: a record of an inactive lifecycle", row, version, holder)
	}
}

// sqlAdmin opens a pool of the harness's own on the SQL store, and returns it with a
// function that turns a statement written with ? placeholders and {now} (the database's
// clock in epoch ms) into the store's dialect.
func (f storeFaults) sqlAdmin() (*sql.DB, func(string) string) {
	f.T.Helper()
	switch f.Kit.Name {
	case "mariadb":
		db, err := sql.Open("mysql", mariadbDSN(f.Server.Addr()))
		f.must(err)
		return db, strings.NewReplacer("{now}", "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)").Replace
	case "postgres":
		db, err := sql.Open("pgx", postgresDSN(f.Server.Addr()))
		f.must(err)
		return db, func(stmt string) string {
			stmt = strings.ReplaceAll(stmt, "{now}", "(floor(extract(epoch FROM statement_timestamp()) * 1000))::bigint")
			for n := 1; strings.Contains(stmt, "?"); n++ {
				stmt = strings.Replace(stmt, "?", fmt.Sprintf("$%d", n), 1)
			}
			return stmt
		}
	}
	f.T.Fatalf("store %s has no SQL", f.Kit.Name)
	return nil, nil
}

// poll checks cond every 20ms until it holds or within has passed.
func (f storeFaults) poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// noteLosses reports the loss-detection latencies next to T (S on a session store).
func (f storeFaults) noteLosses() {
	if len(f.result.Losses) == 0 {
		return
	}
	if f.Kit.Session {
		f.note("C5 loss detection (fault to OnReleased) %s, S %v", durationSpread(f.result.Losses), f.Timing.Session)
		return
	}
	f.note("C5 loss detection (fault to OnReleased) %s, T %v", durationSpread(f.result.Losses), f.Timing.TTL)
}

func durationSpread(list []time.Duration) string {
	if len(list) == 0 {
		return "-"
	}
	d := slices.Clone(list)
	slices.Sort(d)
	return fmt.Sprintf("p50 %v, max %v (n %d)", d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), len(d))
}

// healAt runs heal and returns the times just before and just after it. Contenders may act
// on the healed store before heal returns (a server accepts before the harness has seen it
// ready), so what follows a heal is looked for from its beginning.
func healAt(heal func()) (began, done int64) {
	began = Now()
	heal()
	return began, Now()
}

// zookeeperAdmin is a ZooKeeper connection of the scenario's own, to look at the nodes.
type zookeeperAdmin struct {
	f    storeFaults
	conn *zk.Conn
}

func (f storeFaults) zookeeperAdmin() *zookeeperAdmin {
	f.T.Helper()
	conn, _, err := zk.Connect([]string{f.Server.Addr()}, 2*time.Second, zk.WithLogger(quietZK{}), zk.WithDialer(zookeeperDialer(2*time.Second)))
	f.must(err)
	f.T.Cleanup(conn.Close)
	return &zookeeperAdmin{f: f, conn: conn}
}

// call runs fn with a deadline: go-zookeeper requests wait while the connection is down.
// On a timeout it closes the connection, which ends fn, and fails the scenario.
func (a *zookeeperAdmin) call(fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }() // ends with fn's request, at the latest when the connection closes
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		a.conn.Close()
		<-done
		a.f.T.Fatal("a ZooKeeper request of the scenario took more than 10s")
		return nil
	}
}

func (a *zookeeperAdmin) exists(path string) bool {
	var ok bool
	err := a.call(func() (err error) {
		ok, _, err = a.conn.Exists(path)
		return err
	})
	a.f.must(err)
	return ok
}

func (a *zookeeperAdmin) children(path string) []string {
	var kids []string
	err := a.call(func() (err error) {
		kids, _, err = a.conn.Children(path)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	a.f.must(err)
	return kids
}

// nodeOf returns the path of the node under /simba/<mutex> whose data is id, or "".
func (a *zookeeperAdmin) nodeOf(mutex, id string) string {
	parent := "/simba/" + mutex
	for _, k := range a.children(parent) {
		var data []byte
		err := a.call(func() (err error) {
			data, _, err = a.conn.Get(parent + "/" + k)
			return err
		})
		if err == nil && string(data) == id {
			return parent + "/" + k
		}
	}
	return ""
}

// directContender is a contender in this process on a backend the scenario opened itself
// (scenario 25, and 17a's observer), so that the backend and the service's errors can be
// inspected. It logs like a contender process, so the checker sees it.
type directContender struct {
	f            storeFaults
	id           string
	svc          *simba.Service
	backend      simba.Backend
	log          *Log
	warns        *warnRecorder
	ref          *RefereeClient
	closeBackend func()
	once         sync.Once
}

// direct opens a backend on addr (with password, for Redis) and a service on it.
func (f storeFaults) direct(id, addr, password string) *directContender {
	f.T.Helper()
	b, closeBackend, err := f.openBackend(addr, password)
	f.must(err)
	log, err := f.newLog(id)
	f.must(err)
	ref, err := DialReferee(f.Ref.Addr())
	f.must(err)
	cfg := ContenderConfig{Mutex: f.Mutex, ID: id, WriteEvery: f.Timing.TTL / 20, IncPause: f.Timing.TTL / 100}
	cb := &contender{cfg: cfg, log: log, ref: ref}
	w := &warnRecorder{}
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: f.Mutex, ID: id, Acquired: cb.acquired, Released: cb.released},
		simba.WithTTL(f.Timing.TTL), simba.WithTransition(f.Timing.Transition), simba.WithCallTimeout(f.Timing.CallTimeout),
		simba.WithLogger(slog.New(w)))
	f.must(err)
	cb.svc = svc
	d := &directContender{f: f, id: id, svc: svc, backend: b, log: log, warns: w, ref: ref, closeBackend: closeBackend}
	f.T.Cleanup(d.close)
	return d
}

// openBackend opens the kit's backend on addr without the kit's set-up.
func (f storeFaults) openBackend(addr, password string) (simba.Backend, func(), error) {
	quiet := slog.New(slog.DiscardHandler)
	switch f.Kit.Name {
	case "redis":
		opts := redisOptions(addr)
		opts.Password = password
		client := goredis.NewClient(opts)
		b, err := redis.New(client, redis.WithLogger(quiet))
		if err != nil {
			_ = client.Close()
			return nil, nil, err
		}
		return b, func() { _ = b.Close(); _ = client.Close() }, nil
	case "mariadb", "postgres":
		var db *sql.DB
		var err error
		if f.Kit.Name == "mariadb" {
			db, err = sql.Open("mysql", mariadbDSN(addr))
		} else {
			db, err = sql.Open("pgx", postgresDSN(addr))
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := jdbc.New(db, jdbcOptions(f.Kit.Name)...)
		if err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		return b, func() { _ = b.Close(); _ = db.Close() }, nil
	case "zookeeper":
		session := f.Timing.Session
		b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
			return zk.Connect([]string{addr}, session, zk.WithEventCallback(events), zk.WithLogger(quietZK{}), zk.WithDialer(zookeeperDialer(session)))
		}, zookeeper.WithLogger(quiet))
		if err != nil {
			return nil, nil, err
		}
		return b, func() { _ = b.Close() }, nil
	}
	return nil, nil, fmt.Errorf("no backend for store %q", f.Kit.Name)
}

func (d *directContender) start() (time.Duration, error) {
	d.log.Add(KindStart, 0, 0, "")
	began := time.Now()
	err := d.svc.Start(context.Background())
	took := time.Since(began)
	d.log.Add(KindStarted, 0, 0, errText(err))
	return took, err
}

func (d *directContender) stop() error {
	d.log.Add(KindStop, 0, 0, "")
	err := d.svc.Stop(context.Background())
	d.log.Add(KindStopped, 0, 0, errText(err))
	return err
}

func (d *directContender) close() {
	d.once.Do(func() {
		if d.svc.Status() == simba.StatusRunning {
			_ = d.stop()
		}
		_ = d.svc.Close()
		d.closeBackend()
		_ = d.ref.Close()
		_ = d.log.Close()
	})
}

// count returns how many times d's contender acquired and released after t.
func (d *directContender) count(t int64) (acquired, released int) {
	for _, e := range d.f.Events() {
		if e.Proc == d.id && e.At > t {
			switch e.Kind {
			case KindAcquired:
				acquired++
			case KindReleased:
				released++
			}
		}
	}
	return acquired, released
}

// startBroken starts c against a broken store. With targets, Start must fail within the
// call timeout (plus a generous second) with an error that matches every target, and leave
// the service INITIAL (C9). Without targets (Redis), Start must succeed, the contender must
// not acquire while the store is broken, and the service must log why its attempts fail.
func (f storeFaults) startBroken(what string, c *directContender, targets ...error) {
	f.T.Helper()
	t0 := Now()
	took, err := c.start()
	limit := f.Timing.CallTimeout + time.Second
	outcome := "no error"
	if err != nil {
		outcome = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	f.note("25 %s: Start returned after %v: %s", what, took.Round(time.Millisecond), outcome)
	if took > limit {
		f.T.Errorf("25 %s: Start took %v, more than the call timeout %v plus 1s", what, took, f.Timing.CallTimeout)
	}
	if len(targets) == 0 {
		if err != nil {
			f.T.Errorf("25 %s: Start failed (%v), although this store's Start does no I/O", what, err)
			return
		}
		time.Sleep(f.Timing.TTL) // attempts fail meanwhile
		if n, _ := c.count(t0); n > 0 {
			f.T.Errorf("25 %s: %s acquired %d times against a broken store", what, c.id, n)
		}
		if first := c.warns.first(); first == "" {
			f.T.Errorf("25 %s: the service logged no failed attempt", what)
		} else {
			f.note("25 %s: the service logs: %s", what, first)
		}
		return
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		f.T.Errorf("25 %s: Start's error matches a context error although the caller's context had not ended: %v", what, err)
	}
	if err == nil {
		f.T.Errorf("25 %s: Start succeeded against a broken store", what)
		return
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			f.T.Errorf("25 %s: Start's error does not match %v: %v", what, target, err)
		}
	}
	if st := c.svc.Status(); st != simba.StatusInitial {
		f.T.Errorf("C9 after a failed Start the service is %v, not INITIAL", st)
	}
}

// startFixed checks that c works once its store is fixed: a service that failed to start
// starts (ZooKeeper may need its connection's next redial, a second later, so Start is
// tried until it works, for up to 5s), and the contender acquires exactly once; Stop then
// delivers OnReleased.
func (f storeFaults) startFixed(what string, c *directContender, running bool, t0 int64) {
	f.T.Helper()
	if !running {
		failed := 0
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := c.start()
			if err == nil {
				break
			}
			failed++
			if time.Now().After(deadline) {
				f.T.Errorf("25 %s: Start still fails 5s after the store was fixed: %v", what, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if failed > 0 {
			f.note("25 %s: %d Start attempts failed after the fix before one worked", what, failed)
		}
	}
	bound := f.failoverBound()
	if _, ok := f.Await(bound+time.Second, func(e []Event) bool { _, ok := FirstAcquiredAfter(e, t0, ""); return ok }); !ok {
		f.T.Errorf("25 %s: %s did not acquire within %v of the fix", what, c.id, bound+time.Second)
	} else {
		f.note("25 %s: %s acquired %v after the fix", what, c.id, roundedNs(firstAcquiredAt(f.Events(), t0)-t0))
	}
	time.Sleep(f.Timing.TTL) // renewals, not acquisitions
	if err := c.stop(); err != nil {
		f.T.Errorf("25 %s: Stop: %v", what, err)
	}
	if a, r := c.count(t0); a != 1 || r != 1 {
		f.T.Errorf("25 %s: after the fix %s acquired %d times and released %d times, want once each", what, c.id, a, r)
	}
}

func firstAcquiredAt(events []Event, t int64) int64 {
	e, _ := FirstAcquiredAfter(events, t, "")
	return e.At
}

// warnRecorder keeps the errors the service logs at Warn level and above.
type warnRecorder struct {
	mu   sync.Mutex
	errs []string
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			w.mu.Lock()
			w.errs = append(w.errs, a.Value.String())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }

func (w *warnRecorder) WithGroup(string) slog.Handler { return w }

func (w *warnRecorder) first() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) == 0 {
		return ""
	}
	return w.errs[0]
}
