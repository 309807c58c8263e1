package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/clock"
)

// raceMutex is the mutex only the hand-over race uses (OpHandOverRace).
const raceMutex = "race"

// Timing of every contender of the simulation.
const (
	ttl        = time.Second
	transition = 500 * time.Millisecond
	// calm is how long after a fault, a pause or a crash the liveness checks wait: by
	// then every contender has retried and seen the store as it is.
	calm = 3*(ttl+transition) + 2*time.Second
	// schedPeriod is the Period of every Scheduler.
	schedPeriod = 200 * time.Millisecond
)

// world is one run of the simulation: the store, the processes and the checker's view.
type world struct {
	cfg   Config
	rng   *rand.Rand // the resume orders; the operations have their own
	store *memory.Store
	names []string                  // the mutexes
	watch []backend.LeaseContention // one observer contention per mutex, for lookups
	procs []*process

	mu         sync.Mutex // guards what the call goroutines touch below
	leases     []*lease
	calls      []*call
	violations []string
	maxToken   map[string]uint64
	ranSlot    map[string]time.Time // per mutex: the slot of the last Scheduler run checked
	// raceClosing: the contender IDs of hand-over race objects whose Close has been
	// called. A lease such an object hands out afterwards may have been granted before
	// the Close began, which then ends it: that is no loss.
	raceClosing map[string]bool
	tokenOwner  map[string]string // mutex + token -> contender
	writeTokens []uint64          // the tokens of the write holds handed out
	epoch       map[string]int    // per mutex: bumped whenever anyone starts wanting it (TryAcquire's checks)
	idleSince   map[string]time.Time
	calmAt      time.Time // liveness is checked only from then on
	nextCall    int
	ids         atomic.Int64
}

// process is one simulated process: its clock, its link to the store and its simba
// objects. A crash replaces the link and the objects (a new incarnation).
type process struct {
	w           *world
	id          int
	incarnation int
	clock       *clock.Pausable
	link        *link
	resumeAt    time.Time // while paused: when it resumes
	closed      bool      // its objects are being closed (the end of the run, a crash)

	lockers   []*simba.Locker // per mutex
	lockerIDs []string
	owned     []*lease // per mutex: the locker's lease, while held
	mutexes   *simba.Mutexes
	holds     []*lease // the Mutexes holds not given back
	services  []*actor // per mutex
	scheds    []*actor // per mutex

	sem      *simba.Semaphore
	semHolds []*lease // the semaphore's holds not given back
	rw       *simba.RWMutex
	rwHolds  []*lease // the read-write lock's holds not given back

	raceMutexes *simba.Mutexes // the objects of the last hand-over race
	raceLocker  *simba.Locker
	raceLeases  []*lease
}

// actor is a Service or a Scheduler of a process.
type actor struct {
	kind    string // "service" or "scheduler"
	mutex   string
	id      string
	svc     *simba.Service
	sched   *simba.Scheduler
	running bool
	run     *call // a Run under way
	closed  bool  // a Close returned
	// quits: its callbacks stop it from inside (the contender, when it acquires)
	quits bool
}

// lease is a tenure context handed out to a user of simba: a Locker's or Mutexes' lease,
// a Service's OnAcquired context, a Scheduler's run.
type lease struct {
	proc  *process
	inc   int
	kind  string
	mutex string
	token uint64
	owner string
	ctx   context.Context
	lease *simba.Lease
	write *simba.WriteLease // a write hold's, for its downgrade
	// done: the simulation gave it back (Release, Stop, Close) or its process crashed,
	// so its context may end for any reason.
	done bool
	// ended: its context ended while held, and ownEnds has looked at why.
	ended bool
}

// call is a call of the simulation into simba, on a goroutine of its own.
type call struct {
	id       int
	what     string
	proc     *process
	mutex    string
	began    time.Time
	deadline time.Time // zero: none
	ctx      context.Context
	cancel   context.CancelFunc
	waits    bool // an Acquire that waits for the mutex: liveness counts it
	done     bool
	err      error
}

func newWorld(cfg Config) *world {
	w := &world{
		cfg:         cfg,
		rng:         rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		store:       memory.NewStore(),
		names:       []string{"a", "b", raceMutex},
		maxToken:    map[string]uint64{},
		ranSlot:     map[string]time.Time{},
		raceClosing: map[string]bool{},
		tokenOwner:  map[string]string{},
		epoch:       map[string]int{},
		idleSince:   map[string]time.Time{},
	}
	ob, _ := memory.New(w.store)
	for _, m := range w.names {
		c, err := ob.StartContend(context.Background(), backend.Participant{Mutex: m, TTL: ttl, Transition: transition, Wake: func() {}})
		if err != nil {
			panic(err)
		}
		w.watch = append(w.watch, c.(backend.LeaseContention))
	}
	for i := range cfg.Processes {
		p := &process{w: w, id: i, clock: processClock()}
		p.boot()
		w.procs = append(w.procs, p)
	}
	return w
}

// options are the options of every simba object of p.
func options[O any](p *process, extra ...O) []O {
	var out []O
	for _, o := range []simba.Option{
		simba.WithTTL(ttl), simba.WithTransition(transition),
		p.w.cfg.WithClock(p.clock),
		simba.WithLogger(slog.New(slog.DiscardHandler)),
	} {
		out = append(out, o.(O)) // an Option is an option of every constructor
	}
	return append(out, extra...)
}

// contenderID names a contender of p's current incarnation.
func (p *process) contenderID(what string) string {
	return fmt.Sprintf("p%d.%d-%s", p.id, p.incarnation, what)
}

// boot gives p a new link and new simba objects.
func (p *process) boot() {
	w := p.w
	b, _ := memory.New(w.store)
	p.link = newLink(b)
	n := len(w.names)
	p.lockers, p.lockerIDs, p.owned = make([]*simba.Locker, n), make([]string, n), make([]*lease, n)
	p.services, p.scheds = make([]*actor, n), make([]*actor, n)
	for i, m := range w.names {
		p.newLocker(i)
		id := p.contenderID("svc-" + m)
		a := &actor{kind: "service", mutex: m, id: id}
		svc, err := simba.NewService(p.link, simba.ContenderFuncs{MutexName: m, ID: id,
			Acquired: func(ctx context.Context, st simba.State) { p.acquired(a, ctx, st) },
		}, options[simba.ServiceOption](p)...)
		if err != nil {
			panic(err)
		}
		a.svc = svc
		p.services[i] = a
		sa := &actor{kind: "scheduler", mutex: m, id: p.contenderID("sched-" + m)}
		sched, err := simba.NewScheduler(p.link, m, simba.Schedule{Period: schedPeriod},
			func(ctx context.Context, leader simba.Owner) { p.work(sa, ctx, leader) },
			options[simba.SchedulerOption](p, simba.WithContenderID(sa.id))...)
		if err != nil {
			panic(err)
		}
		sa.sched = sched
		p.scheds[i] = sa
	}
	p.newMutexes()
	p.newHolds()
}

func (p *process) newLocker(i int) {
	p.lockerIDs[i] = p.contenderID("locker-" + p.w.names[i] + "-" + strconv.Itoa(p.w.nextID()))
	l, err := simba.NewLocker(p.link, p.w.names[i], options[simba.LockerOption](p, simba.WithContenderID(p.lockerIDs[i]))...)
	if err != nil {
		panic(err)
	}
	p.lockers[i] = l
}

func (p *process) newMutexes() {
	// Few local hand-overs, so that the mutex goes back to the store often.
	m, err := simba.NewMutexes(p.link, options[simba.MutexesOption](p, simba.WithContenderID(p.contenderID("mutexes-"+strconv.Itoa(p.w.nextID()))),
		simba.WithLocalHandOvers(p.id%3))...)
	if err != nil {
		panic(err)
	}
	p.mutexes, p.holds = m, nil
}

// nextID numbers the objects a run creates.
func (w *world) nextID() int { return int(w.ids.Add(1)) }

// acquired is a Service contender's OnAcquired.
func (p *process) acquired(a *actor, ctx context.Context, st simba.State) {
	p.w.handOut(&lease{proc: p, inc: p.incarnation, kind: "service", mutex: a.mutex, token: st.After.Token, owner: a.id, ctx: ctx})
	if a.quits {
		_ = a.svc.Stop(context.Background()) // from inside its own callback: must not wait for it
	}
}

// work is a Scheduler's work: a run is a hand-out of the tenure, checked as such, and of
// the slot the store recorded for it.
func (p *process) work(a *actor, ctx context.Context, leader simba.Owner) {
	l := &lease{proc: p, inc: p.incarnation, kind: "scheduler", mutex: a.mutex, token: leader.Token, owner: a.id, ctx: ctx}
	p.w.handOut(l)
	p.w.slotRun(l)
}

// paused reports whether p is paused.
func (p *process) paused() bool { return !p.resumeAt.IsZero() }

// mutexIndex returns the index of mutex.
func (w *world) mutexIndex(mutex string) int {
	for i, m := range w.names {
		if m == mutex {
			return i
		}
	}
	return -1
}

// storeOwner looks up who owns mutex on the store.
func (w *world) storeOwner(mutex string) string {
	rec, err := w.watch[w.mutexIndex(mutex)].Lookup(context.Background())
	if err != nil {
		return "?"
	}
	return rec.Owner
}
