package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/observe"
)

func init() {
	addScenarios(
		scenario{num: 2, name: "graceful_handover", stores: "RMPZ", run: gracefulHandOver},
		scenario{num: 3, name: "start_stop_cycling", stores: "RMPZ", run: startStopCycling},
		scenario{num: 4, name: "stop_while_store_hangs", stores: "RMPZ", run: stopWhileHung},
		scenario{num: 5, name: "late_results", stores: "RMPZ", run: lateResults},
		scenario{num: 6, name: "slow_and_panicking_callbacks", stores: "RMPZ", run: slowCallbacks, timing: sessionOfTwoSeconds},
		scenario{num: 8, name: "short_pause", stores: "RMPZ", run: shortPause},
		scenario{num: 9, name: "long_pause", stores: "RMPZ", out: true, run: longPause},
		scenario{num: 10, name: "churn_soak", stores: "RMPZ", run: churnSoak},
	)
}

// gracefulBound is how soon a waiter must take over after the owner stops: every backend
// wakes a waiter at once (pub/sub, a named lock, a watch), so within a call timeout.
func (s *S) gracefulBound() time.Duration { return s.Timing.CallTimeout }

// stopBound is what C7 allows a Stop: the call timeout of its release plus slack for a
// loaded machine (a contender process was once held up 370ms there, with the race
// detector, beside the rest of make test), well short of the TTL that a Stop waiting on
// the store would take at least.
func (s *S) stopBound() time.Duration { return s.Timing.CallTimeout + s.Timing.TTL/2 }

// processOwner returns the owner once it is a contender process: the in-process
// contender, which cannot be killed or paused, is made to step down first.
func (s *S) processOwner(procs []*Proc) *Proc {
	s.T.Helper()
	for range 10 {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		if owner.cmd != nil {
			return owner
		}
		t0 := Now()
		owner.Send("stop")
		s.awaitSuccessor(owner.ID, t0, s.failoverBound())
		owner.Send("start")
	}
	s.T.Fatal("the in-process contender keeps winning")
	return nil
}

// checkStop reports the duration of p's Stop that began after t0 (C7).
func (s *S) checkStop(p *Proc, t0 int64, what string) {
	s.T.Helper()
	began, ok1 := s.EventAfter(p.ID, KindStop, t0, 10*time.Second)
	ended, ok2 := s.EventAfter(p.ID, KindStopped, t0, 10*time.Second)
	if !ok1 || !ok2 {
		s.T.Errorf("C7 %s: Stop of %s did not return", what, p.ID)
		return
	}
	d := time.Duration(ended - began)
	s.note("%s: Stop took %v", what, d.Round(time.Millisecond))
	if d > s.stopBound() {
		s.T.Errorf("C7 %s: Stop took %v, over %v", what, d, s.stopBound())
	}
}

// 2. Graceful hand-over: the owner stops again and again and comes back as a contender;
// OnReleased comes before Stop returns, and a waiter takes over at once.
func gracefulHandOver(s *S) {
	procs := s.spawn(5)
	for range rounds(6, 20) {
		owner := s.owner(procs, s.failoverBound()+2*time.Second)
		t0 := Now()
		owner.Send("stop")
		s.awaitSuccessor(owner.ID, t0, s.gracefulBound())
		s.checkStop(owner, t0, "graceful")
		owner.Send("start")
	}
	s.finish()
}

// 3. Start/stop cycling: one contender, in this process, started and stopped again and
// again, with every wrong-state call; no goroutine survives a cycle.
func startStopCycling(s *S) {
	ctx := context.Background()
	log, err := s.newLog("cycler")
	if err != nil {
		s.T.Fatal(err)
	}
	defer log.Close()
	cfg := s.config("cycler", s.Server.Addr())
	backend, closeBackend, err := s.Kit.Backend(ctx, cfg)
	if err != nil {
		s.T.Fatal(err)
	}
	closeBackend = sync.OnceFunc(closeBackend)
	defer closeBackend()
	acquired, renewed := make(chan struct{}, 1), make(chan struct{}, 1)
	renewals := observe.Funcs{Call: func(c observe.Call) {
		if c.Op == observe.OpRenew {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	}}
	svc, err := simba.NewService(backend, simba.ContenderFuncs{MutexName: s.Mutex, ID: "cycler",
		Acquired: func(ctx context.Context, st simba.State) {
			log.Acquired(ctx, st.After.Token)
			if ctx.Err() == nil { // not the tenure of a Start that timed out, delivered late
				acquired <- struct{}{}
			}
		},
		Released: func(st simba.State) { log.Add(KindReleased, st.Before.Token, 0, "") },
	}, simba.WithTTL(s.Timing.TTL), simba.WithTransition(s.Timing.Transition), simba.WithCallTimeout(s.Timing.CallTimeout),
		simba.WithObserver(renewals))
	if err != nil {
		s.T.Fatal(err)
	}
	expect := func(what string, err, want error) {
		if !errors.Is(err, want) {
			s.T.Errorf("C9 %s: got %v, want %v", what, err, want)
		}
	}
	expect("Stop before Start", svc.Stop(ctx), simba.ErrNotRunning)
	cycle := func(hold func()) {
		log.Add(KindStart, 0, 0, "")
		// A Start whose store call timed out is an outage, which a caller retries, as the
		// contender processes do; anything else fails the scenario.
		err := svc.Start(ctx)
		for tries := 1; errors.Is(err, simba.ErrTimeout) && tries < 5; tries++ {
			s.note("Start timed out (attempt %d): %v", tries, err)
			err = svc.Start(ctx)
		}
		if err != nil {
			s.T.Fatalf("C9 Start: %v", err)
		}
		log.Add(KindStarted, 0, 0, "")
		select {
		case <-acquired:
		case <-time.After(s.failoverBound() + 2*time.Second):
			s.T.Fatal("no acquisition")
		}
		expect("Start twice", svc.Start(ctx), simba.ErrAlreadyStarted)
		hold()
		log.Add(KindStop, 0, 0, "")
		if err := svc.Stop(ctx); err != nil {
			s.T.Errorf("C9 Stop: %v", err)
		}
		log.Add(KindStopped, 0, 0, "")
		expect("Stop twice", svc.Stop(ctx), simba.ErrNotRunning)
	}
	// Warm-up: the backend's own goroutines start with the first use, and, on Redis, with
	// an owner's first renewal (its subscriptions), which the renewal grid may bring in any
	// cycle. A session store renews nothing: the wait is a TTL then.
	cycle(func() {
		select {
		case <-renewed:
		case <-time.After(s.Timing.TTL):
		}
	})
	baseline := goroutineBaseline()
	n := rounds(20, 100)
	for range n {
		cycle(func() {})
		if left := leftovers(s.Kit.Name, baseline, 2*time.Second); len(left) > 0 {
			s.T.Fatalf("C8 %d goroutines of the library left after a cycle:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	}
	// Concurrent Start and Stop from two goroutines: no panic, a consistent outcome.
	log.Add(KindStart, 0, 0, "")
	var wg sync.WaitGroup
	var stopErr error
	wg.Go(func() { _ = svc.Start(ctx) })
	wg.Go(func() { stopErr = svc.Stop(ctx) })
	wg.Wait()
	if svc.Status() == simba.StatusRunning {
		select {
		case <-acquired:
		case <-time.After(s.failoverBound() + 2*time.Second):
		}
		log.Add(KindStop, 0, 0, "")
		_ = svc.Stop(ctx)
		log.Add(KindStopped, 0, 0, "")
	} else if stopErr == nil { // the concurrent Stop stopped what Start started
		log.Add(KindStop, 0, 0, "")
		log.Add(KindStopped, 0, 0, "")
	}
	select { // an acquisition the concurrent Stop ended
	case <-acquired:
	default:
	}
	if err := svc.Close(); err != nil {
		s.T.Errorf("C9 Close after Stop: %v", err)
	}
	expect("Start after Close", svc.Start(ctx), simba.ErrClosed)
	closeBackend() // with its subscriptions, which an owner's renewal makes and Stop leaves to linger
	f := s.finish()
	if f.Tenures < n+1 {
		s.T.Errorf("C9 %d cycles but %d tenures: each Start must be a new tenure with a greater token", n+1, f.Tenures)
	}
}

// 4. Stop while the store hangs: the owner's link swallows everything, and the owner is
// stopped; Stop returns within the call timeout and delivers OnReleased; the lease lapses
// and another contender takes over.
func stopWhileHung(s *S) {
	procs := s.spawn(3)
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	heal := s.Fault("blackhole", "both directions of "+owner.ID,
		func() { owner.Proxy.Blackhole(faultproxy.Both) }, owner.Proxy.Heal)
	t0 := Now()
	owner.Send("stop")
	s.checkStop(owner, t0, "store hung")
	s.awaitSuccessor(owner.ID, t0, s.failoverBound())
	heal()
	owner.Send("start")
	s.finish()
}

// 5. Late results across lifecycles: the owner's replies come two call timeouts late
// while it is stopped and started again quickly: no late result reaches a later
// lifecycle, and once it has stopped, the store does not name it after T + G.
func lateResults(s *S) {
	procs := s.spawn(3)
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	d := 2 * s.Timing.CallTimeout
	heal := s.Fault("latency", fmt.Sprintf("replies of %s +%v, requests +%v±%v", owner.ID, d, d/2, d/2),
		func() {
			owner.Proxy.Delay(faultproxy.Down, d, 0)
			owner.Proxy.Delay(faultproxy.Up, d/2, d/2) // requests of one lifecycle may overtake another's
		}, owner.Proxy.Heal)
	for range rounds(4, 10) {
		owner.Send("stop")
		owner.Send("start")
		time.Sleep(s.Timing.CallTimeout)
	}
	owner.Send("stop")
	heal()
	time.Sleep(s.Timing.TTL + s.Timing.Transition + s.Timing.CallTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := s.Kit.Owner(ctx, s.Server.Addr(), s.Mutex); err != nil {
		s.T.Errorf("reading the owner: %v", err)
	} else if got == owner.ID {
		s.T.Errorf("C9 the store still names %s, stopped more than T + G ago", owner.ID)
	}
	s.finish()
}

// 6. Slow and panicking callbacks: one contender's OnAcquired blocks for 3T (3S on a
// session store); renewals go on, and when it is cut off its tenure context ends at once
// though the callback still blocks. Another contender's callbacks panic: they are recovered and contention goes on.
// Exclusion is measured on the tenure contexts.
func slowCallbacks(s *S) {
	s.onContext = true
	slow := s.SpawnWith("slow", func(c *ContenderConfig) { c.SlowAcquired = 3 * s.beliefBound() })
	slow.Send("start")
	t0 := Now()
	if _, ok := s.EventAfter(slow.ID, KindAcquired, 0, 10*time.Second); !ok {
		s.T.Fatal("the slow contender did not acquire")
	}
	panicky := s.SpawnWith("panicky", func(c *ContenderConfig) { c.Panics = true })
	other := s.Spawn("p0")
	panicky.Send("start")
	other.Send("start")
	time.Sleep(s.Timing.TTL + s.Timing.TTL/2) // renewals must go on while OnAcquired blocks
	if h := Holder(s.Events()); h != slow.ID {
		s.T.Errorf("the blocked owner lost the mutex to %q without a fault", h)
	}
	if at, ok := s.EventAfter(slow.ID, KindLost, t0, 0); ok {
		s.T.Errorf("the blocked owner's context ended at %v without a fault", time.Duration(at-t0))
	}
	cut := Now()
	heal := s.Fault("blackhole", "both directions of the blocked owner",
		func() { slow.Proxy.Blackhole(faultproxy.Both) }, slow.Proxy.Heal)
	if at, ok := s.EventAfter(slow.ID, KindLost, cut, s.beliefBound()+time.Second); ok {
		d := time.Duration(at - cut)
		s.result.Losses = append(s.result.Losses, d)
		s.note("cut off while OnAcquired blocked: context ended after %v (bound %v)", d.Round(time.Millisecond), s.beliefBound())
	} else {
		s.T.Error("C5 the blocked owner's context did not end after it was cut off")
	}
	s.awaitSuccessor(slow.ID, cut, s.failoverBound())
	heal()
	// The panicking contender, once it owns, keeps the mutex through its panics.
	slow.Send("stop")
	events, ok := s.Await(s.failoverBound()+5*time.Second, func(e []Event) bool { return Holder(e) == panicky.ID })
	for !ok && Holder(events) == other.ID {
		t := Now()
		other.Send("stop")
		// Not C6's bound (scenario 2 holds graceful hand-overs to it): an acquisition a
		// Stop cuts short may still run on a SQL store after the release and take the
		// freed row for the stopped owner (a renewal no longer does: jdbc's
		// mysqlTakesFree; nor, on MariaDB, one made holding the named lock:
		// mysqlAcquireHolding); the backend's sweep (stray.go) frees it but wakes no
		// waiter, and the next waiter's poll takes it, within a failover.
		s.awaitSuccessor(other.ID, t, s.failoverBound())
		other.Send("start")
		events, ok = s.Await(s.failoverBound()+time.Second, func(e []Event) bool { return Holder(e) == panicky.ID })
	}
	if !ok {
		s.T.Fatal("the panicking contender never acquired")
	}
	time.Sleep(2 * s.Timing.TTL)
	if h := Holder(s.Events()); h != panicky.ID {
		s.T.Errorf("after its OnAcquired panicked, the owner lost the mutex to %q: contention stopped", h)
	}
	t := Now()
	panicky.Send("stop")
	s.checkStop(panicky, t, "panicking callbacks")
	s.awaitSuccessor(panicky.ID, t, s.gracefulBound())
	s.finish()
}

// 8. Short pause of the owner: SIGSTOP for half the transition window (ZooKeeper: 0.3 S)
// at a random phase; the renewal it delays is still sent in time: no hand-over, no
// callbacks. That the owner keeps believing depends on the renewal going out within the
// slack the pause leaves (the renewal lead less the pause: 83ms at T 1s), which a loaded
// machine does not guarantee: the short run (make test) reports the owner's flaps and
// asserts them in the full run only; that nobody else acquires (the store's lease and
// the transition window cover the late renewal) is asserted in both.
func shortPause(s *S) {
	procs := s.spawn(4)
	length := s.Timing.Transition / 2
	if s.Kit.Session {
		length = s.Timing.Session * 3 / 10
	}
	flaps, takeovers := 0, 0
	for range rounds(3, 10) {
		owner := s.processOwner(procs)
		time.Sleep(rand.N(s.Timing.TTL)) // a random phase of the renewal period
		t0 := Now()
		s.Pause(owner)
		time.Sleep(length)
		s.Resume(owner)
		time.Sleep(s.Timing.TTL)
		lost, taken := false, false
		for _, e := range s.Events() {
			switch {
			case e.At <= t0:
			case (e.Kind == KindReleased || e.Kind == KindLost) && e.Proc == owner.ID:
				lost = true
			case e.Kind == KindAcquired && e.Proc != owner.ID:
				taken = true
			}
		}
		if lost {
			flaps++
		}
		if taken {
			takeovers++
		}
	}
	s.note("%d pauses of %v: %d flaps of the owner, %d taken over by another (target 0)", rounds(3, 10), length, flaps, takeovers)
	if takeovers > 0 {
		s.T.Errorf("a pause of %v (the owner's) let another contender acquire, %d times", length, takeovers)
	}
	if flaps > 0 && full() {
		s.T.Errorf("a pause of %v (the owner's) cost the owner its tenure, %d times", length, flaps)
	}
	s.finish()
}

// 9. Long pause of the owner [out]: SIGSTOP for 2 (T + G) (ZooKeeper: 2 S). Another
// contender acquires meanwhile; on resume the old owner's local deadline has passed, so
// its context ends and OnReleased comes before it does more work; its stale writes are
// rejected by the referee, and the unfenced shadow counter loses increments.
func longPause(s *S) {
	// Belief ends with the tenure context; OnReleased waits for the stale act to finish.
	s.onContext = true
	var procs []*Proc
	for i := range 4 {
		// Long work between checking the context and writing, and long increments: the
		// pause most likely falls inside one of them, as a GC pause would.
		// Increments of half a TTL: the resumed owner's stale one surely overlaps one of
		// its successor's, which repeat every WorkPause + IncPause.
		procs = append(procs, s.SpawnWith(fmt.Sprintf("p%d", i), func(c *ContenderConfig) {
			c.WorkPause, c.IncPause = 2*s.Timing.TTL/5, s.Timing.TTL/2
		}))
	}
	for _, p := range procs {
		p.Send("start")
	}
	length := 2 * (s.Timing.TTL + s.Timing.Transition)
	if s.Kit.Session {
		length = 2 * s.Timing.Session
	}
	owner := s.owner(procs, s.failoverBound()+2*time.Second)
	// Pause the owner while it works between checking its context and writing, where a
	// GC pause does the most harm: on resume it writes with its stale token.
	ready := Now()
	if _, ok := s.EventAfter(owner.ID, KindWork, ready, 5*time.Second); !ok {
		s.T.Fatal("the owner did not work")
	}
	t0 := Now()
	s.Pause(owner)
	s.awaitSuccessor(owner.ID, t0, s.failoverBound())
	time.Sleep(length - time.Duration(Now()-t0))
	s.Resume(owner)
	resumed := Now()
	if at, ok := s.EventAfter(owner.ID, KindLost, t0, 5*time.Second); ok {
		s.note("resumed owner's context ended %v after SIGCONT", time.Duration(at-resumed).Round(time.Millisecond))
	} else {
		s.T.Error("C5 the resumed owner's context did not end")
	}
	time.Sleep(s.Timing.TTL)
	f := s.finish()
	if f.MaxOverlap > length+time.Second {
		s.T.Errorf("C2 the overlap %v exceeds the pause %v", f.MaxOverlap, length)
	}
	s.note("pause %v: max overlap %v, %d stale writes rejected, %d shadow increments lost", length, f.MaxOverlap.Round(time.Millisecond), f.WritesRejected, f.ShadowLost)
	if f.WritesRejected == 0 && f.ShadowLost == 0 {
		s.note("the pause did not bite: the owner was not writing when it was stopped")
	}
}

// 10. Churn soak: every one to two seconds a random action — stop and start a contender,
// kill one and start a new one, pause one briefly — and all of C1–C10 over the whole
// history. Pauses stay within the transition window (in model); long pauses are scenario 9.
func churnSoak(s *S) {
	procs := s.spawn(5)
	end := time.Now().Add(phase(12*time.Second, 60*time.Second))
	next := 0
	for time.Now().Before(end) {
		time.Sleep(time.Second + rand.N(time.Second))
		p := procs[rand.N(len(procs))]
		switch action := rand.N(3); {
		case action == 0 || p.cmd == nil:
			p.Send("stop")
			p.Send("start")
			s.count("stop-start")
		case action == 1:
			s.Kill(p)
			procs = remove(procs, p)
			next++
			np := s.Spawn(fmt.Sprintf("n%d", next))
			np.Send("start")
			procs = append(procs, np)
		default:
			s.Pause(p)
			time.Sleep(s.Timing.Transition / 2)
			s.Resume(p)
		}
	}
	s.finish()
}
