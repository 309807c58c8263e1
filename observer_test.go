package simba_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// recorder is an Observer that keeps every event, in order, and wakes waiters.
type recorder struct {
	mu     sync.Mutex
	events []any // simba.Call, tenureBegan, tenureEnded, simba.Acquisition
	added  chan struct{}
}

type (
	tenureBegan simba.Tenure
	tenureEnded simba.Tenure
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

func (r *recorder) OnCall(c simba.Call)                              { r.add(c) }
func (r *recorder) OnTenureBegan(t simba.Tenure)                     { r.add(tenureBegan(t)) }
func (r *recorder) OnTenureEnded(t simba.Tenure)                     { r.add(tenureEnded(t)) }
func (r *recorder) OnAcquire(_ context.Context, a simba.Acquisition) { r.add(a) }

func (r *recorder) snapshot() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.events...)
}

// calls counts the store calls of op.
func (r *recorder) calls(op simba.Op) int {
	return count(r.snapshot(), func(e any) bool {
		c, ok := e.(simba.Call)
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
	a := await(t, rec, anyEvent[simba.Acquisition])
	assert.Equal(t, "observed", a.Mutex)
	assert.Equal(t, "me", a.Contender)
	assert.False(t, a.Try)
	assert.NoError(t, a.Err)
	assert.Equal(t, lease.Token(), a.Token)
	assert.GreaterOrEqual(t, a.Wait, time.Duration(0))

	began := await(t, rec, anyEvent[tenureBegan])
	assert.Equal(t, lease.Token(), began.Owner.Token)
	assert.Equal(t, "me", began.Owner.ID)
	assert.False(t, began.Granted)
	assert.NoError(t, began.Cause)

	acq := await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpAcquire })
	assert.Equal(t, "me", acq.Owner)
	assert.Equal(t, lease.Token(), acq.Token)
	assert.NoError(t, acq.Err)
	assert.Equal(t, 1, rec.calls(simba.OpStart))

	require.NoError(t, lease.Release(t.Context()))
	ended := await(t, rec, anyEvent[tenureEnded])
	assert.ErrorIs(t, ended.Cause, context.Canceled)
	assert.Equal(t, lease.Token(), ended.Owner.Token)
	assert.GreaterOrEqual(t, ended.Held, time.Duration(0))
	await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpRelease && c.Err == nil })
	await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpStop && c.Err == nil })

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
	assert.Equal(t, 1, count(events, func(e any) bool { _, ok := e.(simba.Acquisition); return ok }))
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
	a := await(t, rec, anyEvent[simba.Acquisition])
	assert.True(t, a.Try)
	assert.ErrorIs(t, a.Err, simba.ErrNotAcquired)
	assert.Zero(t, a.Token)
	c := await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpAcquire })
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
		assert.Equal(t, uint64(7), ended.Owner.Token)
		renew := await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpRenew })
		assert.Equal(t, "other", renew.Owner)
	})

	t.Run("granted", func(t *testing.T) {
		s, rec, p, _ := start(t)
		s.answers <- backend.Record{Owner: "other", TTL: ttl, Transition: 2 * ttl, Token: 3}
		await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpAcquire })
		p.Grant(mine(4), time.Now())
		began := await(t, rec, anyEvent[tenureBegan])
		assert.True(t, began.Granted)
		assert.Equal(t, uint64(4), began.Owner.Token)
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
		assert.Equal(t, "store_error", simba.Tenure(ended).Reason())
		failed := await(t, rec, func(c simba.Call) bool { return c.Op == simba.OpRenew && c.Err != nil })
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
	var nilFuncs *simba.ObserverFuncs
	_, err = simba.NewLocker(b, "m", simba.WithObserver(nilFuncs))
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}

func TestOpString(t *testing.T) {
	for op, want := range map[simba.Op]string{
		simba.OpStart: "start", simba.OpAcquire: "acquire", simba.OpRenew: "renew",
		simba.OpLookup: "lookup", simba.OpRelease: "release", simba.OpStop: "stop", 0: "Op(0)",
	} {
		assert.Equal(t, want, op.String())
	}
}

func TestEventNames(t *testing.T) {
	assert.Equal(t, "ok", simba.Call{}.Outcome())
	assert.Equal(t, "timeout", simba.Call{Err: fmt.Errorf("x: %w", simba.ErrTimeout)}.Outcome())
	assert.Equal(t, "error", simba.Call{Err: errors.New("refused")}.Outcome())
	for cause, want := range map[error]string{
		nil:                   "",
		context.Canceled:      "released",
		simba.ErrOwnerChanged: "owner_changed",
		simba.ErrLeaseExpired: "expired",
		fmt.Errorf("%w: %w", simba.ErrLeaseExpired, errors.New("down")): "store_error",
		errors.New("other"): "unknown",
	} {
		assert.Equal(t, want, simba.Tenure{Cause: cause}.Reason(), "%v", cause)
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
	roles := map[string]map[simba.Role]bool{}
	note := func(mutex string, r simba.Role) {
		mu.Lock()
		defer mu.Unlock()
		if roles[mutex] == nil {
			roles[mutex] = map[simba.Role]bool{}
		}
		roles[mutex][r] = true
	}
	obs := simba.WithObserver(simba.ObserverFuncs{
		Call:        func(c simba.Call) { note(c.Mutex, c.Role) },
		TenureBegan: func(t simba.Tenure) { note(t.Mutex, t.Role) },
		Acquire:     func(ctx context.Context, _ simba.Acquisition) { ctxs <- ctx },
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
	assert.Equal(t, map[simba.Role]bool{simba.RoleLock: true}, roles["lock"])
	assert.Equal(t, map[simba.Role]bool{simba.RoleLeader: true}, roles["leader"])
	assert.Equal(t, map[simba.Role]bool{simba.RoleObserver: true}, roles["watched"])
}
