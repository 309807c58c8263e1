package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
)

// recorder is an Observer that keeps every event, in order, and wakes waiters.
type recorder struct {
	mu     sync.Mutex
	events []any // observe.Call, tenureBegan, tenureEnded, observe.Acquisition
	added  chan struct{}
}

type (
	tenureBegan observe.Tenure
	tenureEnded observe.Tenure
)

func newRecorder() *recorder { return &recorder{added: make(chan struct{}, 1)} }

func (r *recorder) add(e any) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

func (r *recorder) OnCall(c observe.Call)                              { r.add(c) }
func (r *recorder) OnTenureBegan(t observe.Tenure)                     { r.add(tenureBegan(t)) }
func (r *recorder) OnTenureEnded(t observe.Tenure)                     { r.add(tenureEnded(t)) }
func (r *recorder) OnAcquire(_ context.Context, a observe.Acquisition) { r.add(a) }

func (r *recorder) snapshot() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.events...)
}

// calls counts the store calls of op.
func (r *recorder) calls(op observe.Op) int {
	return count(r.snapshot(), func(e any) bool {
		c, ok := e.(observe.Call)
		return ok && c.Op == op
	})
}

func count(events []any, f func(any) bool) (n int) {
	for _, e := range events {
		if f(e) {
			n++
		}
	}
	return n
}

// await waits until an event satisfies f, and returns it.
func await[E any](t *testing.T, r *recorder, f func(E) bool) E {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, e := range r.snapshot() {
			if v, ok := e.(E); ok && f(v) {
				return v
			}
		}
		select {
		case <-r.added:
		case <-deadline:
			var zero E
			t.Fatalf("no %T event came; events: %v", zero, r.snapshot())
			return zero
		}
	}
}

func anyEvent[E any](E) bool { return true }

func TestObserverLocker(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	rec := newRecorder()
	l, err := simba.NewLocker(b, "observed", simba.WithContenderID("me"), simba.WithObserver(rec))
	require.NoError(t, err)
	defer l.Close()

	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	a := await(t, rec, anyEvent[observe.Acquisition])
	assert.Equal(t, "observed", a.Mutex)
	assert.Equal(t, "me", a.Contender)
	assert.False(t, a.Try)
	assert.NoError(t, a.Err)
	assert.Equal(t, lease.Token(), a.Token)
	assert.GreaterOrEqual(t, a.Wait, time.Duration(0))

	began := await(t, rec, anyEvent[tenureBegan])
	assert.Equal(t, lease.Token(), began.Token)
	assert.False(t, began.Granted)
	assert.NoError(t, began.Cause)

	acq := await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpAcquire })
	assert.Equal(t, "me", acq.Owner)
	assert.Equal(t, lease.Token(), acq.Token)
	assert.NoError(t, acq.Err)
	assert.Equal(t, 1, rec.calls(observe.OpStart))

	require.NoError(t, lease.Release(t.Context()))
	ended := await(t, rec, anyEvent[tenureEnded])
	assert.ErrorIs(t, ended.Cause, context.Canceled)
	assert.Equal(t, lease.Token(), ended.Token)
	assert.GreaterOrEqual(t, ended.Held, time.Duration(0))
	await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpRelease && c.Err == nil })
	await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpStop && c.Err == nil })

	// The begin of a tenure comes before its end, and the acquisition is told once.
	events := rec.snapshot()
	var iBegan, iEnded int
	for i, e := range events {
		switch e.(type) {
		case tenureBegan:
			iBegan = i
		case tenureEnded:
			iEnded = i
		}
	}
	assert.Less(t, iBegan, iEnded)
	assert.Equal(t, 1, count(events, func(e any) bool { _, ok := e.(observe.Acquisition); return ok }))
}

func TestObserverTryAcquireRefused(t *testing.T) {
	store := memory.NewStore()
	b1, _ := memory.New(store)
	b2, _ := memory.New(store)
	holder, err := simba.NewLocker(b1, "observed")
	require.NoError(t, err)
	defer holder.Close()
	lease, err := holder.Acquire(t.Context())
	require.NoError(t, err)
	defer lease.Release(context.Background())

	rec := newRecorder()
	m, err := simba.NewMutexes(b2, simba.WithObserver(rec))
	require.NoError(t, err)
	defer m.Close()
	_, err = m.TryAcquire(t.Context(), "observed")
	require.ErrorIs(t, err, simba.ErrNotAcquired)
	a := await(t, rec, anyEvent[observe.Acquisition])
	assert.True(t, a.Try)
	assert.ErrorIs(t, a.Err, simba.ErrNotAcquired)
	assert.Zero(t, a.Token)
	c := await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpAcquire })
	assert.Equal(t, holder.ContenderID(), c.Owner, "the call names the owner it found")
}

// scripted is a lease backend whose Acquire answers what the test sends, so that a test
// can make the store name another owner, hand the mutex over, or fail.
type scripted struct {
	answers chan backend.Record
	parts   chan backend.Participant
	mu      sync.Mutex
	failing error
}

func newScripted() *scripted {
	return &scripted{answers: make(chan backend.Record), parts: make(chan backend.Participant, 4)}
}

func (s *scripted) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = err
}

func (s *scripted) StartContend(_ context.Context, p backend.Participant) (backend.Contention, error) {
	s.parts <- p
	return scriptedContention{s}, nil
}

type scriptedContention struct{ s *scripted }

func (c scriptedContention) Acquire(ctx context.Context) (backend.Record, error) {
	c.s.mu.Lock()
	err := c.s.failing
	c.s.mu.Unlock()
	if err != nil {
		return backend.Record{}, err
	}
	select {
	case rec := <-c.s.answers:
		return rec, nil
	case <-ctx.Done():
		return backend.Record{}, ctx.Err()
	}
}

func (scriptedContention) Release(context.Context) error { return nil }
func (scriptedContention) Lookup(context.Context) (backend.Record, error) {
	return backend.Record{}, nil
}
func (scriptedContention) StopContend(context.Context) error { return nil }

func TestObserverTenureCauses(t *testing.T) {
	const ttl = time.Minute
	mine := func(token uint64) backend.Record {
		return backend.Record{Owner: "me", TTL: ttl, Transition: 2 * ttl, Token: token}
	}
	start := func(t *testing.T, opts ...simba.ServiceOption) (*scripted, *recorder, backend.Participant, *simba.Service) {
		s, rec := newScripted(), newRecorder()
		svc, err := simba.NewService(s, simba.ContenderFuncs{MutexName: "m", ID: "me"},
			append([]simba.ServiceOption{simba.WithTTL(ttl), simba.WithObserver(rec)}, opts...)...)
		require.NoError(t, err)
		require.NoError(t, svc.Start(t.Context()))
		t.Cleanup(func() { _ = svc.Close() })
		return s, rec, <-s.parts, svc
	}

	t.Run("another owner", func(t *testing.T) {
		s, rec, p, _ := start(t)
		s.answers <- mine(7)
		await(t, rec, anyEvent[tenureBegan])
		p.Wake()
		s.answers <- backend.Record{Owner: "other", TTL: ttl, Transition: 2 * ttl, Token: 8}
		ended := await(t, rec, anyEvent[tenureEnded])
		assert.ErrorIs(t, ended.Cause, simba.ErrOwnerChanged)
		assert.ErrorIs(t, ended.Cause, simba.ErrOwnershipLost)
		assert.Equal(t, uint64(7), ended.Token)
		renew := await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpRenew })
		assert.Equal(t, "other", renew.Owner)
	})

	t.Run("granted", func(t *testing.T) {
		s, rec, p, _ := start(t)
		s.answers <- backend.Record{Owner: "other", TTL: ttl, Transition: 2 * ttl, Token: 3}
		await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpAcquire })
		p.Grant(mine(4), time.Now())
		began := await(t, rec, anyEvent[tenureBegan])
		assert.True(t, began.Granted)
		assert.Equal(t, uint64(4), began.Token)
	})

	t.Run("store error until the local ttl end", func(t *testing.T) {
		const short = 300 * time.Millisecond
		s, rec, _, _ := start(t, simba.WithTTL(short))
		down := errors.New("store down")
		s.answers <- backend.Record{Owner: "me", TTL: short, Transition: short, Token: 9}
		await(t, rec, anyEvent[tenureBegan])
		s.fail(down)
		ended := await(t, rec, anyEvent[tenureEnded])
		assert.ErrorIs(t, ended.Cause, simba.ErrLeaseExpired)
		assert.ErrorIs(t, ended.Cause, simba.ErrOwnershipLost)
		assert.ErrorIs(t, ended.Cause, down)
		assert.Equal(t, "store_error", observe.Tenure(ended).Reason)
		failed := await(t, rec, func(c observe.Call) bool { return c.Op == observe.OpRenew && c.Err != nil })
		assert.ErrorIs(t, failed.Err, down)
	})

	t.Run("stop", func(t *testing.T) {
		s, rec, _, svc := start(t)
		s.answers <- mine(5)
		await(t, rec, anyEvent[tenureBegan])
		require.NoError(t, svc.Stop(t.Context()))
		ended := await(t, rec, anyEvent[tenureEnded])
		assert.ErrorIs(t, ended.Cause, context.Canceled)
	})
}

func TestWithObserverNil(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	_, err = simba.NewLocker(b, "m", simba.WithObserver(nil))
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	var nilFuncs *observe.Funcs
	_, err = simba.NewLocker(b, "m", simba.WithObserver(nilFuncs))
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}

func TestOpString(t *testing.T) {
	for op, want := range map[observe.Op]string{
		observe.OpStart: "start", observe.OpAcquire: "acquire", observe.OpRenew: "renew",
		observe.OpLookup: "lookup", observe.OpRelease: "release", observe.OpStop: "stop", 0: "Op(0)",
	} {
		assert.Equal(t, want, op.String())
	}
}

// TestObserverRolesAndCallerContext: every event says what its contender is for, and an
// acquisition is told with the caller's context (a tracer puts its span in the caller's
// trace).
func TestObserverRolesAndCallerContext(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	type key struct{}
	ctxs := make(chan context.Context, 1)
	var mu sync.Mutex
	roles := map[string]map[observe.Role]bool{}
	note := func(mutex string, r observe.Role) {
		mu.Lock()
		defer mu.Unlock()
		if roles[mutex] == nil {
			roles[mutex] = map[observe.Role]bool{}
		}
		roles[mutex][r] = true
	}
	obs := simba.WithObserver(observe.Funcs{
		Call:        func(c observe.Call) { note(c.Mutex, c.Role) },
		TenureBegan: func(t observe.Tenure) { note(t.Mutex, t.Role) },
		Acquire:     func(ctx context.Context, _ observe.Acquisition) { ctxs <- ctx },
	})

	l, err := simba.NewLocker(b, "lock", obs)
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(context.WithValue(t.Context(), key{}, "caller"))
	require.NoError(t, err)
	assert.Equal(t, "caller", (<-ctxs).Value(key{}))
	require.NoError(t, lease.Release(t.Context()))

	acquired := make(chan struct{})
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "leader", ID: "a",
		Acquired: func(context.Context, simba.State) { close(acquired) }}, obs)
	require.NoError(t, err)
	require.NoError(t, svc.Start(t.Context()))
	<-acquired
	require.NoError(t, svc.Close())

	owners, err := simba.Observe(t.Context(), b, "watched", obs)
	require.NoError(t, err)
	_ = owners

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[observe.Role]bool{observe.RoleLock: true}, roles["lock"])
	assert.Equal(t, map[observe.Role]bool{observe.RoleLeader: true}, roles["leader"])
	assert.Equal(t, map[observe.Role]bool{observe.RoleObserver: true}, roles["watched"])
}
