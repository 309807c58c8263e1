package tck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backend"
)

// errVanished is what a vanished probe's lease contentions return.
var errVanished = errors.New("tck: backend vanished")

// probe wraps a backend under test: it watches the calls the service makes, can make the
// backend vanish, and can delay an acquisition's answer past the end of its lifecycle.
type probe struct {
	inner    backend.Backend
	vanished atomic.Bool

	// lateNext: the next Acquire waits until its context ends, then acquires on the store
	// anyway and returns the success, like a reply that arrives after Stop began.
	lateNext atomic.Bool

	mu           sync.Mutex
	participants []backend.Participant
	lease        bool                // the last contention was a lease contention
	last         backend.Contention  // the last contention the backend returned
	tokens       map[string][]uint64 // per contender: tokens of acquire answers naming it
	lateWaiting  bool                // a late Acquire is waiting for its context to end
	starts       int                 // StartContend calls
	attempts     int                 // Acquire calls answered
	changed      signal
}

func newProbe(inner backend.Backend) *probe {
	return &probe{inner: inner, tokens: map[string][]uint64{}}
}

var (
	_ backend.Backend     = (*probe)(nil)
	_ backend.Validator   = (*probe)(nil)
	_ backend.Holder      = (*probe)(nil)
	_ backend.ValueKeeper = (*probe)(nil)
)

// KeepsValues forwards to the backend's ValueKeeper: false for a backend that keeps none.
func (p *probe) KeepsValues(k backend.Kind) bool {
	v, ok := p.inner.(backend.ValueKeeper)
	return ok && v.KeepsValues(k)
}

// Holds forwards to the backend's Holder: false for a backend that keeps only mutexes.
func (p *probe) Holds(k backend.Kind) bool {
	h, ok := p.inner.(backend.Holder)
	return ok && h.Holds(k)
}

// ValidateMutex forwards to the backend's Validator, if it has one.
func (p *probe) ValidateMutex(name string) error {
	if v, ok := p.inner.(backend.Validator); ok {
		return v.ValidateMutex(name)
	}
	return nil
}

// ValidateContenderID forwards to the backend's Validator, if it has one.
func (p *probe) ValidateContenderID(id string) error {
	if v, ok := p.inner.(backend.Validator); ok {
		return v.ValidateContenderID(id)
	}
	return nil
}

func (p *probe) StartContend(ctx context.Context, part backend.Participant) (backend.Contention, error) {
	p.mu.Lock()
	p.starts++
	p.participants = append(p.participants, part)
	p.mu.Unlock()
	p.changed.notify()
	c, err := p.inner.StartContend(ctx, part)
	if err != nil {
		return nil, err
	}
	lc, ok := c.(backend.LeaseContention)
	p.mu.Lock()
	p.lease, p.last = ok, c
	p.mu.Unlock()
	p.changed.notify()
	if !ok {
		return sessionProbe{c}, nil
	}
	return &leaseProbe{p: p, inner: lc, id: part.ContenderID}, nil
}

// vanish makes the backend stop talking to the store without releasing anything.
func (p *probe) vanish() error {
	if v, ok := p.inner.(Vanisher); ok {
		v.Vanish()
		p.vanished.Store(true)
		return nil
	}
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	if !lease {
		return errors.New("a session backend must implement tck.Vanisher for this check")
	}
	p.vanished.Store(true)
	return nil
}

// ownTokens returns the tokens of the acquire answers that named contender id.
func (p *probe) ownTokens(id string) []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint64(nil), p.tokens[id]...)
}

// waitList returns the last contention's WaitList, if it has one.
func (p *probe) waitList() (backend.WaitList, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wl, ok := p.last.(backend.WaitList)
	return wl, ok
}

func (p *probe) isLease() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lease
}

// waitAttempt waits until a lease contention of p has had an acquire answered; a session
// contention decides in StartContend, so there is nothing to wait for.
func (p *probe) waitAttempt(ctx context.Context) error {
	return until(ctx, &p.changed, "a first acquire attempt", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.lease || p.attempts > 0
	})
}

// waitQueued waits until a contention of p has been opened and, for a lease contention,
// has had an acquire answered: by then, a contender that does not hold is queued.
func (p *probe) waitQueued(ctx context.Context) error {
	return until(ctx, &p.changed, "a contention queued", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.last != nil && (!p.lease || p.attempts > 0)
	})
}

func (p *probe) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

func (p *probe) participant(i int) backend.Participant {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.participants[i]
}

// leaseProbe wraps a lease contention.
type leaseProbe struct {
	p     *probe
	inner backend.LeaseContention
	id    string
}

func (l *leaseProbe) Acquire(ctx context.Context) (backend.Record, error) {
	if l.p.vanished.Load() {
		return backend.Record{}, errVanished
	}
	if l.p.lateNext.CompareAndSwap(true, false) {
		return l.late(ctx)
	}
	rec, err := l.inner.Acquire(ctx)
	l.p.mu.Lock()
	l.p.attempts++
	if err == nil && rec.Owner == l.id {
		l.p.tokens[l.id] = append(l.p.tokens[l.id], rec.Token)
	}
	l.p.mu.Unlock()
	l.p.changed.notify()
	return rec, err
}

// late waits until ctx ends, then acquires with a context of its own and returns the
// answer as if it had arrived in time.
func (l *leaseProbe) late(ctx context.Context) (backend.Record, error) {
	l.p.mu.Lock()
	l.p.lateWaiting = true
	l.p.mu.Unlock()
	l.p.changed.notify()
	<-ctx.Done()
	actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := l.inner.Acquire(actx)
	if err != nil {
		return rec, fmt.Errorf("tck: late acquire: %w", err)
	}
	return rec, nil
}

func (l *leaseProbe) Release(ctx context.Context) error {
	if l.p.vanished.Load() {
		return errVanished
	}
	return l.inner.Release(ctx)
}

func (l *leaseProbe) Lookup(ctx context.Context) (backend.Record, error) {
	if l.p.vanished.Load() {
		return backend.Record{}, errVanished
	}
	return l.inner.Lookup(ctx)
}

// StopContend frees the contention's resources; it does not release ownership (Release
// does), so it runs even after the probe vanished.
func (l *leaseProbe) StopContend(ctx context.Context) error { return l.inner.StopContend(ctx) }

// sessionProbe wraps a session contention unchanged, keeping it a plain Contention.
type sessionProbe struct{ inner backend.Contention }

func (s sessionProbe) StopContend(ctx context.Context) error { return s.inner.StopContend(ctx) }

// signal wakes every goroutine waiting for the next change.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// next returns a channel closed at the next notify.
func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// until waits until cond holds, re-checking it at every change signalled on sig, or fails
// when ctx ends. what describes the awaited condition for the error.
func until(ctx context.Context, sig *signal, what string, cond func() bool) error {
	for {
		ch := sig.next()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if cond() {
				return nil
			}
			return fmt.Errorf("timed out waiting for %s", what)
		}
	}
}
