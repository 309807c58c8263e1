package simba

import (
	"github.com/simba-go/simba/backend"

	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the service against testStore, a small lease store written for them,
// inside synctest bubbles, where time is virtual: every delay the service computes can be
// asserted exactly. The backends themselves are tested against their real stores.

func withJitter(f func(lo, hi time.Duration) time.Duration) Option {
	return option(func(c *config) { c.jitter = f })
}

func noJitter(lo, _ time.Duration) time.Duration { return max(lo, 0) }

// testStore is a lease store with SQL semantics whose calls a test can delay or fail.
type testStore struct {
	mu           sync.Mutex
	owner        string
	ttlAt        time.Time
	transitionAt time.Time
	token        uint64
	tokens       uint64
	calls        []storeCall
	// hook, if set, runs at the start of every call; an error fails the call.
	hook func(ctx context.Context, op string) error
	// replyDelay delays the answer after the store has applied the call.
	replyDelay time.Duration
	wakes      []func()
	grants     []func(backend.Record, time.Time)
}

type storeCall struct {
	op, id string
	at     time.Time
}

func (s *testStore) StartContend(_ context.Context, p backend.Participant) (backend.Contention, error) {
	s.mu.Lock()
	s.wakes = append(s.wakes, p.Wake)
	s.grants = append(s.grants, p.Grant)
	s.mu.Unlock()
	return &testContention{s: s, p: p}, nil
}

func (s *testStore) callLog(op string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	var t0 time.Time
	for _, c := range s.calls {
		if t0.IsZero() {
			t0 = c.at
		}
		if c.op == op {
			out = append(out, c.at.Sub(t0))
		}
	}
	return out
}

// setOwner makes another contender the owner from now, as if it had acquired.
func (s *testStore) setOwner(id string, ttl, transition time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.tokens++
	s.owner, s.token = id, s.tokens
	s.ttlAt, s.transitionAt = now.Add(ttl), now.Add(ttl+transition)
}

type testContention struct {
	s *testStore
	p backend.Participant
}

func (c *testContention) enter(ctx context.Context, op string) error {
	s := c.s
	s.mu.Lock()
	s.calls = append(s.calls, storeCall{op: op, id: c.p.ContenderID, at: time.Now()})
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		return hook(ctx, op)
	}
	return nil
}

func (c *testContention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := c.enter(ctx, "acquire"); err != nil {
		return backend.Record{}, err
	}
	s := c.s
	s.mu.Lock()
	now := time.Now()
	free := s.transitionAt.Before(now)
	if free || (s.owner == c.p.ContenderID && s.transitionAt.After(now)) {
		if free || s.owner != c.p.ContenderID {
			s.tokens++
			s.token = s.tokens
		}
		s.owner = c.p.ContenderID
		s.ttlAt = now.Add(c.p.TTL)
		s.transitionAt = s.ttlAt.Add(c.p.Transition)
	}
	rec := s.record(now)
	delay := s.replyDelay
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	return rec, nil
}

func (s *testStore) record(now time.Time) backend.Record {
	if s.owner == "" || s.transitionAt.Before(now) {
		return backend.Record{}
	}
	return backend.Record{Owner: s.owner, TTL: s.ttlAt.Sub(now), Transition: s.transitionAt.Sub(now), Token: s.token}
}

func (c *testContention) Release(ctx context.Context) error {
	if err := c.enter(ctx, "release"); err != nil {
		return err
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == c.p.ContenderID {
		s.owner, s.ttlAt, s.transitionAt, s.token = "", time.Time{}, time.Time{}, 0
	}
	return nil
}

func (c *testContention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := c.enter(ctx, "lookup"); err != nil {
		return backend.Record{}, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.record(time.Now()), nil
}

func (c *testContention) StopContend(context.Context) error { return nil }

// recorder collects a contender's callbacks with the virtual time they came at.
type recorder struct {
	mu     sync.Mutex
	events []string
	at     []time.Time
	ctxs   []context.Context
	states []State
}

func (r *recorder) contender(mutex, id string) ContenderFuncs {
	return ContenderFuncs{
		MutexName: mutex, ID: id,
		Acquired: func(ctx context.Context, s State) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, "acquired")
			r.at = append(r.at, time.Now())
			r.ctxs = append(r.ctxs, ctx)
			r.states = append(r.states, s)
		},
		Released: func(s State) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, "released")
			r.at = append(r.at, time.Now())
			r.states = append(r.states, s)
		},
	}
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) when(i int) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[i]
}

func startService(t *testing.T, st *testStore, rec *recorder, opts ...ServiceOption) *Service {
	t.Helper()
	s, err := NewService(st, rec.contender("m", "me"), append([]ServiceOption{withJitter(noJitter)}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	return s
}

// The owner renews a renewal lead (ttl/3) before its TTL ends, with no callbacks.
func TestOwnerRenewsBeforeTTLEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		s := startService(t, st, rec)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		period := DefaultTTL - DefaultTTL/renewalLeadDivisor
		want := []time.Duration{0, period, 2 * period, 3 * period, 4 * period}
		assert.Equal(t, want, st.callLog("acquire"))
		assert.Equal(t, []string{"acquired"}, rec.list())
		require.NoError(t, s.Stop(t.Context()))
		assert.Equal(t, []string{"acquired", "released"}, rec.list())
	})
}

// With no transition window, renewals still come before the local TTL end: no flapping.
func TestZeroTransitionDoesNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		s := startService(t, st, rec, WithTTL(time.Second), WithTransition(0))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"acquired"}, rec.list())
		assert.True(t, s.IsOwner())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// A store that stops answering ends belief at the local TTL end: the send time of the last
// successful renewal + ttl - 1% drift margin, cancelling the tenure context at once.
func TestLocalTTLEndWhenStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		s := startService(t, st, rec)
		synctest.Wait()
		start := time.Now()
		var hung sync.Once
		var hangAt time.Time
		st.mu.Lock()
		st.hook = func(ctx context.Context, _ string) error {
			hung.Do(func() { hangAt = time.Now() })
			<-ctx.Done()
			return ctx.Err()
		}
		st.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"acquired", "released"}, rec.list())
		lastRenewalSent := start // the acquisition itself: the first renewal hung
		wantEnd := lastRenewalSent.Add(DefaultTTL - DefaultTTL/driftMarginDivisor)
		assert.Equal(t, wantEnd, rec.when(1), "OnReleased at the local TTL end")
		assert.Equal(t, start.Add(DefaultTTL-DefaultTTL/renewalLeadDivisor), hangAt)
		rec.mu.Lock()
		ctx := rec.ctxs[0]
		rec.mu.Unlock()
		assert.ErrorIs(t, context.Cause(ctx), ErrOwnershipLost)
		assert.False(t, s.IsOwner())

		// Stop returns within the call timeout although the store hangs. The deadline that
		// ended the release was simba's, not the caller's: the error says timeout, not
		// context.DeadlineExceeded.
		began := time.Now()
		err := s.Stop(t.Context())
		assert.ErrorIs(t, err, ErrTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, DefaultTTL/callTimeoutDivisor, time.Since(began))
		assert.Equal(t, StatusInitial, s.Status())
	})
}

// A renewal whose reply arrives late extends belief only from its send time, never from
// the time of the reply.
func TestLateReplyCountsFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		ttl := 10 * time.Second
		s := startService(t, st, rec, WithCallTimeout(9*time.Second))
		synctest.Wait()
		start := time.Now()
		st.mu.Lock()
		st.replyDelay = 2 * time.Second // applied at once, answered 2s later
		st.mu.Unlock()
		time.Sleep(ttl)
		synctest.Wait()
		sent := start.Add(ttl - ttl/renewalLeadDivisor)
		renewals := st.callLog("acquire")
		require.GreaterOrEqual(t, len(renewals), 2)
		assert.Equal(t, sent.Sub(start), renewals[1])
		end := s.believed().endTime()
		assert.Equal(t, sent.Add(ttl-ttl/driftMarginDivisor), end, "belief counts from the send time")
		assert.Equal(t, []string{"acquired"}, rec.list())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// Transient errors before the local TTL end are retried promptly and cause no hand-over.
func TestTransientErrorsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		s := startService(t, st, rec)
		synctest.Wait()
		failures := 3
		st.mu.Lock()
		st.hook = func(context.Context, string) error {
			if failures > 0 {
				failures--
				return errors.New("connection reset")
			}
			return nil
		}
		st.mu.Unlock()
		time.Sleep(DefaultTTL)
		synctest.Wait()
		calls := st.callLog("acquire")
		require.Len(t, calls, 5, "the acquisition, three failed renewals and a successful one")
		base := DefaultTTL / 100
		assert.InDelta(t, float64(calls[1]+base), float64(calls[2]), float64(base/4+1))
		assert.Less(t, calls[4], DefaultTTL-DefaultTTL/driftMarginDivisor)
		assert.Equal(t, []string{"acquired"}, rec.list())
		assert.True(t, s.IsOwner())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// When the store names another owner, belief ends at once.
func TestAnotherOwnerEndsBeliefAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		s := startService(t, st, rec, WithTTL(3*time.Second), WithTransition(time.Second))
		synctest.Wait()
		// The store loses the record (for example, a restart without persistence) and
		// someone else takes the mutex.
		st.setOwner("other", 3*time.Second, time.Second)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"acquired", "released"}, rec.list())
		renewal := 2 * time.Second // ttl - ttl/3
		assert.Equal(t, rec.when(0).Add(renewal), rec.when(1))
		rec.mu.Lock()
		assert.Equal(t, "other", rec.states[1].After.ID)
		rec.mu.Unlock()
		assert.Equal(t, "other", s.Owner().ID)
		require.NoError(t, s.Stop(t.Context()))
	})
}

// A non-owner tries again after the owner's transition window, plus jitter.
func TestNonOwnerWaitsForTransitionEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		st.setOwner("other", 10*time.Second, 6*time.Second)
		jitter := 300 * time.Millisecond
		s, err := NewService(st, rec.contender("m", "me"), withJitter(func(lo, hi time.Duration) time.Duration {
			assert.Equal(t, jitterLow, lo)
			assert.Equal(t, jitterHigh, hi)
			return jitter
		}))
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		calls := st.callLog("acquire")
		require.GreaterOrEqual(t, len(calls), 2)
		assert.Equal(t, 16*time.Second+jitter, calls[1])
		assert.Equal(t, []string{"acquired"}, rec.list(), "acquired once the owner's record lapsed")
		require.NoError(t, s.Stop(t.Context()))
	})
}

// A wake-up makes a waiter contend at once.
func TestWakeContendsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		st.setOwner("other", 10*time.Second, 6*time.Second)
		s := startService(t, st, rec)
		time.Sleep(time.Second)
		synctest.Wait()
		st.mu.Lock()
		st.owner, st.transitionAt = "", time.Time{}
		wake := st.wakes[0]
		st.mu.Unlock()
		wake()
		synctest.Wait()
		assert.Equal(t, []time.Duration{0, time.Second}, st.callLog("acquire"))
		assert.Equal(t, []string{"acquired"}, rec.list())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// handOver makes "me" the owner in the store, as a releasing owner that hands the mutex
// over would, and tells the service so with a grant answering the call sent at sent.
func handOver(st *testStore, sent time.Time, ttl, transition time.Duration) {
	st.mu.Lock()
	st.tokens++
	st.owner, st.token = "me", st.tokens
	st.ttlAt, st.transitionAt = sent.Add(ttl), sent.Add(ttl+transition)
	grant := st.grants[0]
	rec := backend.Record{Owner: "me", TTL: ttl, Transition: ttl + transition, Token: st.token}
	st.mu.Unlock()
	grant(rec, sent)
}

// A grant begins a tenure whose local end counts from the send time of the call it
// answers, and the renewal is due as after an answer to that call.
func TestGrantBeginsTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		st.setOwner("other", 10*time.Second, 6*time.Second)
		s := startService(t, st, rec, WithTTL(3*time.Second), WithTransition(time.Second))
		synctest.Wait()
		sent := time.Now()
		time.Sleep(500 * time.Millisecond)
		handOver(st, sent, 3*time.Second, time.Second)
		synctest.Wait()
		require.Equal(t, []string{"acquired"}, rec.list())
		assert.Equal(t, sent.Add(500*time.Millisecond), rec.when(0))
		require.True(t, s.IsOwner())
		end := s.believed().endTime()
		assert.Equal(t, sent.Add(3*time.Second-30*time.Millisecond), end,
			"the local end counts from the send time (ttl - ttl/100 drift)")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		calls := st.callLog("acquire")
		require.GreaterOrEqual(t, len(calls), 2)
		assert.Equal(t, 2*time.Second, calls[1], "renewed at ttl - ttl/3 after the send time")
		assert.Equal(t, []string{"acquired"}, rec.list(), "kept across renewals")
		require.NoError(t, s.Stop(t.Context()))
	})
}

// A grant older than an answer already applied is ignored.
func TestGrantOlderThanAnswerIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		st.setOwner("other", 10*time.Second, 6*time.Second)
		s := startService(t, st, rec)
		synctest.Wait()
		before := time.Now().Add(-time.Millisecond)
		handOver(st, before, 10*time.Second, 6*time.Second)
		synctest.Wait()
		assert.Empty(t, rec.list())
		assert.False(t, s.IsOwner())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// The answer to a call sent before the hand-over, arriving after the grant, does not end
// the tenure the grant began.
func TestStaleAnswerDoesNotUndoGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		st.setOwner("other", 10*time.Second, 6*time.Second)
		s := startService(t, st, rec)
		synctest.Wait()
		st.mu.Lock()
		st.replyDelay = time.Second
		wake := st.wakes[0]
		st.mu.Unlock()
		time.Sleep(time.Second)
		sent := time.Now()
		wake() // an attempt that the store answers with "other", delivered a second later
		time.Sleep(500 * time.Millisecond)
		handOver(st, sent, 10*time.Second, 6*time.Second)
		synctest.Wait()
		require.Equal(t, []string{"acquired"}, rec.list())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"acquired"}, rec.list(), "the late answer naming the former owner was dropped")
		assert.True(t, s.IsOwner())
		require.NoError(t, s.Stop(t.Context()))
		assert.Equal(t, []string{"acquired", "released"}, rec.list())
	})
}

func TestInitialDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		start := time.Now()
		s := startService(t, st, rec, WithInitialDelay(5*time.Second))
		time.Sleep(6 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"acquired"}, rec.list())
		assert.Equal(t, start.Add(5*time.Second), rec.when(0))
		require.NoError(t, s.Stop(t.Context()))
	})
}

// An acquisition answered after Stop began is dropped and released on the store.
func TestLateAcquisitionAfterStopIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, rec := &testStore{}, &recorder{}
		entered := make(chan struct{})
		st.hook = func(ctx context.Context, op string) error {
			if op == "acquire" {
				close(entered)
				<-ctx.Done() // the reply is lost in a partition...
			}
			return nil // ...but the store applied the call
		}
		s := startService(t, st, rec)
		<-entered
		st.mu.Lock()
		st.hook = nil
		st.mu.Unlock()
		require.NoError(t, s.Stop(t.Context()))
		assert.Empty(t, rec.list())
		st.mu.Lock()
		defer st.mu.Unlock()
		assert.Empty(t, st.owner, "Stop released the late acquisition")
	})
}

// A session backend drives ownership through Report; belief follows the reports, and a
// reported TTLAt bounds it.
func TestSessionReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p backend.Participant
		b := sessionBackend(func(part backend.Participant) { p = part })
		rec := &recorder{}
		s, err := NewService(b, rec.contender("m", "me"))
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		p.Report(backend.Record{Owner: "me", Token: 5}, time.Now())
		p.Report(backend.Record{Owner: "me", Token: 5}, time.Now()) // a repeat is not a change
		synctest.Wait()
		assert.Equal(t, []string{"acquired"}, rec.list())
		assert.True(t, s.IsOwner())
		p.Report(backend.Record{}, time.Now()) // disconnected: stop believing at once
		synctest.Wait()
		assert.Equal(t, []string{"acquired", "released"}, rec.list())
		p.Report(backend.Record{Owner: "me", Token: 5, TTL: time.Second}, time.Now())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"acquired", "released", "acquired", "released"}, rec.list())
		require.NoError(t, s.Stop(t.Context()))
		p.Report(backend.Record{Owner: "me"}, time.Now()) // after Stop: ignored
		synctest.Wait()
		assert.Len(t, rec.list(), 4)
	})
}

type sessionBackend func(backend.Participant)

func (f sessionBackend) StartContend(_ context.Context, p backend.Participant) (backend.Contention, error) {
	f(p)
	return sessionContention{}, nil
}

type sessionContention struct{}

func (sessionContention) StopContend(context.Context) error { return nil }

func TestSameContenderTwiceInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &testStore{}
		a, err := NewService(st, ContenderFuncs{MutexName: "m", ID: "dup"})
		require.NoError(t, err)
		b, err := NewService(st, ContenderFuncs{MutexName: "m", ID: "dup"})
		require.NoError(t, err)
		other, err := NewService(st, ContenderFuncs{MutexName: "m2", ID: "dup"})
		require.NoError(t, err)
		require.NoError(t, a.Start(t.Context()))
		assert.ErrorIs(t, b.Start(t.Context()), ErrInvalidArgument)
		assert.Equal(t, StatusInitial, b.Status())
		require.NoError(t, other.Start(t.Context()), "another mutex may use the same ID")
		require.NoError(t, a.Stop(t.Context()))
		require.NoError(t, b.Start(t.Context()), "free again once the first stopped")
		require.NoError(t, b.Stop(t.Context()))
		require.NoError(t, other.Stop(t.Context()))
	})
}

// A callback that calls a service accessor does not deadlock, and a panic in one is
// recovered while the service goes on.
func TestCallbacksMayReadTheService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &testStore{}
		var s *Service
		var owner bool
		c := ContenderFuncs{MutexName: "m", ID: "me", Acquired: func(context.Context, State) {
			owner = s.IsOwner()
			_ = s.Owner()
			panic("boom")
		}}
		var err error
		s, err = NewService(st, c)
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.True(t, owner)
		assert.True(t, s.IsOwner())
		require.NoError(t, s.Stop(t.Context()))
	})
}

// reportingSession is a session backend that makes every contender the owner at once and
// counts StopContend calls.
type reportingSession struct {
	mu    sync.Mutex
	p     backend.Participant
	stops int
}

func (b *reportingSession) StartContend(_ context.Context, p backend.Participant) (backend.Contention, error) {
	b.mu.Lock()
	b.p = p
	b.mu.Unlock()
	p.Report(backend.Record{Owner: p.ContenderID, Token: 9}, time.Now())
	return b, nil
}

func (b *reportingSession) StopContend(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stops++
	return nil
}

func (b *reportingSession) stopCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stops
}

// A Locker whose lease on a session store is lost gives the session contention up at once
// (its node would otherwise stay first in line), and only once.
func TestLockerLeavesSessionAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &reportingSession{}
		l, err := NewLocker(b, "m")
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		assert.Equal(t, uint64(9), lease.Token())
		b.mu.Lock()
		p := b.p
		b.mu.Unlock()
		p.Report(backend.Record{}, time.Now()) // disconnected
		synctest.Wait()
		assert.ErrorIs(t, context.Cause(lease.Context()), ErrOwnershipLost)
		assert.Equal(t, 1, b.stopCount(), "left at once, not at Release")
		assert.ErrorIs(t, lease.Release(t.Context()), ErrOwnershipLost)
		assert.Equal(t, 1, b.stopCount(), "not twice")
	})
}
