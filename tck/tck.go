// Package tck is simba's conformance suite: every backend, in this module or outside it,
// runs it from its own test against the real store.
//
//	func TestConformance(t *testing.T) {
//		tck.Run(t, func(t *testing.T) backend.Backend {
//			b, err := mystore.New(client)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// The factory must return a new, independent backend instance on the same store at every
// call: checks that need several contenders, standing for several processes, call it
// several times. Each check is a subtest with mutex names of its own, so the checks run in
// parallel; only the goroutine-leak check runs alone, first. Run should therefore not run
// in parallel with other tests of the package.
//
// Some checks make an owner vanish: stop talking to the store without releasing, as a
// crashed process does. For lease stores the suite does this itself by failing every call
// of the vanished backend's contentions. A session store (whose StartContend returns a
// plain backend.Contention) must implement Vanisher.
//
// Timing: the checks use a TTL of 1s and a transition of 500ms; WithTimeScale stretches
// every duration of the suite for slow stores. Bounds are generous and the measured values
// are logged; speed belongs in benchmarks.
package tck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Vanisher is implemented by backends that can simulate the death of their process: after
// Vanish, the backend stops talking to the store and releases nothing, so its owner
// records lapse (a session store's session expires) and its contenders must stop
// believing by their local TTL end.
type Vanisher interface {
	Vanish()
}

// Option configures Run.
type Option func(*config)

// WithTimeScale multiplies every duration the suite uses (TTL, transition, bounds and
// phase lengths) by f, which must be >= 1. Use it for stores whose calls take a large
// part of the default 250ms call timeout.
func WithTimeScale(f float64) Option {
	return func(c *config) { c.scale = f }
}

// WithMinorityClaims tells the suite that the backend is a quorum of stores, where a slot
// claim that fell short of a quorum may stay recorded on a minority and LastSlot may read
// it: the slots check then accepts a claimed slot later than the last one that won.
func WithMinorityClaims() Option {
	return func(c *config) { c.minorityClaims = true }
}

type config struct {
	scale          float64
	ttl            time.Duration
	transition     time.Duration
	minorityClaims bool
}

func (c config) d(base time.Duration) time.Duration {
	return time.Duration(float64(base) * c.scale).Round(time.Millisecond)
}

// jitterHigh is the upper bound of simba's contend jitter; it is not scaled.
const jitterHigh = time.Second

// takeoverBound is how long a waiter may take to acquire after the owner vanished: the
// lease lapses after ttl + transition, the waiter tries within the jitter bound after
// that, and slack covers the call in flight and scheduling on a busy machine.
func (c config) takeoverBound() time.Duration {
	return c.ttl + c.transition + jitterHigh + c.slack()
}

// slack is the margin the suite grants on top of every protocol bound: one TTL.
func (c config) slack() time.Duration { return c.ttl }

// checkDeadline bounds one check; the watchdog tears the test down after it.
func (c config) checkDeadline() time.Duration { return c.d(90 * time.Second) }

// Run runs the conformance suite against the backends newBackend makes. Each check is a
// subtest; a failure is reported through t.Error with what was seen.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend, opts ...Option) {
	t.Helper()
	cfg := config{scale: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.scale < 1 {
		t.Fatalf("tck: time scale %v: must be >= 1", cfg.scale)
	}
	cfg.ttl = cfg.d(time.Second)
	cfg.transition = cfg.d(500 * time.Millisecond)
	suite := newSuiteID()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.parallel {
				t.Parallel()
			}
			switch err := runCheck(t, cfg, suite, c, newBackend); {
			case errors.Is(err, errUnsupported):
				t.Skip(err)
			case err != nil:
				t.Error(err)
			}
		})
	}
}

// check is one conformance check. It returns what it found wrong; nil means it passed.
type check struct {
	name     string
	parallel bool
	run      func(e *env) error
}

// runCheck runs one check under a watchdog and then runs its cleanups.
func runCheck(t *testing.T, cfg config, suite string, c check, factory func(t *testing.T) backend.Backend) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.checkDeadline())
	defer cancel()
	e := &env{t: t, cfg: cfg, ctx: ctx, factory: factory, prefix: "tck-" + suite + "-" + shortName(c.name)}
	done := make(chan error, 1)
	go func() { done <- c.run(e) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(cfg.checkDeadline() + cfg.d(30*time.Second)):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic(fmt.Sprintf("tck: check %s hung past its deadline; goroutines:\n%s", c.name, buf[:n]))
	}
	e.runCleanups()
	if err != nil {
		return fmt.Errorf("tck %s: %w", c.name, err)
	}
	return nil
}

// env is one check's world: its deadline, unique names, backends and cleanups.
type env struct {
	t       *testing.T
	cfg     config
	ctx     context.Context
	factory func(t *testing.T) backend.Backend
	prefix  string
	names   atomic.Int32

	mu       sync.Mutex
	cleanups []func()
}

// mutex returns a mutex name no other check or run uses, valid for every store: short
// (SQL allows 66 characters), letters, digits and dashes only.
func (e *env) mutex() string {
	return fmt.Sprintf("%s-%d", e.prefix, e.names.Add(1))
}

// id returns a contender ID unique in the check.
func (e *env) id(role string) string {
	return fmt.Sprintf("%s-%s-%d", e.prefix, role, e.names.Add(1))
}

// backend returns a new backend instance from the factory, wrapped in a probe.
func (e *env) backend() *probe {
	return newProbe(e.factory(e.t))
}

// options returns the options of every check's simba objects, then extra, as options of
// the constructor whose option type O is.
func options[O any](e *env, extra ...O) []O {
	var out []O
	for _, o := range []simba.Option{
		simba.WithTTL(e.cfg.ttl),
		simba.WithTransition(e.cfg.transition),
		simba.WithLogger(e.logger()),
	} {
		out = append(out, o.(O)) // an Option is an option of every constructor
	}
	return append(out, extra...)
}

func (e *env) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// service creates a service and closes it when the check ends.
func (e *env) service(b backend.Backend, c simba.Contender, extra ...simba.ServiceOption) (*simba.Service, error) {
	s, err := simba.NewService(b, c, options(e, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("NewService: %w", err)
	}
	e.cleanup(func() { _ = s.Close() })
	return s, nil
}

// start starts s, again after an outage (a store call over the call timeout, which a
// loaded machine's store makes): Start fails fast on one, as documented, and the checks
// look at what a started service does. Any other error is returned at once.
func start(ctx context.Context, s interface{ Start(context.Context) error }) error {
	for {
		if err := s.Start(ctx); !errors.Is(err, simba.ErrTimeout) || ctx.Err() != nil {
			return err
		}
	}
}

// untilAnswered makes the single attempt try (TryAcquire, Lookup) again after each
// outage, for the reason start gives, until the store answers it.
func untilAnswered[T any](ctx context.Context, try func(context.Context) (T, error)) (T, error) {
	for {
		v, err := try(ctx)
		if !errors.Is(err, simba.ErrTimeout) || ctx.Err() != nil {
			return v, err
		}
	}
}

// keep passes on the error of an acquisition that should have failed; a lease it returned
// all the same is released when the check ends, so that a wrong answer leaks nothing.
func (e *env) keep(l *simba.Lease, err error) error {
	if l != nil {
		e.cleanup(func() { _ = l.Release(context.Background()) })
	}
	return err
}

// cleanup registers f to run when the check ends, in reverse order.
func (e *env) cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

func (e *env) runCleanups() {
	e.mu.Lock()
	list := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i]()
	}
}

// pause waits for d or until the check's deadline, whichever comes first: the length of a
// phase, not a wait for an event.
func (e *env) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-e.ctx.Done():
		return fmt.Errorf("check deadline passed during a %v phase", d)
	}
}

// within returns a context that ends after d or at the check's deadline.
func (e *env) within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, d)
}

func newSuiteID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// shortName turns a check name into at most 12 name-safe characters.
func shortName(s string) string {
	s = nonName.ReplaceAllString(s, "")
	if len(s) > 12 {
		s = s[:12]
	}
	return s
}
