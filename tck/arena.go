package tck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba"
)

// arena records the callbacks of all contenders of one mutex and checks them as they
// come: callbacks alternate per contender, beliefs (OnAcquired to OnReleased) never
// overlap, and tokens never go backwards.
type arena struct {
	mu        sync.Mutex
	holder    string // the contender between OnAcquired and OnReleased, if any
	lastToken uint64
	lastOwner string
	tenures   []tenureRecord
	errs      []error
	changed   signal
}

type tenureRecord struct {
	id    string
	token uint64
	at    time.Time
}

// member is one contender of an arena.
type member struct {
	a        *arena
	id       string
	acquired int
	released int
	last     string          // "A" or "R": the last callback
	ctx      context.Context // the tenure context of the last OnAcquired
	panics   bool            // its callbacks panic after recording
}

func newArena() *arena { return &arena{} }

// join returns a contender for mutex with the given ID that records into the arena.
func (a *arena) join(mutex, id string) (*member, simba.Contender) {
	m := &member{a: a, id: id}
	return m, simba.ContenderFuncs{
		MutexName: mutex,
		ID:        id,
		Acquired:  m.onAcquired,
		Released:  m.onReleased,
	}
}

func (m *member) onAcquired(ctx context.Context, s simba.State) {
	a := m.a
	a.mu.Lock()
	if m.last == "A" {
		a.fail("%s: OnAcquired twice without OnReleased", m.id)
	}
	if !s.Acquired(m.id) {
		a.fail("%s: OnAcquired with a state that does not say so: %v", m.id, s)
	}
	if a.holder != "" {
		a.fail("overlap: %s acquired (token %d) while %s still believes it owns the mutex", m.id, s.After.Token, a.holder)
	}
	tok := s.After.Token
	switch {
	case tok == 0:
		a.fail("%s: acquired with fencing token 0", m.id)
	case tok < a.lastToken, tok == a.lastToken && a.lastOwner != m.id:
		a.fail("fencing token went backwards: %s acquired with %d after %s had %d", m.id, tok, a.lastOwner, a.lastToken)
	}
	a.lastToken, a.lastOwner = max(a.lastToken, tok), m.id
	a.holder = m.id
	a.tenures = append(a.tenures, tenureRecord{id: m.id, token: tok, at: time.Now()})
	m.acquired++
	m.last = "A"
	m.ctx = ctx
	panics := m.panics
	a.mu.Unlock()
	a.changed.notify()
	if panics {
		panic("tck: a contender's OnAcquired panics on purpose")
	}
}

func (m *member) onReleased(s simba.State) {
	a := m.a
	a.mu.Lock()
	if m.last != "A" {
		a.fail("%s: OnReleased without OnAcquired", m.id)
	}
	if !s.Released(m.id) {
		a.fail("%s: OnReleased with a state that does not say so: %v", m.id, s)
	}
	if m.ctx != nil && m.ctx.Err() == nil {
		a.fail("%s: the tenure context was still live at OnReleased", m.id)
	}
	if a.holder == m.id {
		a.holder = ""
	}
	m.released++
	m.last = "R"
	panics := m.panics
	a.mu.Unlock()
	a.changed.notify()
	if panics {
		panic("tck: a contender's OnReleased panics on purpose")
	}
}

// fail records a violation. Called with a.mu held.
func (a *arena) fail(format string, args ...any) {
	a.errs = append(a.errs, fmt.Errorf(format, args...))
}

// err returns every violation seen so far.
func (a *arena) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.errs...)
}

// counts returns how often m acquired and released.
func (m *member) counts() (acquired, released int) {
	m.a.mu.Lock()
	defer m.a.mu.Unlock()
	return m.acquired, m.released
}

// tokenOf returns the token of contender id's last tenure (0 if none).
func (a *arena) tokenOf(id string) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.tenures) - 1; i >= 0; i-- {
		if a.tenures[i].id == id {
			return a.tenures[i].token
		}
	}
	return 0
}

func (a *arena) currentHolder() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holder
}

func (a *arena) tenureCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.tenures)
}

// waitAcquired waits until m has acquired at least n times.
func (m *member) waitAcquired(ctx context.Context, n int) error {
	return until(ctx, &m.a.changed, fmt.Sprintf("%s to acquire (%d)", m.id, n), func() bool {
		acq, _ := m.counts()
		return acq >= n
	})
}

// waitReleased waits until m has released at least n times.
func (m *member) waitReleased(ctx context.Context, n int) error {
	return until(ctx, &m.a.changed, fmt.Sprintf("%s to release (%d)", m.id, n), func() bool {
		_, rel := m.counts()
		return rel >= n
	})
}

// waitHolder waits until some contender holds the mutex and returns it.
func (a *arena) waitHolder(ctx context.Context) (string, error) {
	var h string
	err := until(ctx, &a.changed, "some contender to acquire", func() bool {
		h = a.currentHolder()
		return h != ""
	})
	return h, err
}
