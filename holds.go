package simba

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"
)

// A Semaphore or RWMutex acquires each hold with a Locker of its own: one store
// contender per hold, with an ID of its own, so that every hold is queued, admitted,
// renewed and fenced by the store on its own. Holds of one process are not pooled into
// one store contender as Mutexes pools a mutex's: a hold shared locally would let a
// process's new reader in beside its readers while another process's writer waits, and
// one token would fence several holders.

// pool is the Lockers of one kind of hold of a name in this process: one for each
// acquisition under way or hold outstanding, and idle ones kept for the next acquisition.
type pool struct {
	b      Backend
	cfg    config
	name   string
	hold   backend.Hold
	suffix string // of a set contender ID, before "#n": apart from another pool's of the name

	mu     sync.Mutex
	idle   []*Locker
	all    []*Locker
	made   int // Lockers made, numbering the IDs of a set contender ID
	closed bool
}

// newPool checks that b keeps hold's kind and that the name and the IDs are valid.
func newPool(b Backend, name string, hold backend.Hold, cfg config, suffix string) (*pool, error) {
	if isNil(b) {
		return nil, invalid("backend", nil, "must not be nil")
	}
	if h, ok := b.(backend.Holder); !ok || !h.Holds(hold.Kind) {
		return nil, invalid("backend", fmt.Sprintf("%T", b), "keeps no "+hold.Kind.String()+"s")
	}
	if err := cfg.checkValueKept(b, hold.Kind); err != nil {
		return nil, err
	}
	p := &pool{b: b, cfg: cfg, name: name, hold: hold, suffix: suffix}
	if err := validateNames(b, name, p.id(0), true); err != nil {
		return nil, err
	}
	return p, nil
}

// id returns the contender ID of the pool's n-th Locker: the set contender ID with the
// suffix and "#n", or a new HostContenderID.
func (p *pool) id(n int) string {
	if p.cfg.contenderIDSet {
		return p.cfg.contenderID + p.suffix + "#" + strconv.Itoa(n)
	}
	return HostContenderID()
}

// acquire acquires a hold with an idle Locker, or a new one; beside is a downgrade's
// write holder (backend.Hold.Beside).
func (p *pool) acquire(ctx context.Context, once bool, beside string) (*Lease, error) {
	l, err := p.take()
	if err != nil {
		return nil, err
	}
	l.svc.hold.Beside = beside // the Locker is idle: nothing reads it meanwhile
	lease, err := l.acquire(ctx, once)
	if err != nil {
		p.put(l)
	}
	return lease, err
}

// take returns an idle Locker, or a new one.
func (p *pool) take() (*Locker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		l := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return l, nil
	}
	id := p.id(p.made)
	if err := validateNames(p.b, p.name, id, true); err != nil {
		return nil, err
	}
	p.made++
	svc := newService(p.b, observe.RoleLock, hooks{}, p.name, id, p.cfg)
	svc.hold = p.hold
	l := &Locker{svc: svc, closing: make(chan struct{})}
	l.idle = func() { p.put(l) }
	p.all = append(p.all, l)
	return l, nil
}

// put makes l idle again, unless the pool is closed.
func (p *pool) put(l *Locker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A closed pool has closed (or is closing) every Locker it made: l is dropped, not
	// closed here, where it would make its acquisition wait for that close.
	if !p.closed {
		p.idle = append(p.idle, l)
	}
}

// close closes every Locker: holds outstanding are released, acquisitions under way end
// with ErrClosed.
func (p *pool) close() error {
	p.mu.Lock()
	p.closed = true
	all := p.all
	p.mu.Unlock()
	var errs []error
	for _, l := range all {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// named names the service's mutex, semaphore or read-write lock in errors.
func (s *Service) named() string { return fmt.Sprintf("%v %q", s.hold.Kind, s.mutex) }

// heldBy says, in an error, who keeps the service from acquiring: the owner, or for a
// semaphore or read-write lock the holder whose hold ends first, or those waiting ahead.
func (s *Service) heldBy(id string) string {
	switch {
	case s.hold.Kind == backend.Mutex:
		return fmt.Sprintf("%s is owned by %q", s.named(), id)
	case id == "":
		return s.named() + " is awaited by others ahead"
	}
	return fmt.Sprintf("%s is held by %q (and maybe others)", s.named(), id)
}
