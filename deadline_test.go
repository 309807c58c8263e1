package simba_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// Issue 12, finding 2: against a stalled store (a SIGSTOPped server that ignores the
// client's deadline), calls returned seconds after their deadline. Every call now returns
// by its context's deadline; the store work left undone goes on in the background and is
// joined by Close. In a synctest bubble the deadline is exact: no slack is needed.

const deadline = time.Second

// within runs call with a context that ends after deadline and checks that it returns by
// then with an error matching the context's.
func within(t *testing.T, what string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	began := time.Now()
	err := call(ctx)
	assert.LessOrEqual(t, time.Since(began), deadline, "%s overran its deadline", what)
	assert.ErrorIs(t, err, context.DeadlineExceeded, what)
}

func TestLockerKeepsDeadlineWhenStoreStalls(t *testing.T) {
	for _, op := range []string{opStart, opAcquire} {
		t.Run(op, func(t *testing.T) {
			eachFaultyKind(t, func(t *testing.T, store *memory.Store, f *faultyBackend, b simba.Backend) {
				l, err := simba.NewLocker(b, "m")
				require.NoError(t, err)
				f.stall(op)
				for _, try := range []struct {
					name string
					call func(context.Context) (*simba.Lease, error)
				}{{"Acquire", l.Acquire}, {"TryAcquire", l.TryAcquire}} {
					within(t, try.name, func(ctx context.Context) error {
						_, err := try.call(ctx)
						assert.ErrorIs(t, err, simba.ErrNotAcquired)
						return err
					})
				}
				f.unstall(op)
				lease, err := l.Acquire(t.Context())
				require.NoError(t, err, "the locker works again once the store answers")
				require.NoError(t, lease.Release(t.Context()))
				require.NoError(t, l.Close())
				assert.Zero(t, store.Len(), "nothing left on the store")
			})
		})
	}
}

// A release that the store does not answer ends the lease's call at its deadline; the
// release goes on in the background, and the next acquisition waits for it rather than
// racing it.
func TestLeaseReleaseKeepsDeadlineWhenStoreStalls(t *testing.T) {
	eachFaultyKind(t, func(t *testing.T, store *memory.Store, f *faultyBackend, b simba.Backend) {
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		f.stall(opRelease)
		within(t, "Release", lease.Release)
		assert.ErrorIs(t, lease.Context().Err(), context.Canceled, "the lease ended at once")
		within(t, "the next Acquire, while the release is under way", func(ctx context.Context) error {
			_, err := l.Acquire(ctx)
			return err
		})
		f.unstall(opRelease)
		next, err := l.Acquire(t.Context())
		require.NoError(t, err)
		assert.Greater(t, next.Token(), lease.Token())
		require.NoError(t, next.Release(t.Context()))
		require.NoError(t, l.Close())
		assert.Zero(t, store.Len())
	})
}

func TestServiceKeepsDeadlineWhenStoreStalls(t *testing.T) {
	eachFaultyKind(t, func(t *testing.T, store *memory.Store, f *faultyBackend, b simba.Backend) {
		acquired := make(chan struct{}, 1)
		svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c",
			Acquired: func(context.Context, simba.State) { acquired <- struct{}{} }})
		require.NoError(t, err)

		f.stall(opStart)
		within(t, "Start", svc.Start)
		assert.Equal(t, simba.StatusInitial, svc.Status())
		f.unstall(opStart)

		require.NoError(t, svc.Start(t.Context()))
		<-acquired
		f.stall(opRelease)
		within(t, "Stop", svc.Stop)
		assert.Equal(t, simba.StatusInitial, svc.Status())
		f.unstall(opRelease)
		require.NoError(t, svc.Close(), "Close waits for the release")
		assert.Zero(t, store.Len(), "the release reached the store")
	})
}

// Lookup (a health page's, cmd/simba get's) returned only when the store answered: with
// a stalled store, long after its caller's deadline.
func TestLookupKeepsDeadlineWhenStoreStalls(t *testing.T) {
	for _, op := range []string{opStart, opLookup} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, f := newFaultyStore()
				l, err := simba.NewLocker(f, "m", simba.WithContenderID("owner"))
				require.NoError(t, err)
				lease, err := l.Acquire(t.Context())
				require.NoError(t, err)
				f.stall(op)
				looked := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(t.Context(), deadline)
					defer cancel()
					_, err := simba.Lookup(ctx, f, "m")
					looked <- err
				}()
				select {
				case err := <-looked:
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					stage := map[string]string{opStart: "no answer from the store while starting", opLookup: "no answer from the store to the read"}[op]
					assert.ErrorContains(t, err, stage, "the error says what the store did not answer")
				case <-time.After(2 * deadline):
					t.Error("Lookup overran its deadline against a stalled store")
				}
				f.unstall(op)
				synctest.Wait() // the lookup left in the background has closed its contention
				o, err := simba.Lookup(t.Context(), f, "m")
				require.NoError(t, err)
				assert.Equal(t, "owner", o.ID)
				require.NoError(t, lease.Release(t.Context()))
				require.NoError(t, l.Close())
				assert.Zero(t, store.Len())
			})
		})
	}
}

// Close waits for the store work left in the background, so nothing outlives it.
func TestLockerCloseJoinsTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, f := newFaultyStore()
		l, err := simba.NewLocker(f, "m")
		require.NoError(t, err)
		f.stall(opAcquire)
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		_, err = l.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		closeWaits(t, l.Close, "the stalled acquire", func() { f.unstall(opAcquire) })
		assert.Zero(t, store.Len(), "the acquisition that may have been applied was released")
		_, err = l.Acquire(t.Context())
		assert.ErrorIs(t, err, simba.ErrClosed)
		assert.False(t, errors.Is(err, simba.ErrNotAcquired) && errors.Is(err, context.Canceled))
	})
}

// Mutexes.Close waits, as Locker.Close does, for a start-up that the store had not
// answered when the acquisition's deadline ended: it used to return while that
// StartContend was still under way (adversarial review, stop 32).
func TestMutexesCloseJoinsTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, f := newFaultyStore()
		m, err := simba.NewMutexes(f)
		require.NoError(t, err)
		f.stall(opStart)
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		_, err = m.Acquire(ctx, "m")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		closeWaits(t, m.Close, "the stalled start-up", func() { f.unstall(opStart) })
		assert.Zero(t, store.Len(), "the contention that may have been opened was closed")
	})
}

// closeWaits checks, in a synctest bubble, that close does not return while what (store
// work left in the background) is under way, then calls end and that close returns nil.
func closeWaits(t *testing.T, close func() error, what string, end func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- close() }()
	synctest.Wait()
	select {
	case <-closed:
		t.Fatalf("Close returned while %s was under way", what)
	default:
	}
	end()
	require.NoError(t, <-closed)
}

// A Lookup whose context has ended already does not ask the store.
func TestLookupWithAnEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := simba.Lookup(ctx, f, "m")
		assert.ErrorIs(t, err, context.Canceled)
		synctest.Wait() // whatever Lookup left in the background has run
		assert.Zero(t, f.count(opStart), "the store was asked")
	})
}
