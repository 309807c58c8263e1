package etcd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/chaos"
	"github.com/simba-go/simba/internal/faultproxy"
)

// etcdScenario is one fault scenario on the 3-member cluster, judged by the checker over
// the contenders' logs, with the fenced referee.
type etcdScenario struct {
	name   string
	out    bool // out of the lease model: overlaps are measured, fencing carries the weight
	short  bool // runs in make test too; make chaos (SIMBA_CHAOS=full) runs them all
	timing func(chaos.Timing) chaos.Timing
	run    func(r *etcdRun)
}

var etcdScenarios = []etcdScenario{
	{name: "40_keepalive_cut", run: keepAliveCut},
	{name: "41_owner_paused", out: true, short: true, run: ownerPaused},
	{name: "42_leader_killed", run: leaderKilled},
	{name: "43_member_partitioned", short: true, run: memberPartitioned},
	{name: "44_quorum_lost", run: quorumLost},
	{name: "45_compaction_while_waiting", run: compactionWhileWaiting, timing: longLease},
	{name: "47_owner_answers_lost", short: true, run: ownerAnswersLost},
	{name: "48_answers_lost_after_apply", short: true, run: answersLostAfterApply, timing: longLease},
	{name: "49_restart_with_data", run: restartWithData},
	{name: "50_restart_wiped", run: restartWiped},
}

// chaosTiming is the fault suite's timing with etcd's shortest lease (2s with the
// members' 1s election timeout) as the TTL, and a call timeout that three members
// syncing to one busy host's memory keep.
var chaosTiming = chaos.Timing{TTL: 2 * time.Second, Transition: 500 * time.Millisecond,
	CallTimeout: 500 * time.Millisecond, Epsilon: 50 * time.Millisecond}

// electionTimeout is the members' (testserver's default): a leader cut off from its
// quorum renews leases until it steps down, at most two of them later.
const electionTimeout = time.Second

// TestChaos runs the etcd fault scenarios (select them with -run 'TestChaos$/etcd'): all
// of them with SIMBA_CHAOS=full (make chaos), the short ones otherwise, to keep make
// test's time (each takes 10 to 20 s, most of it waiting for leases to lapse). Then 46
// runs the backend's mutations (chaos_mutations_test.go), which scenarios must catch.
func TestChaos(t *testing.T) {
	needServer(t)
	var kit chaos.Kit
	for _, k := range chaos.Kits() {
		if k.Name == "etcd" {
			kit = k
		}
	}
	t.Run(kit.Name, func(t *testing.T) {
		for _, sc := range etcdScenarios {
			if !sc.short && os.Getenv("SIMBA_CHAOS") != "full" {
				continue
			}
			t.Run(sc.name, func(t *testing.T) {
				timing := chaosTiming
				if sc.timing != nil {
					timing = sc.timing(timing)
				}
				r := &etcdRun{Run: chaos.NewRun(t, kit, timing, fencedReferee), sc: sc}
				r.c = r.Server.(*chaosCluster)
				sc.run(r)
			})
		}
		if os.Getenv("SIMBA_MUTATION") == "" { // not inside a mutation run
			t.Run("46_mutations", testMutations)
		}
	})
}

// fencedReferee makes the referee check tokens: false is the unfenced mutation, which
// 41_owner_paused must catch (C4).
const fencedReferee = true

// etcdRun is one scenario's run on its cluster.
type etcdRun struct {
	*chaos.Run
	sc etcdScenario
	c  *chaosCluster
}

// finish checks the run's history (tenure contexts are what a stale act is measured on,
// out of the model).
func (r *etcdRun) finish() {
	r.Finish(chaos.Options{OutOfModel: r.sc.out, OnContext: r.sc.out})
}

// spawnOn starts contender id connected, through its proxy, to member i only, contending.
func (r *etcdRun) spawnOn(id string, i int) *chaos.Proc {
	r.T.Helper()
	p := r.SpawnOn(id, r.c.Members[i].Addr())
	p.Send("start")
	return p
}

// spawnEach starts a contender connected to each member, pi to member i.
func (r *etcdRun) spawnEach() []*chaos.Proc {
	var procs []*chaos.Proc
	for i := range r.c.Members {
		procs = append(procs, r.spawnOn(fmt.Sprintf("p%d", i), i))
	}
	return procs
}

// ownerOn starts p0 connected to member i, waits for it to own, and starts a contender
// on each other member, which waits behind it; it returns p0.
func (r *etcdRun) ownerOn(i int) *chaos.Proc {
	r.T.Helper()
	owner := r.spawnOn("p0", i)
	r.owner([]*chaos.Proc{owner})
	for j := range r.c.Members {
		if j != i {
			r.spawnOn(fmt.Sprintf("p%d", j+1), j)
		}
	}
	return owner
}

// owner waits up to 10s for one of procs to believe and returns its index.
func (r *etcdRun) owner(procs []*chaos.Proc) int {
	r.T.Helper()
	events, ok := r.Await(10*time.Second, func(e []chaos.Event) bool { return chaos.Holder(e) != "" })
	if !ok {
		r.T.Fatal("no owner within 10s")
	}
	h := chaos.Holder(events)
	for i, p := range procs {
		if p.ID == h {
			return i
		}
	}
	r.T.Fatalf("owner %q is not one of the contenders", h)
	return -1
}

// leader returns the index of the leading member, waiting up to 30s for an election.
func (r *etcdRun) leader() int {
	r.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		i, err := r.c.Leader(ctx)
		cancel()
		if err == nil {
			return i
		}
		if time.Now().After(deadline) {
			r.T.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lossWithin checks that owner's tenure context ended within bound of the fault at t0
// (C5): it cannot know that its tenure ended, only that it can no longer prove its lease.
func (r *etcdRun) lossWithin(owner *chaos.Proc, t0 int64, bound time.Duration, what string) {
	r.T.Helper()
	at, ok := r.EventAfter(owner.ID, chaos.KindLost, t0, bound+5*time.Second)
	if !ok {
		r.T.Errorf("C5 %s still believes %v after %s (bound %v)", owner.ID, bound+5*time.Second, what, bound)
		return
	}
	d := time.Duration(at - t0)
	r.T.Logf("%s stopped believing %v after %s (bound %v)", owner.ID, d.Round(time.Millisecond), what, bound)
	if d > bound+4*r.Timing.Epsilon {
		r.T.Errorf("C5 %s believed %v after %s, past its bound (%v)", owner.ID, d, what, bound)
	}
}

// successor waits up to 30s for a contender other than old to begin a tenure after t0.
func (r *etcdRun) successor(old string, t0 int64, what string) {
	r.T.Helper()
	r.successorWithin(old, t0, 30*time.Second, what)
}

// successorWithin waits up to bound for a contender other than old to begin a tenure
// after t0, and returns it.
func (r *etcdRun) successorWithin(old string, t0 int64, bound time.Duration, what string) chaos.Event {
	r.T.Helper()
	events, ok := r.Await(bound-time.Duration(chaos.Now()-t0), func(e []chaos.Event) bool {
		_, found := chaos.FirstAcquiredAfter(e, t0, old)
		return found
	})
	if !ok {
		r.T.Errorf("C6 nobody but %s believed within %v after %s", old, bound, what)
		return chaos.Event{}
	}
	e, _ := chaos.FirstAcquiredAfter(events, t0, old)
	r.T.Logf("%s believed %v after %s (token %d)", e.Proc, time.Duration(e.At-t0).Round(time.Millisecond), what, e.Token)
	return e
}

// startMembers starts the members that are not running, within a minute.
func (r *etcdRun) startMembers() {
	r.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.c.Start(ctx); err != nil {
		r.T.Fatal(err)
	}
}

// admin returns a client of the harness's own on every member, closed when the scenario ends.
func (r *etcdRun) admin(endpoints ...string) *clientv3.Client {
	r.T.Helper()
	return newClient(r.T.T, endpoints...)
}

// 40. The owner's connection to etcd swallows everything (its keep-alive stream among it):
// it stops believing within the TTL of its last answered keep-alive, and a contender on
// another member takes over once the lease expired on the leader, with a greater token.
func keepAliveCut(r *etcdRun) {
	owner := r.ownerOn(0)
	t0 := chaos.Now()
	heal := r.Fault("blackhole", "the owner's connection to its member", func() { owner.Proxy.Blackhole(faultproxy.Both) },
		func() { owner.Proxy.Heal(); owner.Proxy.Reset() })
	r.lossWithin(owner, t0, r.Timing.TTL, "its keep-alives were cut")
	r.successor(owner.ID, t0, "the owner's keep-alives were cut")
	heal()
	time.Sleep(r.Timing.TTL) // the old owner joins again behind the new one
	r.finish()
}

// 41. The owner process is stopped (SIGSTOP) while it works between checking its tenure
// context and writing, for twice its lease: a successor takes over once the lease
// expired, and the resumed owner's write with its old token is rejected by the referee.
// Out of the model (a paused process believes while it cannot look): the overlap is
// measured, fencing is what holds.
func ownerPaused(r *etcdRun) {
	var procs []*chaos.Proc
	for i := range r.c.Members {
		// Long work between the check and the write, and long increments: the pause
		// falls inside one of them, and the stale write overlaps the successor's. Each
		// is connected to member i directly: the fault is the process's, its proxy
		// goes unused.
		p := r.SpawnWith(fmt.Sprintf("p%d", i), func(c *chaos.ContenderConfig) {
			c.Addr = r.c.Members[i].Addr()
			c.WorkPause, c.IncPause = 2*r.Timing.TTL/5, r.Timing.TTL/2
		})
		p.Send("start")
		procs = append(procs, p)
	}
	owner := procs[r.owner(procs)]
	if _, ok := r.EventAfter(owner.ID, chaos.KindWork, chaos.Now(), 5*time.Second); !ok {
		r.T.Fatal("the owner did not work")
	}
	t0 := chaos.Now()
	r.Pause(owner)
	r.successor(owner.ID, t0, "the owner was paused")
	time.Sleep(2*(r.Timing.TTL+r.Timing.Transition) - time.Duration(chaos.Now()-t0))
	resumed := chaos.Now()
	r.Resume(owner)
	if at, ok := r.EventAfter(owner.ID, chaos.KindLost, t0, 5*time.Second); ok {
		r.T.Logf("the resumed owner's context ended %v after SIGCONT", time.Duration(at-resumed).Round(time.Millisecond))
	} else {
		r.T.Error("C5 the resumed owner's context did not end")
	}
	time.Sleep(r.Timing.TTL)
	r.finish()
}

// 42. The leader is killed (SIGKILL) while the owner is connected to it alone: the other
// two elect a new leader, which extends the owner's lease by an election timeout; the
// owner, which can renew nothing, stops believing within the TTL of its last answered
// keep-alive, and a contender on a surviving member takes over once the lease expired.
// The killed member rejoins with its data.
func leaderKilled(r *etcdRun) {
	leader := r.leader()
	owner := r.ownerOn(leader)
	t0 := chaos.Now()
	restart := r.Fault("kill", r.c.Members[leader].Name+", the leader and the owner's member",
		func() { _ = r.c.Members[leader].Kill() }, r.startMembers)
	r.lossWithin(owner, t0, r.Timing.TTL, "its member, the leader, was killed")
	r.successor(owner.ID, t0, "the leader was killed")
	restart()
	time.Sleep(r.Timing.TTL)
	r.finish()
}

// 43. The owner's member, a follower, is cut off from the other two while it goes on
// serving its clients: it answers reads from its own, stale state, but a linearizable
// read and a keep-alive need the leader and fail there. The owner, connected to that
// member alone, must not go on believing: it stops within the TTL of its last answered
// keep-alive, and a contender on the other side takes over once the lease expired.
func memberPartitioned(r *etcdRun) {
	leader := r.leader()
	follower := (leader + 1) % len(r.c.Members)
	owner := r.ownerOn(follower)
	t0 := chaos.Now()
	rejoin := r.Fault("isolate", r.c.Members[follower].Name+" (a follower, the owner's member) from the others",
		func() { _ = r.c.Isolate(follower) }, func() { _ = r.c.Rejoin(follower) })
	r.lossWithin(owner, t0, r.Timing.TTL, "its member was cut off from the others")
	r.successor(owner.ID, t0, "the owner's member was cut off")
	// The isolated member still serves what it had: the owner's key, which the others
	// have deleted with its lease. Only a read that needs the leader tells.
	client := r.admin(r.c.Members[follower].Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	stale, err := client.Get(ctx, etcd.DefaultPrefix+r.Mutex+"/", clientv3.WithPrefix(), clientv3.WithSerializable())
	cancel()
	if err == nil {
		r.T.Logf("the isolated member serves %d keys of the mutex from its own state", len(stale.Kvs))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	_, err = client.Get(ctx, etcd.DefaultPrefix+r.Mutex+"/", clientv3.WithPrefix())
	cancel()
	if err == nil {
		r.T.Errorf("a linearizable read on the isolated member succeeded")
	}
	rejoin()
	time.Sleep(r.Timing.TTL)
	r.finish()
}

// 44. Two of the three members are killed: the third has no quorum, renews no lease and
// elects no leader. The owner (on whichever member) stops believing within the TTL, two
// election timeouts more if its member led and renewed until it stepped down, and nobody
// believes until the two come back; then someone does, with a greater token.
func quorumLost(r *etcdRun) {
	procs := r.spawnEach()
	kept := r.owner(procs)
	owner := procs[kept]
	t0 := chaos.Now()
	restart := r.Fault("kill", "the two members the owner is not connected to", func() {
		for i, m := range r.c.Members {
			if i != kept {
				_ = m.Kill()
			}
		}
	}, r.startMembers)
	r.lossWithin(owner, t0, r.Timing.TTL+2*electionTimeout, "its cluster lost its quorum")
	time.Sleep(r.Timing.TTL) // without a quorum, nobody believes (the checker sees it)
	t1 := chaos.Now()
	restart()
	r.successor("", t1, "the quorum was back")
	time.Sleep(r.Timing.TTL)
	r.finish()
}

// 45. A waiter's connection is cut while the owner releases and the revision of the
// deletion is compacted: its watch cannot resume from where it was. The backend's watch
// stream ends with the connection, which ends its watches, and the waiter reads the mutex
// again once the connection is back, and owns. A waiter that ignored how its watch ended
// would wait for ever. The lease outlives the cut, so that the waiter keeps its key and
// place.
func compactionWhileWaiting(r *etcdRun) {
	owner := r.spawnOn("p0", 0)
	r.owner([]*chaos.Proc{owner})
	waiter := r.spawnOn("p1", 1)
	admin := r.admin(r.c.Endpoints()...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		kvs, err := chaosKeys(context.Background(), r.c.Addr(), mutexKeys(r.Mutex))
		if err == nil && len(kvs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			r.T.Fatalf("the waiter has no key after 10s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The waiter watches its predecessor once its join's answer is in: a second is plenty.
	// Were it not watching yet, it would read the mutex once reconnected, and pass anyway.
	time.Sleep(time.Second)
	t0 := chaos.Now()
	heal := r.Fault("blackhole", "the waiter's connection", func() { waiter.Proxy.Blackhole(faultproxy.Both) },
		func() { waiter.Proxy.Heal(); waiter.Proxy.Reset() })
	owner.Send("stop")
	if _, ok := r.EventAfter(owner.ID, chaos.KindStopped, t0, 10*time.Second); !ok {
		r.T.Fatal("the owner's Stop did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put, err := admin.Put(ctx, "chaos/filler", r.Mutex)
	if err != nil {
		r.T.Fatal(err)
	}
	if _, err := admin.Compact(ctx, put.Header.Revision); err != nil {
		r.T.Fatal(err)
	}
	heal()
	r.successor(owner.ID, t0, "the waiter's watch was compacted away")
	r.finish()
}

// longLease makes the lease outlive scenario 45's cut by far.
func longLease(t chaos.Timing) chaos.Timing {
	t.TTL = 10 * time.Second
	return t
}

// 47. Everything the owner sends reaches its member and is applied, its keep-alives among
// it, and nothing comes back: its proxy swallows what the member answers. The owner can
// prove nothing, so it stops believing within the TTL of its last answered keep-alive. It
// must not hold the mutex for as long as the fault lasts, with keep-alives the leader
// applies and a key nobody believes in: its backend gives the lease up once it has gone a
// TTL unproven (its revoke, applied too, deletes its keys), and a contender on another
// member takes over, with a greater token, while the fault goes on.
func ownerAnswersLost(r *etcdRun) {
	owner := r.ownerOn(0)
	t0 := chaos.Now()
	heal := r.Fault("blackhole", "what the owner's member answers it", func() { owner.Proxy.Blackhole(faultproxy.Down) },
		func() { owner.Proxy.Heal(); owner.Proxy.Reset() })
	r.lossWithin(owner, t0, r.Timing.TTL, "its answers were lost")
	r.successor(owner.ID, t0, "the owner's answers were lost") // the fault goes on meanwhile
	heal()
	time.Sleep(r.Timing.TTL) // the old owner joins again behind the new one
	r.finish()
}

// 48. Answers lost after etcd applied the request, at a registration and at a release,
// with a lease (10s) that outlives both, so that only the backend's own deletes make way
// in time. First p1, whose backend has its lease, starts while what its member answers is
// swallowed: the transaction that puts its key is applied, its Start fails by the call
// timeout (and is retried, each attempt with a key of its own), and a key it does not
// know it has must not stay in line, where it would keep everyone out for as long as its
// lease lives. p2, which starts meanwhile, owns within half the lease. Then p2's answers
// are swallowed while it stops: its delete is applied, its Stop returns by its deadline
// all the same, and p1, waiting again, takes over within half the lease, not once p2's
// lease has gone.
func answersLostAfterApply(r *etcdRun) {
	p1 := r.spawnOn("p1", 1)
	r.owner([]*chaos.Proc{p1})
	p1.Send("stop")
	if _, ok := r.EventAfter(p1.ID, chaos.KindStopped, 0, 10*time.Second); !ok {
		r.T.Fatal("p1's Stop did not return")
	}
	bound := r.Timing.TTL / 2
	t0 := chaos.Now()
	heal := r.Fault("blackhole", "what p1's member answers it", func() { p1.Proxy.Blackhole(faultproxy.Down) },
		func() { p1.Proxy.Heal(); p1.Proxy.Reset() })
	p1.Send("start")
	if _, ok := r.EventAfter(p1.ID, chaos.KindRetry, t0, 10*time.Second); !ok {
		r.T.Fatal("p1's start did not fail")
	}
	if !r.keyOf(p1.ID, 10*time.Second) {
		r.T.Fatal("no key of p1's was put: its registration was not applied")
	}
	t1 := chaos.Now()
	p2 := r.spawnOn("p2", 2)
	r.successorWithin(p1.ID, t1, bound, "p2 started behind p1's lost registration")
	heal()
	if _, ok := r.Await(10*time.Second, func(e []chaos.Event) bool { return startedAfter(e, p1.ID, t0) }); !ok {
		r.T.Fatal("p1's start did not succeed once its answers came back")
	}
	if !r.keyOf(p1.ID, 10*time.Second) {
		r.T.Fatal("p1 does not wait behind p2")
	}
	r.wrote(p2, t1)
	t2 := chaos.Now()
	heal = r.Fault("blackhole", "what p2's member answers it", func() { p2.Proxy.Blackhole(faultproxy.Down) },
		func() { p2.Proxy.Heal(); p2.Proxy.Reset() })
	p2.Send("stop")
	if at, ok := r.EventAfter(p2.ID, chaos.KindStopped, t2, bound); ok {
		r.T.Logf("p2's Stop returned after %v", time.Duration(at-t2).Round(time.Millisecond))
	} else {
		r.T.Errorf("C7 p2's Stop did not return within %v with its answers lost", bound)
	}
	r.successorWithin(p2.ID, t2, bound, "p2's delete was applied and its answer lost")
	heal()
	r.wrote(p1, t2)
	r.finish()
}

// wrote waits up to 10s for p to write to the referee after t, as an owner does.
func (r *etcdRun) wrote(p *chaos.Proc, t int64) {
	r.T.Helper()
	if _, ok := r.EventAfter(p.ID, chaos.KindIncrement, t, 10*time.Second); !ok {
		r.T.Errorf("%s did not write within 10s", p.ID)
	}
}

// keyOf waits up to timeout for a key of contender id under the mutex.
func (r *etcdRun) keyOf(id string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		kvs, err := chaosKeys(context.Background(), r.c.Addr(), mutexKeys(r.Mutex))
		if err == nil && slices.ContainsFunc(kvs, func(kv keyValue) bool { return kv.id == id }) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startedAfter reports whether proc's Start returned without an error after t.
func startedAfter(events []chaos.Event, proc string, t int64) bool {
	return slices.ContainsFunc(events, func(e chaos.Event) bool {
		return e.At > t && e.Proc == proc && e.Kind == chaos.KindStarted && e.Note == ""
	})
}

// 49. Every member is killed and started again with its data: the revision goes on, and
// with it the tokens. The owner stops believing within the TTL; once the cluster is back
// someone owns (the owner again, in the same tenure or a new one, or a waiter), with a
// token no lower than before, and no backend sees the revision go back.
func restartWithData(r *etcdRun) {
	procs := r.spawnEach()
	owner := procs[r.owner(procs)]
	t0 := chaos.Now()
	restart := r.Fault("kill", "every member, restarted with its data", func() { _ = r.c.Kill() }, r.startMembers)
	r.lossWithin(owner, t0, r.Timing.TTL, "every member was killed")
	t1 := chaos.Now()
	restart()
	r.successor("", t1, "the cluster was back")
	time.Sleep(r.Timing.TTL)
	r.finish()
	for _, p := range procs {
		if r.noticedLoss(p) {
			r.T.Errorf("%s's backend says that etcd's revision went back, with the data kept", p.ID)
		}
	}
}

// 50. Every member is killed and started again without its data: the cluster begins again
// at revision 1, and keys created now would carry tokens lower than those handed out
// before. Every backend notices (a linearizable answer below a revision seen before: its
// Error log, in the contender's stderr) and holds back: nobody believes, on tokens that
// would repeat, until etcd's revision has passed the highest the backend saw. The harness
// then writes until it has (as an operator's etcdutl snapshot restore --bump-revision
// would at once), and someone owns with a token above every earlier one (C3).
func restartWiped(r *etcdRun) {
	procs := r.spawnEach()
	r.owner(procs)
	for _, p := range procs { // each backend has seen the revisions of the first cluster
		if !r.keyOf(p.ID, 10*time.Second) {
			r.T.Fatalf("%s has no key", p.ID)
		}
	}
	admin := r.admin(r.c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := admin.Get(ctx, "chaos/revision")
	if err != nil {
		r.T.Fatal(err)
	}
	// Above what any backend saw: the keys are all in, and an owner's keep-alives write nothing.
	floor := before.Header.Revision + 20
	t0 := chaos.Now()
	restart := r.Fault("wipe", "every member, restarted without its data", func() {
		_ = r.c.Kill()
		for _, m := range r.c.Members {
			_ = os.RemoveAll(filepath.Join(m.Dir, "data"))
		}
	}, r.startMembers)
	restart()
	for _, p := range procs {
		deadline := time.Now().Add(30 * time.Second)
		for !r.noticedLoss(p) {
			if time.Now().After(deadline) {
				r.T.Errorf("%s's backend did not notice that etcd's revision went back", p.ID)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(r.Timing.TTL) // nobody believes meanwhile (checked below)
	t1 := chaos.Now()
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rev := int64(0)
	for rev < floor {
		put, err := admin.Put(ctx, "chaos/revision", "")
		if err != nil {
			r.T.Fatal(err)
		}
		rev = put.Header.Revision
	}
	r.T.Logf("etcd's revision went back from %d and was raised to %d %v after the wipe", before.Header.Revision, rev,
		time.Duration(t1-t0).Round(time.Millisecond))
	r.successor("", t1, "the harness began to raise etcd's revision")
	events := r.Events()
	if e, ok := chaos.FirstAcquiredAfter(events, t0, ""); ok && e.At < t1 {
		// C3: a token issued now may repeat or undercut one issued before the wipe.
		r.T.Errorf("C3 tokens: %s believed (token %d) before etcd's revision passed the one it went back from", e.Proc, e.Token)
	}
	r.finish()
}

// noticedLoss reports whether p's backend has logged that etcd's revision went back.
func (r *etcdRun) noticedLoss(p *chaos.Proc) bool {
	out, _ := os.ReadFile(filepath.Join(r.Dir, p.ID+".stderr"))
	return strings.Contains(string(out), "revision went back")
}
