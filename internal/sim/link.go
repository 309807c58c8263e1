package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/clock"
)

// link is one simulated process's connection to the shared store: a memory backend whose
// calls the simulation can break, and which freezes with its process. While the process
// is paused, a call is neither sent nor answered, and the store's notifications to it
// (Wake, Grant, Report) are held, to be delivered when it resumes.
type link struct {
	backend *memory.Backend

	mu      sync.Mutex
	fault   fault
	resumed chan struct{} // closed when the process resumes; nil while it runs
	held    []func()      // notifications that came while paused
}

// fault is what happens to the calls of a link until a given time.
type fault struct {
	kind  faultKind
	until time.Time
}

type faultKind int

const (
	noFault  faultKind = iota
	refusing           // calls fail at once: a closed port, a refused login
	hanging            // calls wait until their context ends, or the fault does: a server that does not answer a client that keeps deadlines
	stalling           // calls wait until the fault ends, whatever their context: a SIGSTOPped server, a client that ignores deadlines
	losing             // calls reach the store, and their replies are lost
	deaf               // the store's notifications (Wake, Grant, Report) are lost: a subscriber reconnecting
	faultKinds
)

var faultNames = [faultKinds]string{"none", "refusing", "hanging", "stalling", "losing", "deaf"}

func (k faultKind) String() string { return faultNames[k] }

var (
	errRefused = errors.New("sim: connection refused")
	errLost    = errors.New("sim: reply lost")
)

func newLink(b *memory.Backend) *link { return &link{backend: b} }

// breakFor makes the link's calls fail as kind says until until.
func (l *link) breakFor(kind faultKind, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = fault{kind, until}
}

// heal ends the link's fault.
func (l *link) heal() { l.breakFor(noFault, time.Time{}) }

func (l *link) current() fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Now().Before(l.fault.until) {
		return l.fault
	}
	return fault{}
}

// pause freezes the link with its process.
func (l *link) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resumed == nil {
		l.resumed = make(chan struct{})
	}
}

// takeHeld returns the notifications held so far; the process is still paused.
func (l *link) takeHeld() []func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held
	l.held = nil
	return held
}

// unfreeze lets the link's calls go on, and delivers what was held since takeHeld.
func (l *link) unfreeze() {
	l.mu.Lock()
	if l.resumed != nil {
		close(l.resumed)
		l.resumed = nil
	}
	rest := l.held
	l.held = nil
	l.mu.Unlock()
	for _, f := range rest {
		go f()
	}
}

// frozen waits while the process is paused.
func (l *link) frozen() {
	l.mu.Lock()
	resumed := l.resumed
	l.mu.Unlock()
	if resumed != nil {
		<-resumed
	}
}

// notify delivers a notification of the store, or holds it while the process is paused,
// or loses it while the link is deaf.
func (l *link) notify(f func()) {
	if l.current().kind == deaf {
		return
	}
	l.mu.Lock()
	if l.resumed != nil {
		l.held = append(l.held, f)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f()
}

// call makes one store call through the link's faults.
func (l *link) call(ctx context.Context, do func() error) error {
	l.frozen() // a paused process sends nothing
	f := l.current()
	switch f.kind {
	case refusing:
		return errRefused
	case hanging:
		t := time.NewTimer(time.Until(f.until))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sim: no answer: %w", ctx.Err())
		case <-t.C:
		}
	case stalling:
		time.Sleep(time.Until(f.until))
	}
	err := do()
	l.frozen() // a paused process gets its reply when it resumes
	if f.kind == losing && err == nil {
		return errLost
	}
	return err
}

var (
	_ simba.Backend  = (*link)(nil)
	_ backend.Holder = (*link)(nil)
)

// Holds reports that the link keeps what its memory backend keeps.
func (l *link) Holds(k backend.Kind) bool { return l.backend.Holds(k) }

func (l *link) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	wake, grant, report := p.Wake, p.Grant, p.Report
	p.Wake = func() { l.notify(wake) }
	if grant != nil {
		p.Grant = func(rec backend.Record, sent time.Time) { l.notify(func() { grant(rec, sent) }) }
	}
	if report != nil {
		p.Report = func(rec backend.Record, at time.Time) { l.notify(func() { report(rec, at) }) }
	}
	var c backend.Contention
	err := l.call(ctx, func() error {
		var err error
		c, err = l.backend.StartContend(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &linkedContention{inner: c.(backend.LeaseContention), link: l}, nil
}

// linkedContention is a memory contention behind a link.
type linkedContention struct {
	inner backend.LeaseContention
	link  *link
}

var (
	_ backend.LeaseContention = (*linkedContention)(nil)
	_ backend.WaitList        = (*linkedContention)(nil)
	_ backend.SlotRecorder    = (*linkedContention)(nil)
)

func (c *linkedContention) Acquire(ctx context.Context) (rec backend.Record, err error) {
	err = c.link.call(ctx, func() error {
		rec, err = c.inner.Acquire(ctx)
		return err
	})
	if err != nil {
		return backend.Record{}, err
	}
	return rec, nil
}

func (c *linkedContention) Release(ctx context.Context) error {
	return c.link.call(ctx, func() error { return c.inner.Release(ctx) })
}

func (c *linkedContention) Lookup(ctx context.Context) (rec backend.Record, err error) {
	err = c.link.call(ctx, func() error {
		rec, err = c.inner.Lookup(ctx)
		return err
	})
	return rec, err
}

func (c *linkedContention) OthersWaiting(ctx context.Context) (waiting bool, err error) {
	err = c.link.call(ctx, func() error {
		waiting, err = c.inner.(backend.WaitList).OthersWaiting(ctx)
		return err
	})
	return waiting, err
}

func (c *linkedContention) LastSlot(ctx context.Context) (last backend.Slot, err error) {
	err = c.link.call(ctx, func() error {
		last, err = c.inner.(backend.SlotRecorder).LastSlot(ctx)
		return err
	})
	return last, err
}

func (c *linkedContention) ClaimSlot(ctx context.Context, s backend.Slot) (won bool, err error) {
	err = c.link.call(ctx, func() error {
		won, err = c.inner.(backend.SlotRecorder).ClaimSlot(ctx, s)
		return err
	})
	return won && err == nil, err
}

// StopContend frees the contention's local resources whatever the link's faults, as a
// backend must; only a paused process waits.
func (c *linkedContention) StopContend(ctx context.Context) error {
	c.link.frozen()
	return c.inner.StopContend(ctx)
}

// processClock is a process's clock: a pausable one on the bubble's time.
func processClock() *clock.Pausable { return clock.NewPausable(clock.System) }
