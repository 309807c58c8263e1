package tck

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memoryFactory returns a factory of memory backends on one store.
func memoryFactory() func(t *testing.T) backend.Backend {
	store := memory.NewStore()
	return func(t *testing.T) backend.Backend {
		b, err := memory.New(store)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
}

// The suite passes against the memory backend.
func TestRunPassesOnMemory(t *testing.T) {
	Run(t, memoryFactory())
}

// Each broken backend must make the checks named for it fail: proof that they can fail.
func TestBrokenBackendsAreCaught(t *testing.T) {
	cases := []struct {
		name   string
		wrap   func(t *testing.T, b backend.Backend) backend.Backend
		caught []string
	}{
		{"never releases", func(_ *testing.T, b backend.Backend) backend.Backend { return neverReleases{b} },
			[]string{"stop_releases_on_store", "locker_errors", "stale_lifecycle"}},
		{"token does not increase", func(_ *testing.T, b backend.Backend) backend.Backend { return frozenToken{b} },
			[]string{"fencing", "restart", "locker_exclusion"}},
		{"grants everyone", func(_ *testing.T, b backend.Backend) backend.Backend { return grantsEveryone{b} },
			[]string{"ten_contenders", "locker_exclusion", "locker_errors", "scheduler"}},
		{"forgets the owner on renewal", func(_ *testing.T, b backend.Backend) backend.Backend { return &forgetsRenewal{inner: b} },
			[]string{"guard"}},
		{"notifies every contender as owner", func(_ *testing.T, b backend.Backend) backend.Backend { return notifiesEveryone{b} },
			[]string{"ten_contenders", "locker_errors"}},
		{"fails to stop contending", func(_ *testing.T, b backend.Backend) backend.Backend { return failsToStop{b} },
			[]string{"lifecycle"}},
		{"leaks a goroutine per contention", leaksGoroutines,
			[]string{"goroutine_leaks"}},
		{"does not tell its waiters it closed", func(_ *testing.T, b backend.Backend) backend.Backend { return deafToClose{b} },
			[]string{"closed_under_waiter"}},
		{"answers a hand-off as made and makes none", func(_ *testing.T, b backend.Backend) backend.Backend { return handOffIgnored{b} },
			[]string{"service_hand_off"}},
		{"records no slot it grants", func(_ *testing.T, b backend.Backend) backend.Backend { return slotsForgotten{b} },
			[]string{"scheduler_slots"}},
	}
	cfg := config{scale: 1, ttl: 1e9, transition: 5e8}
	for _, c := range cases {
		for _, name := range c.caught {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				check := find(t, name)
				if check.parallel {
					t.Parallel() // the leak check runs alone, as in Run
				}
				factory := memoryFactory()
				broken := func(t *testing.T) backend.Backend { return c.wrap(t, factory(t)) }
				err := runCheck(t, cfg, newSuiteID(), check, broken)
				assert.Error(t, err, "check %s passed against a backend that %s", name, c.name)
				t.Logf("caught: %v", err)
			})
		}
	}
}

func find(t *testing.T, name string) check {
	for _, c := range checks {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no check %q", name)
	return check{}
}

// neverReleases drops every release: the store keeps naming a stopped contender.
type neverReleases struct{ backend.Backend }

func (b neverReleases) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return noRelease{c.(backend.LeaseContention)}, nil
}

type noRelease struct{ backend.LeaseContention }

func (noRelease) Release(context.Context) error { return nil }

// frozenToken reports the same fencing token for every tenure.
type frozenToken struct{ backend.Backend }

func (b frozenToken) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return constToken{c.(backend.LeaseContention)}, nil
}

type constToken struct{ backend.LeaseContention }

func (c constToken) Acquire(ctx context.Context) (backend.Record, error) {
	r, err := c.LeaseContention.Acquire(ctx)
	if r.Owner != "" {
		r.Token = 7
	}
	return r, err
}

// grantsEveryone tells every contender it owns the mutex.
type grantsEveryone struct{ backend.Backend }

func (b grantsEveryone) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return grant{c.(backend.LeaseContention), p}, nil
}

type grant struct {
	backend.LeaseContention
	p backend.Participant
}

var grantTokens struct {
	sync.Mutex
	n uint64
}

func (g grant) Acquire(ctx context.Context) (backend.Record, error) {
	r, err := g.LeaseContention.Acquire(ctx)
	if err != nil || r.Owner == g.p.ContenderID {
		return r, err
	}
	grantTokens.Lock()
	grantTokens.n++
	tok := 1<<40 + grantTokens.n
	grantTokens.Unlock()
	return backend.Record{Owner: g.p.ContenderID, TTL: g.p.TTL, Transition: g.p.TTL + g.p.Transition, Token: tok}, nil
}

// forgetsRenewal answers every renewal with "no owner".
type forgetsRenewal struct{ inner backend.Backend }

func (b *forgetsRenewal) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.inner.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return &forget{LeaseContention: c.(backend.LeaseContention), id: p.ContenderID}, nil
}

type forget struct {
	backend.LeaseContention
	id    string
	owned bool
}

func (f *forget) Acquire(ctx context.Context) (backend.Record, error) {
	r, err := f.LeaseContention.Acquire(ctx)
	if err != nil {
		return r, err
	}
	wasOwner := f.owned
	f.owned = r.Owner == f.id
	if wasOwner && f.owned {
		return backend.Record{}, nil
	}
	return r, nil
}

// notifiesEveryone turns the lease store into a session store that reports every
// contender as the owner as soon as it starts.
type notifiesEveryone struct{ backend.Backend }

func (b notifiesEveryone) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	if p.ContenderID != "" {
		grantTokens.Lock()
		grantTokens.n++
		tok := 1<<40 + grantTokens.n
		grantTokens.Unlock()
		p.Report(backend.Record{Owner: p.ContenderID, Token: tok}, time.Now())
	}
	return sessionOnly{c}, nil
}

type sessionOnly struct{ c backend.Contention }

func (s sessionOnly) StopContend(ctx context.Context) error { return s.c.StopContend(ctx) }

// failsToStop answers every StopContend with an error, after stopping.
type failsToStop struct{ backend.Backend }

func (b failsToStop) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return stopFails{c.(backend.LeaseContention)}, nil
}

type stopFails struct{ backend.LeaseContention }

func (c stopFails) StopContend(ctx context.Context) error {
	_ = c.LeaseContention.StopContend(ctx)
	return errors.New("tck test: StopContend fails")
}

// leaksGoroutines wraps b in a backend that leaves a goroutine behind at every
// StartContend, until the test ends.
func leaksGoroutines(t *testing.T, b backend.Backend) backend.Backend {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return leaky{b, done}
}

type leaky struct {
	backend.Backend
	done <-chan struct{}
}

func (b leaky) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	go func() { <-b.done }()
	return b.Backend.StartContend(ctx, p)
}

// deafToClose never tells its contentions' participants that it was closed.
type deafToClose struct{ backend.Backend }

func (b deafToClose) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	p.Closed = nil
	return b.Backend.StartContend(ctx, p)
}

func (b deafToClose) Close() error { return b.Backend.(interface{ Close() error }).Close() }

// handOffIgnored answers every hand-off as made, and makes none.
type handOffIgnored struct{ backend.Backend }

func (b handOffIgnored) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return ignoreHandOff{c.(backend.LeaseContention), c.(backend.HandOffer)}, nil
}

type ignoreHandOff struct {
	backend.LeaseContention
	backend.HandOffer
}

func (ignoreHandOff) HandOff(context.Context, string) error { return nil }

// slotsForgotten grants every slot claim and records none.
type slotsForgotten struct{ backend.Backend }

func (b slotsForgotten) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return forgetSlots{c.(backend.LeaseContention), c.(backend.SlotRecorder)}, nil
}

type forgetSlots struct {
	backend.LeaseContention
	backend.SlotRecorder
}

func (forgetSlots) ClaimSlot(context.Context, backend.Slot) (bool, error) { return true, nil }

// The checks wait out a store that answers a backend's first call of each kind later than
// the call timeout, as a loaded machine's database does while a new pool connects and
// checks its tables: Start fails fast on such an outage, and an application (and the
// suite) starts again; what the checks look at is what a started service does.
func TestRunWaitsOutSlowFirstCalls(t *testing.T) {
	cfg := config{scale: 1, ttl: 1e9, transition: 5e8}
	for _, name := range []string{"service_hand_off", "wait_list", "scheduler", "stale_lifecycle",
		"stop_releases_on_store", "lookup", "semaphore_order", "rwlock_readers", "rwlock_writer_first", "rwlock_downgrade"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			factory := memoryFactory()
			slow := func(t *testing.T) backend.Backend { return &stallsFirstCalls{Backend: factory(t)} }
			assert.NoError(t, runCheck(t, cfg, newSuiteID(), find(t, name), slow))
		})
	}
}

// stallsFirstCalls keeps the first StartContend of each hold waiting until its context
// ends; later calls go through.
type stallsFirstCalls struct {
	backend.Backend
	mu      sync.Mutex
	stalled map[backend.Hold]bool
}

func (b *stallsFirstCalls) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	b.mu.Lock()
	first := !b.stalled[p.Hold]
	if b.stalled == nil {
		b.stalled = make(map[backend.Hold]bool)
	}
	b.stalled[p.Hold] = true
	b.mu.Unlock()
	if first {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Backend.StartContend(ctx, p)
}

func (b *stallsFirstCalls) Holds(k backend.Kind) bool {
	h, ok := b.Backend.(backend.Holder)
	return ok && h.Holds(k)
}

// A backend may replace a goroutine it keeps until Close (an etcd backend opens its watch
// stream again when the member lost its leader): the leak check passes it, while a
// goroutine left at every StartContend is caught (TestBrokenBackendsAreCaught).
func TestLeakCheckPassesAReplacedGoroutine(t *testing.T) {
	factory := memoryFactory()
	replacing := func(t *testing.T) backend.Backend {
		b := &replacesKept{Backend: factory(t)}
		t.Cleanup(b.stop)
		return b
	}
	assert.NoError(t, runCheck(t, config{scale: 1, ttl: 1e9, transition: 5e8}, newSuiteID(), find(t, "goroutine_leaks"), replacing))
}

// replacesKept keeps one goroutine, which each StartContend replaces by a new one.
type replacesKept struct {
	backend.Backend
	mu   sync.Mutex
	kept chan struct{} // closed to end the kept goroutine
	wg   sync.WaitGroup
}

func (b *replacesKept) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	b.mu.Lock()
	if b.kept != nil {
		close(b.kept)
	}
	kept := make(chan struct{})
	b.kept = kept
	b.wg.Go(func() { <-kept })
	b.mu.Unlock()
	return b.Backend.StartContend(ctx, p)
}

func (b *replacesKept) stop() {
	b.mu.Lock()
	if b.kept != nil {
		close(b.kept)
		b.kept = nil
	}
	b.mu.Unlock()
	b.wg.Wait()
}
