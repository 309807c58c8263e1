package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// Semaphores and read-write locks: every process has a Semaphore of semPermits permits
// named semName and an RWMutex named rwName, whose holds the operations take, release and
// downgrade. The checker holds them to:
//
//   - capacity: at no instant are more than semPermits semaphore holds believed, nor a
//     write hold together with any other hold of the lock;
//   - tokens: a hold's token is larger than every token of its name handed out before its
//     acquisition began, and belongs to one holder; a downgrade's read hold has a token
//     larger than its write hold's, with no write hold's token in between;
//   - liveness: no acquisition waits while its name has room (fewer semaphore holds than
//     permits; no hold of the lock) for longer than calm, undisturbed;
//   - ends: a hold not given back ends only by a loss, and Close leaves none on the store.

// The names of the semaphore and the read-write lock, and the semaphore's permit count.
const (
	semName    = "s"
	rwName     = "rw"
	semPermits = 2
)

// The kinds of hold leases.
const (
	kindSem   = "semaphore"
	kindRead  = "read"
	kindWrite = "write"
)

// holdKinds are the Participant.Hold of each name, for the store lookups of the checker.
var holdKinds = map[string]backend.Hold{
	semName: {Kind: backend.Semaphore, Permits: semPermits},
	rwName:  {Kind: backend.RWLock},
}

// capacity is how many holds of name may be believed at once: the liveness check wants
// a waiter served while fewer are held.
func capacity(name string) int {
	if name == semName {
		return semPermits
	}
	return 1
}

// newHolds gives p a new Semaphore and RWMutex.
func (p *process) newHolds() {
	p.newSemaphore()
	p.newRWMutex()
}

func (p *process) newSemaphore() {
	s, err := simba.NewSemaphore(p.link, semName, semPermits, options[simba.LockerOption](p,
		simba.WithContenderID(p.contenderID(fmt.Sprintf("sem-%d", p.w.nextID()))))...)
	if err != nil {
		panic(err)
	}
	p.sem, p.semHolds = s, nil
}

func (p *process) newRWMutex() {
	m, err := simba.NewRWMutex(p.link, rwName, options[simba.LockerOption](p,
		simba.WithContenderID(p.contenderID(fmt.Sprintf("rw-%d", p.w.nextID()))))...)
	if err != nil {
		panic(err)
	}
	p.rw, p.rwHolds = m, nil
}

// applyHold runs an operation on p's semaphore or read-write lock.
func (w *world) applyHold(p *process, o Op) {
	switch o.Kind {
	case OpSemAcquire, OpSemTry:
		s, once := p.sem, o.Kind == OpSemTry
		acquire := s.Acquire
		if once {
			acquire = s.TryAcquire
		}
		w.acquireHold(p, o, semName, kindSem, !once, func(ctx context.Context) (*simba.Lease, *simba.WriteLease, error) {
			l, err := acquire(ctx)
			return l, nil, err
		})
	case OpRWLock:
		m := p.rw
		w.acquireHold(p, o, rwName, kindWrite, o.N%3 > 0, func(ctx context.Context) (*simba.Lease, *simba.WriteLease, error) {
			lock := m.Lock
			if o.N%3 == 0 {
				lock = m.TryLock
			}
			wl, err := lock(ctx)
			if err != nil {
				return nil, nil, err
			}
			return wl.Lease, wl, nil
		})
	case OpRWRLock:
		m := p.rw
		rlock := m.RLock
		if o.N%3 == 0 {
			rlock = m.TryRLock
		}
		w.acquireHold(p, o, rwName, kindRead, o.N%3 > 0, func(ctx context.Context) (*simba.Lease, *simba.WriteLease, error) {
			l, err := rlock(ctx)
			return l, nil, err
		})
	case OpSemRelease, OpRWRelease:
		name, list := semName, &p.semHolds
		if o.Kind == OpRWRelease {
			name, list = rwName, &p.rwHolds
		}
		if rec := w.takeHold(list, o.N, ""); rec != nil {
			w.spawn(p, name, fmt.Sprintf("release of p%d's %s hold (token %d)", p.id, rec.kind, rec.token), o.D, false, rec.lease.Release)
		}
	case OpRWDowngrade:
		w.downgrade(p, o)
	case OpHoldsClose:
		w.mu.Lock()
		old, id := p.sem.Close, "semaphore"
		holds := p.semHolds
		if o.N%2 == 0 {
			p.newSemaphore()
		} else {
			old, id, holds = p.rw.Close, "read-write lock", p.rwHolds
			p.newRWMutex()
		}
		for _, rec := range holds {
			rec.done = true
		}
		w.mu.Unlock()
		w.spawn(p, "", fmt.Sprintf("Close of p%d's %s", p.id, id), 0, false, func(context.Context) error { return old() })
	}
}

// acquireHold runs an acquisition of a hold of name and hands out what it returns.
func (w *world) acquireHold(p *process, o Op, name, kind string, waits bool, acquire func(context.Context) (*simba.Lease, *simba.WriteLease, error)) {
	w.mu.Lock()
	floor := w.maxToken[name] // every hold handed out so far was admitted before this call
	sem, rw := p.sem, p.rw
	w.mu.Unlock()
	what := fmt.Sprintf("%s of p%d", o.Kind, p.id)
	w.spawn(p, name, what, o.D, waits, func(ctx context.Context) error {
		got, wl, err := acquire(ctx)
		if err != nil {
			return err
		}
		rec := &lease{proc: p, inc: p.incarnation, kind: kind, mutex: name, token: got.Token(), owner: got.Owner().ID, ctx: got.Context(), lease: got, write: wl}
		w.mu.Lock()
		switch {
		case p.closed || p.sem != sem || p.rw != rw:
			rec.done = true // closed meanwhile
		case name == semName:
			p.semHolds = append(p.semHolds, rec)
		default:
			p.rwHolds = append(p.rwHolds, rec)
		}
		w.mu.Unlock()
		w.handOutHold(rec, floor, 0)
		return nil
	})
}

// takeHold takes the n-th hold of list, of kind (any: ""), if there is one, and marks it
// given back.
func (w *world) takeHold(list *[]*lease, n int, kind string) *lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	var idx []int
	for i, rec := range *list {
		if kind == "" || rec.kind == kind {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	i := idx[n%len(idx)]
	rec := (*list)[i]
	*list = slices.Delete(*list, i, i+1)
	rec.done = true
	return rec
}

// downgrade turns one of p's write holds into a read hold. When the downgrade fails, the
// write hold is released.
func (w *world) downgrade(p *process, o Op) {
	rec := w.takeHold(&p.rwHolds, o.N, kindWrite)
	if rec == nil {
		return
	}
	rw := p.rw
	w.spawn(p, rwName, fmt.Sprintf("Downgrade of p%d's write hold (token %d)", p.id, rec.token), o.D, false, func(ctx context.Context) error {
		r, err := rec.write.Downgrade(ctx)
		if err != nil {
			_ = rec.write.Release(ctx)
			return err
		}
		read := &lease{proc: p, inc: p.incarnation, kind: kindRead, mutex: rwName, token: r.Token(), owner: r.Owner().ID, ctx: r.Context(), lease: r}
		w.mu.Lock()
		if p.closed || p.rw != rw {
			read.done = true
		} else {
			p.rwHolds = append(p.rwHolds, read)
		}
		w.mu.Unlock()
		w.handOutHold(read, rec.token, rec.token)
		return nil
	})
}

// handOutHold registers a hold handed out and checks it at that instant: it is live, its
// token is above floor and belongs to its holder, a downgrade's (from: its write hold's
// token) has no write hold's token between, and the name is not over capacity.
func (w *world) handOutHold(l *lease, floor, from uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.ctx.Err() != nil {
		if errors.Is(context.Cause(l.ctx), simba.ErrOwnershipLost) {
			w.violate("a %s hold of %s was handed out to %s (token %d) on a tenure that had been lost", l.kind, l.mutex, l.owner, l.token)
		}
		return
	}
	key := fmt.Sprintf("%s#%d", l.mutex, l.token)
	if owner, seen := w.tokenOwner[key]; seen && owner != l.owner {
		w.violate("token %d of %s belongs to %s and to %s", l.token, l.mutex, owner, l.owner)
	}
	if l.token <= floor {
		w.violate("%s got token %d of %s, not above %d, handed out before its acquisition began", l.owner, l.token, l.mutex, floor)
	}
	if from != 0 {
		for _, t := range w.writeTokens {
			if t > from && t < l.token {
				w.violate("a write hold (token %d) came in between the write hold %d and its downgrade's read hold %d", t, from, l.token)
			}
		}
	}
	if l.kind == kindWrite {
		w.writeTokens = append(w.writeTokens, l.token)
	}
	w.tokenOwner[key] = l.owner
	w.maxToken[l.mutex] = max(w.maxToken[l.mutex], l.token)
	w.leases = append(w.leases, l)
	w.withinCapacity("the hand-out of " + key + " to " + l.owner)
}

// withinCapacity checks that at most semPermits semaphore holds are believed, and no
// write hold beside another hold of the lock. Called with w.mu held.
func (w *world) withinCapacity(when string) {
	var sem, rw []*lease
	write := false
	for _, l := range w.leases {
		if l.ctx.Err() != nil {
			continue
		}
		switch l.kind {
		case kindSem:
			sem = append(sem, l)
		case kindRead, kindWrite:
			rw = append(rw, l)
			write = write || l.kind == kindWrite
		}
	}
	if len(sem) > semPermits {
		w.violate("at %s: %d holds of the semaphore of %d permits believed at once: %s", when, len(sem), semPermits, holders(sem))
	}
	if write && len(rw) > 1 {
		w.violate("at %s: a write hold believed beside other holds of the lock: %s", when, holders(rw))
	}
}

func holders(list []*lease) string {
	var who []string
	for _, l := range list {
		who = append(who, fmt.Sprintf("%s (%s, token %d)", l.owner, l.kind, l.token))
	}
	slices.Sort(who)
	return fmt.Sprint(who)
}

// isHold reports whether kind is a semaphore's or read-write lock's hold.
func isHold(kind string) bool { return kind == kindSem || kind == kindRead || kind == kindWrite }

// closeHolds closes p's semaphore and read-write lock, each on a call of its own.
func (w *world) closeHolds(p *process) {
	s, m := p.sem, p.rw
	w.spawn(p, "", "Semaphore.Close", 0, false, func(context.Context) error { return s.Close() })
	w.spawn(p, "", "RWMutex.Close", 0, false, func(context.Context) error { return m.Close() })
}

// holdsLeft reports, after everything was closed, the holds the store still keeps.
func (w *world) holdsLeft() []string {
	var left []string
	for name, hold := range holdKinds {
		b, _ := memory.New(w.store)
		c, err := b.StartContend(context.Background(), backend.Participant{Mutex: name, TTL: ttl, Transition: transition, Wake: func() {}, Hold: hold})
		if err != nil {
			panic(err)
		}
		if rec, err := c.(backend.LeaseContention).Lookup(context.Background()); err == nil && rec.Owner != "" {
			left = append(left, fmt.Sprintf("%s holds %s", rec.Owner, name))
		}
		_ = c.StopContend(context.Background())
	}
	slices.Sort(left)
	return left
}
