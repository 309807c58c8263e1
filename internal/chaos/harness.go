package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
)

// ServerProcess is a store server the harness started (see internal/testserver).
type ServerProcess interface {
	Addr() string
	Start(ctx context.Context) error
	Stop() error
	Kill() error
	Pause() error
	Resume() error
}

// Kit is what the fault suite needs to know about one store.
type Kit struct {
	// Name is the store's name in reports: "redis", "mariadb", "postgres", "zookeeper".
	Name string
	// Letter is the store's letter in the report: R, M or Z; P for PostgreSQL.
	Letter string
	// Server prepares a fresh server in dir; the harness starts it.
	Server func(dir string) (ServerProcess, error)
	// Backend opens a backend on cfg.Addr for a contender; close frees what it opened.
	Backend func(ctx context.Context, cfg ContenderConfig) (b simba.Backend, close func(), err error)
	// Residue reports what the store still holds for mutex once every contender has
	// stopped (keys, rows still naming an owner, nodes, subscriptions), as an error.
	// Excused names the contenders killed during the run and those whose Stop returned
	// an error: what a crash leaves behind by design (a Redis waiting-set entry), or a
	// stop that said it could not clean up (a ZooKeeper node left, without a session, to
	// the session's expiry), is not residue of theirs.
	Residue func(ctx context.Context, addr, mutex string, excused []string) error
	// Owner returns the contender ID the store names as the owner of mutex now ("" for
	// none), read with a connection of the harness's own.
	Owner func(ctx context.Context, addr, mutex string) (string, error)
	// Session reports whether the store ties ownership to a session (ZooKeeper) rather
	// than to a TTL.
	Session bool
	// HoldsPoll reports whether a waiting holder learns of a hold given back in another
	// process only when it next asks the store (the SQL backends), not at once.
	HoldsPoll bool
	// Scale stretches the scenarios' durations (TTL, transition, call timeout, session)
	// on this store; zero: 1. Epsilon, the checker's slack on overlaps, is not stretched.
	Scale float64
	// Short names the scenarios ("02_graceful_handover") the short run (make test) runs
	// on this store, to keep its time; nil: every scenario of the store. The full run
	// (make chaos) runs them all.
	Short []string
}

var (
	kitsMu sync.Mutex
	kits   = map[string]Kit{}
)

// register adds a store kit; the kit files of this package call it from init.
func register(k Kit) { Register(k) }

// Register adds the kit of a store whose backend is a module of its own (etcd), whose
// tests run this harness on it: their init calls it, and their TestMain calls
// ContenderMain first, so that the contender processes find the kit too.
func Register(k Kit) {
	kitsMu.Lock()
	defer kitsMu.Unlock()
	kits[k.Name] = k
}

// Kits returns the registered kits by name.
func Kits() []Kit {
	kitsMu.Lock()
	defer kitsMu.Unlock()
	out := make([]Kit, 0, len(kits))
	for _, k := range kits {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Timing is the timing of a scenario (T, G, D, and the ZooKeeper session).
type Timing struct {
	TTL, Transition, CallTimeout, Session time.Duration
	// RenewalLead is the owners' renewal lead; zero: simba's default (a third of the TTL).
	RenewalLead time.Duration
	// Epsilon is the scheduling slack the checker tolerates.
	Epsilon time.Duration
}

// DefaultTiming is the plan's budget: T 1s, G 500ms, D 250ms, S 1s.
var DefaultTiming = Timing{TTL: time.Second, Transition: 500 * time.Millisecond,
	CallTimeout: 250 * time.Millisecond, Session: time.Second, Epsilon: 50 * time.Millisecond}

// Scaled returns t with its durations multiplied by f (f <= 1: t as it is); Epsilon
// stays.
func (t Timing) Scaled(f float64) Timing {
	if f <= 1 {
		return t
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f).Round(time.Millisecond) }
	t.TTL, t.Transition, t.CallTimeout, t.Session = scale(t.TTL), scale(t.Transition), scale(t.CallTimeout), scale(t.Session)
	t.RenewalLead = scale(t.RenewalLead)
	return t
}

// Result is what one scenario run on one store reports.
type Result struct {
	Scenario  int
	Name      string
	Store     string
	Out       bool
	Findings  Findings
	Faults    map[string]int
	Failovers []time.Duration // owner gone to next OnAcquired
	Bound     time.Duration   // the bound failovers are held to
	Losses    []time.Duration // fault to OnReleased of the owner cut off
	Notes     []string
	Failed    bool
	Failures  []string // what it reported failing, when Failed
	Took      time.Duration
}

// full reports whether the full plan runs (make chaos): longer phases and more rounds.
// Otherwise the short version runs, as part of make test.
func full() bool { return os.Getenv("SIMBA_CHAOS") == "full" }

// rounds returns the short or the full number of repetitions.
func rounds(short, long int) int {
	if full() {
		return long
	}
	return short
}

// failoverBound is the crash bound: T + G + J + D + RTT, or S + RTT on a session
// store; RTT is taken as the call timeout.
func (r *Run) failoverBound() time.Duration {
	tm := r.Timing
	if r.Kit.Session {
		return tm.Session + tm.CallTimeout
	}
	return tm.TTL + tm.Transition + time.Second + 2*tm.CallTimeout
}

// beliefBound is how long a contender cut off from the store may believe: to its local
// TTL end, T (on a session store, S: it stops at disconnect).
func (r *Run) beliefBound() time.Duration {
	if r.Kit.Session {
		return r.Timing.Session
	}
	return r.Timing.TTL
}

// record records a note in res and logs it.
func (r *Run) record(res *Result, format string, args ...any) {
	res.Notes = append(res.Notes, fmt.Sprintf(format, args...))
	r.T.Logf(format, args...)
}

// Run is one scenario on one store: its server, referee, contenders and logs.
type Run struct {
	T      *Test
	Kit    Kit
	Timing Timing
	Mutex  string
	Dir    string
	Server ServerProcess
	Ref    *Referee
	Log    *Log // the harness's own log (faults, kills)

	mu       sync.Mutex
	procs    map[string]*Proc
	logPaths []string
	counts   map[string]int // fault injections by kind
}

// Test is a scenario's *testing.T that keeps the failures it reports, so the report can
// say why a scenario failed where a reader of a long log looks first.
type Test struct {
	*testing.T

	mu       sync.Mutex
	failures []string
}

func (t *Test) Errorf(format string, args ...any) {
	t.Helper()
	t.keep(fmt.Sprintf(format, args...))
	t.T.Errorf(format, args...)
}

func (t *Test) Error(args ...any) {
	t.Helper()
	t.keep(fmt.Sprint(args...))
	t.T.Error(args...)
}

func (t *Test) Fatalf(format string, args ...any) {
	t.Helper()
	t.keep(fmt.Sprintf(format, args...))
	t.T.Fatalf(format, args...)
}

func (t *Test) Fatal(args ...any) {
	t.Helper()
	t.keep(fmt.Sprint(args...))
	t.T.Fatal(args...)
}

func (t *Test) keep(msg string) {
	t.mu.Lock()
	t.failures = append(t.failures, msg)
	t.mu.Unlock()
}

// Failures returns what the scenario reported failing so far. A scenario can fail with
// none: a data race detected while it ran fails every test running at the time.
func (t *Test) Failures() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.failures...)
}

// Proc is one contender: a separate OS process (or a goroutine, for the in-process
// contender) behind a fault proxy of its own.
type Proc struct {
	ID    string
	Proxy *faultproxy.Proxy
	run   *Run

	cmd      *exec.Cmd
	stdin    io.WriteCloser
	commands chan string // in-process contender
	done     chan error  // the process or goroutine has ended
	mu       sync.Mutex
	exited   bool
}

// NewRun starts a fresh server of kit, a referee and the harness log. fenced false runs
// the referee without its token check (a mutation).
func NewRun(t *testing.T, kit Kit, timing Timing, fenced bool) *Run {
	t.Helper()
	dir, err := os.MkdirTemp("", "simba-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{T: &Test{T: t}, Kit: kit, Timing: timing, Dir: dir, procs: map[string]*Proc{}, counts: map[string]int{},
		Mutex: "chaos-" + filepath.Base(dir)}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("chaos: logs kept in %s", dir)
		}
	})
	srv, err := kit.Server(filepath.Join(dir, "server"))
	if err != nil {
		r.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		r.T.Fatal(err)
	}
	r.Server = srv
	t.Cleanup(func() { _ = srv.Stop() })
	r.Log, err = r.newLog("harness")
	if err != nil {
		r.T.Fatal(err)
	}
	reflog, err := r.newLog("referee")
	if err != nil {
		r.T.Fatal(err)
	}
	r.Ref, err = NewReferee(reflog, fenced)
	if err != nil {
		r.T.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Ref.Close(); _ = reflog.Close(); _ = r.Log.Close() })
	return r
}

func (r *Run) newLog(name string) (*Log, error) {
	path := filepath.Join(r.Dir, name+".log")
	r.mu.Lock()
	r.logPaths = append(r.logPaths, path)
	r.mu.Unlock()
	return CreateLog(path, name)
}

// config returns the configuration of contender id on addr; its log is read with the
// run's once the contender is spawned.
func (r *Run) config(id, addr string) ContenderConfig {
	path := filepath.Join(r.Dir, id+".log")
	return ContenderConfig{
		Store: r.Kit.Name, Addr: addr, Mutex: r.Mutex, ID: id,
		TTL: r.Timing.TTL, Transition: r.Timing.Transition, CallTimeout: r.Timing.CallTimeout, RenewalLead: r.Timing.RenewalLead,
		SessionTTL: r.Timing.Session, Referee: r.Ref.Addr(), Log: path,
		WriteEvery: r.Timing.TTL / 20, IncPause: r.Timing.TTL / 100,
	}
}

// Spawn starts a contender process behind its own proxy; it contends once told "start".
func (r *Run) Spawn(id string) *Proc { return r.SpawnWith(id, nil) }

// SpawnWith is Spawn with the contender's configuration adjusted by adjust (if not nil).
func (r *Run) SpawnWith(id string, adjust func(*ContenderConfig)) *Proc {
	r.T.Helper()
	return r.SpawnOnWith(id, r.Server.Addr(), adjust)
}

// SpawnOn is Spawn with the contender's proxy in front of upstream, one server of a
// store of several (a member of a ZooKeeper ensemble), rather than the run's server.
func (r *Run) SpawnOn(id, upstream string) *Proc {
	r.T.Helper()
	return r.SpawnOnWith(id, upstream, nil)
}

// SpawnOnWith is SpawnOn with the contender's configuration adjusted by adjust (if not nil).
func (r *Run) SpawnOnWith(id, upstream string, adjust func(*ContenderConfig)) *Proc {
	r.T.Helper()
	proxy, err := faultproxy.New(upstream)
	if err != nil {
		r.T.Fatal(err)
	}
	cfg := r.config(id, proxy.Addr())
	if adjust != nil {
		adjust(&cfg)
	}
	js, _ := json.Marshal(cfg)
	exe, err := os.Executable()
	if err != nil {
		r.T.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=contender", configEnv+"="+string(js))
	errf, err := os.Create(filepath.Join(r.Dir, id+".stderr"))
	if err != nil {
		r.T.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = errf, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.T.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.T.Fatal(err)
	}
	p := &Proc{ID: id, Proxy: proxy, run: r, cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	go func() { // ends when the process does
		err := cmd.Wait()
		_ = errf.Close()
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
		p.done <- err
	}()
	r.add(p, cfg)
	return p
}

// InProcess starts the in-process contender behind its own proxy.
func (r *Run) InProcess(id string) *Proc {
	r.T.Helper()
	proxy, err := faultproxy.New(r.Server.Addr())
	if err != nil {
		r.T.Fatal(err)
	}
	cfg := r.config(id, proxy.Addr())
	p := &Proc{ID: id, Proxy: proxy, run: r, commands: make(chan string, 8), done: make(chan error, 1)}
	go func() {
		err := RunContender(context.Background(), cfg, p.commands)
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
		p.done <- err
	}()
	r.add(p, cfg)
	return p
}

func (r *Run) add(p *Proc, cfg ContenderConfig) {
	r.mu.Lock()
	r.procs[p.ID] = p
	r.logPaths = append(r.logPaths, cfg.Log)
	r.mu.Unlock()
	r.T.Cleanup(func() {
		p.Exit()
		_ = p.Proxy.Close()
	})
}

// Send gives the contender a command: "start", "stop" or "exit".
func (p *Proc) Send(cmd string) {
	if p.commands != nil {
		p.commands <- cmd
		return
	}
	_, _ = io.WriteString(p.stdin, cmd+"\n")
}

// Exit tells the contender to stop and end, and waits for it (killing a process that does
// not end within 30s).
func (p *Proc) Exit() {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited {
		return
	}
	if p.commands != nil {
		p.commands <- "exit"
		close(p.commands)
		<-p.done
		return
	}
	p.Send("exit")
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill kills the contender's process (SIGKILL) and logs it. Its proxy closes its
// connections, as the kernel would.
func (r *Run) Kill(p *Proc) {
	r.count("kill")
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT) // a paused process dies too
	_ = p.cmd.Process.Kill()
	// The process runs no more once the signal is sent; reaping it may take seconds on a
	// loaded machine, and a kill logged then would have it believe until then.
	killed := Now()
	<-p.done
	r.Log.Put(Event{At: killed, Proc: p.ID, Kind: KindKilled})
	p.Proxy.Reset()
}

// Pause stops the contender's process with SIGSTOP.
func (r *Run) Pause(p *Proc) {
	r.count("pause")
	r.Log.Add(KindFaultBegin, 0, 0, "pause "+p.ID)
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGSTOP)
}

// Resume continues a paused contender with SIGCONT.
func (r *Run) Resume(p *Proc) {
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	r.Log.Add(KindFaultEnd, 0, 0, "resume "+p.ID)
}

// Fault logs the beginning of a fault of the given kind, runs inject, and returns a
// function that heals it and logs its end.
func (r *Run) Fault(kind, what string, inject func(), heal func()) func() {
	r.count(kind)
	r.Log.Add(KindFaultBegin, 0, 0, kind+": "+what)
	inject()
	return func() {
		heal()
		r.Log.Add(KindFaultEnd, 0, 0, kind+": "+what)
	}
}

func (r *Run) count(kind string) {
	r.mu.Lock()
	r.counts[kind]++
	r.mu.Unlock()
}

// Counts returns the fault injections by kind.
func (r *Run) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// Events reads every log of the run, merged in time order.
func (r *Run) Events() []Event {
	r.mu.Lock()
	paths := append([]string(nil), r.logPaths...)
	r.mu.Unlock()
	events, err := ReadLogs(paths...)
	if err != nil {
		r.T.Fatal(err)
	}
	return events
}

// Await polls the logs until cond holds or timeout passes, and returns the events it
// last saw and whether cond held. Other processes write the logs, so reading them again is
// how their events arrive.
func (r *Run) Await(timeout time.Duration, cond func([]Event) bool) ([]Event, bool) {
	deadline := time.Now().Add(timeout)
	for {
		events := r.Events()
		if cond(events) {
			return events, true
		}
		if time.Now().After(deadline) {
			return events, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// EventAfter waits up to timeout for proc's event of kind after t0 and returns its time.
func (r *Run) EventAfter(proc string, kind Kind, t0 int64, timeout time.Duration) (int64, bool) {
	var at int64
	_, ok := r.Await(timeout, func(events []Event) bool {
		for _, e := range events {
			if e.At > t0 && e.Proc == proc && e.Kind == kind {
				at = e.At
				return true
			}
		}
		return false
	})
	return at, ok
}

// Holder returns the contender that believes it owns the mutex at the end of events, if
// any.
func Holder(events []Event) string {
	holder := ""
	for _, e := range events {
		switch e.Kind {
		case KindAcquired:
			holder = e.Proc
		case KindReleased, KindKilled:
			if e.Proc == holder {
				holder = ""
			}
		}
	}
	return holder
}

// Finish ends every contender, checks the history and returns the findings; it reports
// violations through t.
func (r *Run) Finish(o Options) Findings {
	r.T.Helper()
	r.mu.Lock()
	procs := make([]*Proc, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Proxy.Heal()
	}
	var exits sync.WaitGroup
	for _, p := range procs {
		exits.Go(p.Exit)
	}
	exits.Wait()
	if o.Epsilon == 0 {
		o.Epsilon = r.Timing.Epsilon
	}
	if o.Shadow == nil {
		v := r.Ref.Shadow(r.Mutex)
		o.Shadow = &v
	}
	f := Check(r.Events(), o)
	for _, v := range f.Violations(o) {
		r.T.Error(v)
	}
	if r.Kit.Residue != nil && len(f.Violations(o)) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var excused []string
		for _, e := range r.Events() {
			if e.Kind == KindKilled || (e.Kind == KindStopped && e.Note != "") {
				excused = append(excused, e.Proc)
			}
		}
		if err := r.Kit.Residue(ctx, r.Server.Addr(), r.Mutex, excused); err != nil {
			f.Residue = append(f.Residue, err.Error())
			r.T.Errorf("C8 residue: %v", err)
		}
	}
	r.T.Logf("chaos %s: %s", r.Kit.Name, f.Summary())
	return f
}

// Ensure every kit name is unique in reports.
func (k Kit) String() string { return fmt.Sprintf("%s (%s)", k.Name, k.Letter) }
