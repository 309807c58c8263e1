package tck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// The checks of semaphores and read-write locks, for backends that keep them
// (backend.Holder); the others skip them.

// errUnsupported ends a check whose backend does not keep what it checks: the subtest
// is skipped.
var errUnsupported = errors.New("tck: the backend does not support it")

// needs returns errUnsupported unless the backend keeps kind k.
func needs(b *probe, k backend.Kind) error {
	if !b.Holds(k) {
		return fmt.Errorf("%w (backend.Holder reports no %v)", errUnsupported, k)
	}
	return nil
}

// semaphore creates a semaphore on b and closes it when the check ends.
func (e *env) semaphore(b *probe, name string, permits int, role string) (*simba.Semaphore, error) {
	s, err := simba.NewSemaphore(b, name, permits, options(e, simba.LockerOption(simba.WithContenderID(e.id(role))))...)
	if err != nil {
		return nil, fmt.Errorf("NewSemaphore: %w", err)
	}
	e.cleanup(func() { _ = s.Close() })
	return s, nil
}

// rwmutex creates a read-write lock on b and closes it when the check ends.
func (e *env) rwmutex(b *probe, name, role string) (*simba.RWMutex, error) {
	m, err := simba.NewRWMutex(b, name, options(e, simba.LockerOption(simba.WithContenderID(e.id(role))))...)
	if err != nil {
		return nil, fmt.Errorf("NewRWMutex: %w", err)
	}
	e.cleanup(func() { _ = m.Close() })
	return m, nil
}

// pending is an acquisition under way on a goroutine of its own.
type pending struct {
	what string
	done chan struct{}
	l    *simba.Lease
	err  error
}

// goAcquire runs acquire on a goroutine of its own, bounded by the check's deadline; a
// lease it returns is released when the check ends.
func (e *env) goAcquire(what string, acquire func(context.Context) (*simba.Lease, error)) *pending {
	p := &pending{what: what, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.l, p.err = acquire(e.ctx)
		if p.l != nil {
			e.cleanup(func() { _ = p.l.Release(context.Background()) })
		}
	}()
	return p
}

// await waits up to d for the acquisition to return a lease.
func (p *pending) await(e *env, d time.Duration) (*simba.Lease, error) {
	select {
	case <-p.done:
		if p.err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, p.err)
		}
		return p.l, nil
	case <-time.After(d):
		return nil, fmt.Errorf("%s: no hold within %v", p.what, d)
	}
}

// returned reports whether the acquisition has returned.
func (p *pending) returned() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// believed is the leases a check has been handed, to count those believed at once.
type believed struct {
	mu     sync.Mutex
	leases map[*simba.Lease]bool
	tokens map[uint64]bool
}

func newBelieved() *believed {
	return &believed{leases: map[*simba.Lease]bool{}, tokens: map[uint64]bool{}}
}

// add records a lease handed out and returns how many others were believed then, or an
// error for a token handed out twice.
func (b *believed) add(l *simba.Lease) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	live := 0
	for o := range b.leases {
		if o.Context().Err() == nil {
			live++
		}
	}
	b.leases[l] = true
	if b.tokens[l.Token()] {
		return live, fmt.Errorf("token %d handed out twice", l.Token())
	}
	b.tokens[l.Token()] = true
	return live, nil
}

func (b *believed) remove(l *simba.Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.leases, l)
}

// checkSemaphorePermits: four processes cycle through a semaphore of two permits; no more
// than two holds are believed at any hand-out, tokens are never handed out twice, and
// each process's tokens grow.
func checkSemaphorePermits(e *env) error {
	const permits, workers, cycles = 2, 4, 3
	name := e.mutex()
	var sems []*simba.Semaphore
	for i := range workers {
		b := e.backend()
		if err := needs(b, backend.Semaphore); err != nil {
			return err
		}
		s, err := e.semaphore(b, name, permits, fmt.Sprintf("w%d", i))
		if err != nil {
			return err
		}
		sems = append(sems, s)
	}
	held := newBelieved()
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, s := range sems {
		wg.Go(func() { errs[i] = cycle(e, s, held, cycles) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cycle acquires and releases a permit of s cycles times, holding each for a moment.
func cycle(e *env, s *simba.Semaphore, held *believed, cycles int) error {
	var last uint64
	for range cycles {
		l, err := s.Acquire(e.ctx)
		if err != nil {
			return fmt.Errorf("Acquire: %w", err)
		}
		others, err := held.add(l)
		switch {
		case err != nil:
		case others >= s.Permits():
			err = fmt.Errorf("a permit handed out while %d others were believed, of %d permits", others, s.Permits())
		case l.Token() <= last:
			err = fmt.Errorf("token %d after this process's %d", l.Token(), last)
		}
		last = l.Token()
		if err == nil {
			err = e.pause(e.cfg.d(30 * time.Millisecond))
		}
		held.remove(l)
		switch rerr := l.Release(e.ctx); {
		case errors.Is(rerr, simba.ErrTimeout):
			// The check is of the permits handed out, not of the release's speed: a
			// release cut off at the call timeout (a loaded machine's server can take
			// longer, once in a CI run on MariaDB) leaves the permit to its TTL, which
			// the others wait out; a permit handed out beside it would still fail.
			e.t.Logf("a release timed out, its permit left to the TTL: %v", rerr)
		case err == nil && rerr != nil:
			err = fmt.Errorf("Release: %w", rerr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSemaphoreOrder: with the permit held, two waiters that queued one after the other
// get it in that order, each at the release before it, with larger tokens; a single
// attempt meanwhile is told the semaphore is held.
func checkSemaphoreOrder(e *env) error {
	name := e.mutex()
	var probes [3]*probe
	var sems [3]*simba.Semaphore
	for i, role := range []string{"h", "w1", "w2"} {
		probes[i] = e.backend()
		if err := needs(probes[i], backend.Semaphore); err != nil {
			return err
		}
		var err error
		if sems[i], err = e.semaphore(probes[i], name, 1, role); err != nil {
			return err
		}
	}
	h, err := sems[0].Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	var f findings
	other, err := e.semaphore(e.backend(), name, 1, "try")
	if err != nil {
		return err
	}
	_, err = untilAnswered(e.ctx, other.TryAcquire)
	f.expect("TryAcquire of a held semaphore", e.keep(nil, err), simba.ErrHeld)
	w1 := e.goAcquire("first waiter", sems[1].Acquire)
	if err := probes[1].waitQueued(e.ctx); err != nil {
		return err
	}
	w2 := e.goAcquire("second waiter", sems[2].Acquire)
	if err := probes[2].waitQueued(e.ctx); err != nil {
		return err
	}
	bound := e.cfg.takeoverBound()
	began := time.Now()
	if err := h.Release(e.ctx); err != nil {
		return fmt.Errorf("Release: %w", err)
	}
	l1, err := w1.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	e.t.Logf("semaphore hand-over on release took %v", time.Since(began))
	if w2.returned() {
		f.addf("the second waiter returned while the first held the only permit (err %v)", w2.err)
	}
	if err := l1.Release(e.ctx); err != nil {
		return f.join(fmt.Errorf("Release: %w", err))
	}
	l2, err := w2.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	if !(h.Token() < l1.Token() && l1.Token() < l2.Token()) {
		f.addf("tokens %d, %d, %d in the order of the holds: want them growing", h.Token(), l1.Token(), l2.Token())
	}
	return f.join(l2.Release(e.ctx))
}

// checkSemaphoreHolderVanishes: a holder that vanishes stops believing by its local TTL
// end, and a waiter gets its permit once the hold has lapsed on the store.
func checkSemaphoreHolderVanishes(e *env) error {
	name := e.mutex()
	ph, pw := e.backend(), e.backend()
	if err := needs(ph, backend.Semaphore); err != nil {
		return err
	}
	sh, err := e.semaphore(ph, name, 1, "h")
	if err != nil {
		return err
	}
	sw, err := e.semaphore(pw, name, 1, "w")
	if err != nil {
		return err
	}
	h, err := sh.Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	w := e.goAcquire("waiter", sw.Acquire)
	if err := pw.waitQueued(e.ctx); err != nil {
		return err
	}
	vanished := time.Now()
	if err := ph.vanish(); err != nil {
		return err
	}
	var f findings
	select {
	case <-h.Done():
		e.t.Logf("vanished holder stopped believing after %v", time.Since(vanished))
	case <-time.After(e.cfg.ttl + e.cfg.slack()):
		f.addf("the vanished holder still believes %v after it vanished", e.cfg.ttl+e.cfg.slack())
	}
	l, err := w.await(e, e.cfg.takeoverBound())
	if err != nil {
		return f.join(err)
	}
	e.t.Logf("permit taken over %v after the holder vanished", time.Since(vanished))
	if l.Token() <= h.Token() {
		f.addf("the successor's token %d is not above the vanished holder's %d", l.Token(), h.Token())
	}
	return f.join(l.Release(e.ctx))
}

// checkSemaphoreCount: a process that gives another permit count than the holders' is
// refused at once, not by its deadline.
func checkSemaphoreCount(e *env) error {
	name := e.mutex()
	b := e.backend()
	if err := needs(b, backend.Semaphore); err != nil {
		return err
	}
	two, err := e.semaphore(b, name, 2, "two")
	if err != nil {
		return err
	}
	l, err := two.Acquire(e.ctx)
	if err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	three, err := e.semaphore(e.backend(), name, 3, "three")
	if err != nil {
		return err
	}
	var f findings
	ctx, cancel := e.within(e.cfg.takeoverBound())
	defer cancel()
	_, err = three.Acquire(ctx)
	f.expect("Acquire with another permit count", e.keep(nil, err), simba.ErrRefused)
	if ctx.Err() != nil {
		f.addf("Acquire with another permit count returned by its deadline, not at once")
	}
	return f.join(l.Release(e.ctx))
}

// checkRWReaders: readers hold together and keep a writer out; a writer keeps readers
// and writers out.
func checkRWReaders(e *env) error {
	name := e.mutex()
	var locks []*simba.RWMutex
	for i := range 4 {
		b := e.backend()
		if err := needs(b, backend.RWLock); err != nil {
			return err
		}
		m, err := e.rwmutex(b, name, fmt.Sprintf("p%d", i))
		if err != nil {
			return err
		}
		locks = append(locks, m)
	}
	var f findings
	var reads []*simba.Lease
	for _, m := range locks[:3] {
		r, err := m.RLock(e.ctx)
		if err != nil {
			return fmt.Errorf("RLock beside readers: %w", err)
		}
		reads = append(reads, r)
	}
	for i, r := range reads {
		if r.Context().Err() != nil {
			f.addf("reader %d stopped believing while three read: %v", i, context.Cause(r.Context()))
		}
	}
	w, err := untilAnswered(e.ctx, locks[3].TryLock)
	f.expect("TryLock while readers hold", e.keep(leaseOf(w), err), simba.ErrHeld)
	for _, r := range reads {
		if err := r.Release(e.ctx); err != nil {
			return f.join(fmt.Errorf("Release: %w", err))
		}
	}
	if w, err = untilAnswered(e.ctx, locks[3].TryLock); err != nil {
		return f.join(fmt.Errorf("TryLock once the readers left: %w", err))
	}
	r, err := untilAnswered(e.ctx, locks[0].TryRLock)
	f.expect("TryRLock while a writer holds", e.keep(r, err), simba.ErrHeld)
	l, err := untilAnswered(e.ctx, locks[1].TryLock)
	f.expect("TryLock while a writer holds", e.keep(leaseOf(l), err), simba.ErrHeld)
	return f.join(w.Release(e.ctx))
}

// rwmutexes returns, for each role, a probe of its own and a read-write lock named name on
// it, or errUnsupported when the backend keeps no read-write locks.
func (e *env) rwmutexes(name string, roles ...string) ([]*probe, []*simba.RWMutex, error) {
	probes := make([]*probe, len(roles))
	locks := make([]*simba.RWMutex, len(roles))
	for i, role := range roles {
		probes[i] = e.backend()
		if err := needs(probes[i], backend.RWLock); err != nil {
			return nil, nil, err
		}
		var err error
		if locks[i], err = e.rwmutex(probes[i], name, role); err != nil {
			return nil, nil, err
		}
	}
	return probes, locks, nil
}

// goLock takes l's write lock in the background, as goAcquire does.
func (e *env) goLock(what string, l *simba.RWMutex) *pending {
	return e.goAcquire(what, func(ctx context.Context) (*simba.Lease, error) {
		wl, err := l.Lock(ctx)
		return leaseOf(wl), err
	})
}

// leaseOf returns w's lease, nil for nil.
func leaseOf(w *simba.WriteLease) *simba.Lease {
	if w == nil {
		return nil
	}
	return w.Lease
}

// checkRWWriterFirst: a waiting writer keeps a later reader out, gets the lock when the
// readers before it leave, and the reader follows it; tokens grow in that order.
func checkRWWriterFirst(e *env) error {
	name := e.mutex()
	probes, locks, err := e.rwmutexes(name, "r1", "w", "r2")
	if err != nil {
		return err
	}
	r1, err := locks[0].RLock(e.ctx)
	if err != nil {
		return fmt.Errorf("RLock: %w", err)
	}
	w := e.goLock("writer", locks[1])
	if err := probes[1].waitQueued(e.ctx); err != nil {
		return err
	}
	var f findings
	other, err := e.rwmutex(e.backend(), name, "try")
	if err != nil {
		return err
	}
	r, err := untilAnswered(e.ctx, other.TryRLock)
	f.expect("TryRLock while a writer waits", e.keep(r, err), simba.ErrHeld)
	r2 := e.goAcquire("reader after the writer", locks[2].RLock)
	if err := probes[2].waitQueued(e.ctx); err != nil {
		return err
	}
	if err := r1.Release(e.ctx); err != nil {
		return f.join(fmt.Errorf("Release: %w", err))
	}
	bound := e.cfg.takeoverBound()
	wl, err := w.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	if r2.returned() {
		f.addf("the reader that came after the writer read beside it (err %v)", r2.err)
	}
	if err := wl.Release(e.ctx); err != nil {
		return f.join(fmt.Errorf("Release: %w", err))
	}
	l2, err := r2.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	if !(r1.Token() < wl.Token() && wl.Token() < l2.Token()) {
		f.addf("tokens %d, %d, %d in the order of the holds: want them growing", r1.Token(), wl.Token(), l2.Token())
	}
	return f.join(l2.Release(e.ctx))
}

// checkRWDowngrade: a writer that downgrades reads at once, with a larger token, while
// the writer and the reader queued behind it wait on; they follow in order once it leaves.
func checkRWDowngrade(e *env) error {
	name := e.mutex()
	probes, locks, err := e.rwmutexes(name, "w1", "w2", "r")
	if err != nil {
		return err
	}
	w1, err := locks[0].Lock(e.ctx)
	if err != nil {
		return fmt.Errorf("Lock: %w", err)
	}
	w2 := e.goLock("second writer", locks[1])
	if err := probes[1].waitQueued(e.ctx); err != nil {
		return err
	}
	r := e.goAcquire("reader behind the second writer", locks[2].RLock)
	if err := probes[2].waitQueued(e.ctx); err != nil {
		return err
	}
	d, err := w1.Downgrade(e.ctx)
	for errors.Is(err, simba.ErrTimeout) && e.ctx.Err() == nil {
		d, err = w1.Downgrade(e.ctx) // an outage: the write hold is kept, and it may be tried again
	}
	if err != nil {
		return fmt.Errorf("Downgrade: %w", err)
	}
	var f findings
	if d.Token() <= w1.Token() {
		f.addf("the downgraded read hold's token %d is not above the write hold's %d", d.Token(), w1.Token())
	}
	select {
	case <-w1.Done():
	default:
		f.addf("the write lease still believed after Downgrade returned")
	}
	if err := e.pause(e.cfg.d(100 * time.Millisecond)); err != nil {
		return err
	}
	if w2.returned() || r.returned() {
		f.addf("a waiter returned while the downgraded reader held (writer: %v, reader: %v)", w2.returned(), r.returned())
	}
	if err := d.Release(e.ctx); err != nil {
		return f.join(fmt.Errorf("Release: %w", err))
	}
	bound := e.cfg.takeoverBound()
	l2, err := w2.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	if err := l2.Release(e.ctx); err != nil {
		return f.join(fmt.Errorf("Release: %w", err))
	}
	lr, err := r.await(e, bound)
	if err != nil {
		return f.join(err)
	}
	if !(d.Token() < l2.Token() && l2.Token() < lr.Token()) {
		f.addf("tokens %d, %d, %d in the order of the holds: want them growing", d.Token(), l2.Token(), lr.Token())
	}
	return f.join(lr.Release(e.ctx))
}
