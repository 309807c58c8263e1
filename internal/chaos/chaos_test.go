package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/internal/testserver"
)

func TestMain(m *testing.M) {
	if code, ok := ContenderMain(); ok {
		os.Exit(code)
	}
	quietDrivers()
	code := m.Run()
	goroutineLeaks = "none (goleak)"
	if err := goleak.Find(); err != nil {
		goroutineLeaks = "goleak found some, see stderr"
		if code == 0 {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if err := writeReport(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos report:", err)
		code = 1
	}
	os.Exit(code)
}

// goroutineLeaks is goleak's verdict after every test ran, for the report.
var goroutineLeaks = "not checked"

// phase returns the short or the full length of a phase.
func phase(short, long time.Duration) time.Duration {
	if full() {
		return long
	}
	return short
}

// scenario is one of the fault plan's.
type scenario struct {
	num    int
	name   string
	stores string // the letters of the stores it applies to: R, M, P, Z
	out    bool   // out of model: overlaps are measured, fencing carries the weight
	run    func(s *S)
	timing func(Timing) Timing // adjusts DefaultTiming, if set
	// full keeps a scenario to the full plan (make chaos), but on the stores quickOn
	// names (letters), where the short plan runs it too.
	full    bool
	quickOn string
}

// S is one scenario run on one store.
type S struct {
	*Run
	sc        scenario
	result    *Result
	onContext bool // measure exclusion on tenure contexts (blocking callbacks)
}

// fencedReferee makes the referee check tokens; the mutant unfenced-referee turns it off.
const fencedReferee = true

var (
	resultsMu sync.Mutex
	results   []*Result
)

// TestChaos runs every scenario of the fault plan on every store it names, the stores and
// the mutations in parallel, and writes the report when all are done.
func TestChaos(t *testing.T) {
	if os.Getenv("SIMBA_MUTATION") == "" { // not inside a mutation run
		t.Run("27_mutations", func(t *testing.T) {
			t.Parallel() // beside the stores: the suite's longest package waits less
			testMutations(t)
		})
	}
	for _, k := range Kits() {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				name := fmt.Sprintf("%02d_%s", sc.num, sc.name)
				if !strings.Contains(sc.stores, k.Letter) || !full() && !short(sc, k, name) {
					continue
				}
				t.Run(name, func(t *testing.T) {
					began := time.Now()
					res := &Result{Scenario: sc.num, Name: sc.name, Store: k.Name, Out: sc.out}
					timing := DefaultTiming
					if sc.timing != nil {
						timing = sc.timing(timing)
					}
					timing = timing.Scaled(k.Scale)
					s := &S{Run: NewRun(t, k, timing, fencedReferee), sc: sc, result: res}
					sc.run(s)
					res.Faults = s.Counts()
					res.Failed = t.Failed()
					res.Failures = s.T.Failures()
					if res.Failed && len(res.Failures) == 0 {
						res.Failures = []string{"no message of its own: a data race while it ran (the race detector fails every test running at the time), or a failure in a helper that bypasses the scenario's Test; see the test output"}
					}
					res.Took = time.Since(began)
					resultsMu.Lock()
					results = append(results, res)
					resultsMu.Unlock()
				})
			}
		})
	}
}

// short reports whether the short plan runs scenario sc, named name, on the store of k.
func short(sc scenario, k Kit, name string) bool {
	if sc.full {
		return strings.Contains(sc.quickOn, k.Letter)
	}
	return k.Short == nil || slices.Contains(k.Short, name)
}

// finish checks the run's history and records the findings.
func (s *S) finish() Findings {
	f := s.Finish(Options{OutOfModel: s.sc.out, OnContext: s.onContext})
	s.result.Findings = f
	return f
}

// spawn starts n contender processes and the in-process contender, and returns once all
// are contending (their Start returned): a scenario's first fault must find waiters behind
// the owner. On a loaded machine a process took more than a second to start, and the
// in-process contender, first and alone, was stopped with nobody to succeed it.
func (s *S) spawn(n int) []*Proc {
	s.T.Helper()
	var procs []*Proc
	for i := range n {
		procs = append(procs, s.Spawn(fmt.Sprintf("p%d", i)))
	}
	procs = append(procs, s.InProcess("inproc"))
	t0 := Now()
	for _, p := range procs {
		p.Send("start")
	}
	for _, p := range procs {
		if _, ok := s.EventAfter(p.ID, KindStarted, t0, startPatience+5*time.Second); !ok {
			s.T.Fatalf("%s did not start", p.ID)
		}
	}
	return procs
}

// serverOf returns the run's server as the deployment T a scenario needs (an ensemble,
// a Sentinel deployment, a cluster).
func serverOf[T ServerProcess](s *S) T {
	s.T.Helper()
	srv, ok := s.Server.(T)
	if !ok {
		s.T.Fatalf("scenario %s needs a %T, not a %T", s.sc.name, srv, s.Server)
	}
	return srv
}

// spawnDirect starts n contender processes that are given the run's whole address list
// (sentinels, cluster nodes) and connect wherever their client takes them: their proxies
// go unused. All contend.
func (s *S) spawnDirect(n int) []*Proc {
	var procs []*Proc
	for i := range n {
		p := s.SpawnWith(fmt.Sprintf("p%d", i), func(c *ContenderConfig) { c.Addr = s.Server.Addr() })
		p.Send("start")
		procs = append(procs, p)
	}
	return procs
}

// owner waits for a contender to believe it owns the mutex and returns it.
func (s *S) owner(procs []*Proc, timeout time.Duration) *Proc {
	s.T.Helper()
	events, ok := s.Await(timeout, func(e []Event) bool { return Holder(e) != "" })
	if !ok {
		s.T.Fatalf("no owner within %v", timeout)
	}
	h := Holder(events)
	for _, p := range procs {
		if p.ID == h {
			return p
		}
	}
	s.T.Fatalf("owner %q is not one of the contenders", h)
	return nil
}

// awaitSuccessor waits for a contender other than old to acquire after t0 and returns the
// failover time, which the report shows next to bound. The assertion
// is generous (bound plus half of it, at least a second more): scheduling on a loaded
// two-core machine must not fail the run, while a failover that waits for something it
// should not (a lapse that should have been a release, a missed wake-up) still does.
func (s *S) awaitSuccessor(old string, t0 int64, bound time.Duration) time.Duration {
	s.T.Helper()
	limit := bound + max(bound/2, time.Second)
	events, ok := s.Await(limit, func(e []Event) bool {
		_, found := FirstAcquiredAfter(e, t0, old)
		return found
	})
	if !ok {
		s.T.Errorf("C6 no successor of %s within %v (bound %v)", old, limit, bound)
		return 0
	}
	e, _ := FirstAcquiredAfter(events, t0, old)
	d := time.Duration(e.At - t0)
	s.result.Failovers = append(s.result.Failovers, d)
	s.result.Bound = bound
	return d
}

// awaitHolder waits, once a loss of belief the fault at t0 caused has had time to reach
// the logs (a TTL), up to 30 s for someone to believe, and notes since when: an owner
// that believed throughout, or a tenure that began after t0.
func (s *S) awaitHolder(t0 int64, what string) {
	s.T.Helper()
	s.pause(s.Timing.TTL)
	events, ok := s.Await(30*time.Second, func(e []Event) bool { return Holder(e) != "" })
	if !ok {
		s.T.Errorf("C6 nobody believed within 30s after %s", what)
		return
	}
	h := Holder(events)
	var since int64
	for _, e := range events {
		if e.Proc == h && e.Kind == KindAcquired {
			since = e.At
		}
	}
	if since <= t0 {
		s.note("%s believed throughout %s", h, what)
		return
	}
	s.note("%s believed %v after %s", h, time.Duration(since-t0).Round(time.Millisecond), what)
}

// restart starts a stopped or killed server again, within a minute.
func (s *S) restart(srv *testserver.Server) {
	s.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		s.T.Fatalf("restarting %s: %v", srv.Name, err)
	}
}

func (s *S) note(format string, args ...any) { s.record(s.result, format, args...) }

// byStore orders results for the report.
func byStore(list []*Result) {
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Store != list[j].Store {
			return list[i].Store < list[j].Store
		}
		return list[i].Scenario < list[j].Scenario
	})
}
