package simba_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

func newMutexes(t *testing.T, store *memory.Store, opts ...simba.MutexesOption) (*simba.Mutexes, *faultyBackend) {
	t.Helper()
	mb, err := memory.New(store)
	require.NoError(t, err)
	b := newFaultyBackend(mb)
	m, err := simba.NewMutexes(b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, b
}

// Waiters are served in the order they queued, and a hand-over between them costs no
// store call while the tenure is valid.
func TestMutexesFIFOWithoutStoreRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, b := newMutexes(t, memory.NewStore())
		first, err := m.Acquire(t.Context(), "jobs")
		require.NoError(t, err)
		var (
			mu    sync.Mutex
			order []int
		)
		leases := make(chan *simba.Lease)
		for i := range 5 {
			go func() {
				l, err := m.Acquire(t.Context(), "jobs")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				leases <- l
			}()
			synctest.Wait() // goroutine i is queued before i+1 starts
		}
		acquires, releases := b.count(opAcquire), b.count(opRelease)
		require.NoError(t, first.Release(t.Context()))
		for range 5 {
			l := <-leases
			assert.NoError(t, l.Context().Err(), "each holder gets a live context of its own")
			assert.Equal(t, first.Token(), l.Token(), "holders of one tenure share its token")
			require.NoError(t, l.Release(t.Context()))
		}
		assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
		assert.Equal(t, acquires, b.count(opAcquire), "local hand-overs made no acquire call")
		synctest.Wait()
		assert.Equal(t, releases+1, b.count(opRelease), "one store release, when the queue emptied")
		assert.Zero(t, m.Len())
	})
}

// A waiter whose deadline passes leaves the queue; the waiters behind it keep their turn.
func TestMutexesWaiterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMutexes(t, memory.NewStore())
		held, err := m.Acquire(t.Context(), "jobs")
		require.NoError(t, err)
		shortErr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err := m.Acquire(ctx, "jobs")
			shortErr <- err
		}()
		synctest.Wait()
		long := make(chan *simba.Lease, 1)
		go func() {
			l, err := m.Acquire(t.Context(), "jobs")
			assert.NoError(t, err)
			long <- l
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		err = <-shortErr
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, held.Release(t.Context()))
		l := <-long
		require.NoError(t, l.Release(t.Context()))
	})
}

// After WithLocalHandOvers hand-overs in one tenure, the mutex goes back to the store and
// a contender of another process that was waiting gets it.
func TestMutexesFairnessAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		busy, _ := newMutexes(t, store, simba.WithLocalHandOvers(3))
		other, _ := newMutexes(t, store)
		first, err := busy.Acquire(t.Context(), "jobs")
		require.NoError(t, err)
		otherGot := make(chan *simba.Lease, 1)
		go func() {
			l, err := other.Acquire(t.Context(), "jobs")
			assert.NoError(t, err)
			otherGot <- l
		}()
		synctest.Wait() // the other process waits on the store
		// The busy process keeps a local queue full.
		var served atomic.Int32
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					l, err := busy.Acquire(ctx, "jobs")
					cancel()
					if err != nil {
						return
					}
					served.Add(1)
					_ = l.Release(t.Context())
				}
			})
		}
		synctest.Wait()
		require.NoError(t, first.Release(t.Context()))
		l := <-otherGot
		assert.LessOrEqual(t, served.Load(), int32(3), "the other process got the mutex after at most 3 local hand-overs")
		assert.Greater(t, l.Token(), first.Token())
		close(stop)
		require.NoError(t, l.Release(t.Context()))
		wg.Wait()
	})
}

// When the store says nobody else waits, the queue keeps the mutex past
// WithLocalHandOvers: no give-back, and no store call but the one question per round.
func TestMutexesKeepsTheMutexWhenAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, b := newMutexes(t, memory.NewStore(), simba.WithLocalHandOvers(2))
		first, err := m.Acquire(t.Context(), "jobs")
		require.NoError(t, err)
		const waiters = 7
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				l, err := m.Acquire(t.Context(), "jobs")
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, first.Token(), l.Token(), "one tenure throughout")
				assert.NoError(t, l.Release(t.Context()))
			})
			synctest.Wait()
		}
		require.NoError(t, first.Release(t.Context()))
		wg.Wait()
		synctest.Wait()
		assert.Equal(t, 1, b.count(opAcquire), "one store acquisition for %d holders", waiters+1)
		assert.Equal(t, 1, b.count(opRelease), "one store release, when the queue emptied")
	})
}

// Holds are reentrant per holder and counted; misuse is an error.
func TestMutexesReentrantHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMutexes(t, memory.NewStore())
		ctx := t.Context()
		a1, err := m.AcquireAs(ctx, "accounts", "request-1")
		require.NoError(t, err)
		a2, err := m.AcquireAs(ctx, "accounts", "request-1")
		require.NoError(t, err, "the holder acquires again without waiting")
		assert.Equal(t, a1.Token(), a2.Token())

		got := make(chan *simba.Lease, 1)
		go func() {
			l, err := m.AcquireAs(ctx, "accounts", "request-2")
			assert.NoError(t, err)
			got <- l
		}()
		synctest.Wait()
		require.NoError(t, a2.Release(ctx))
		synctest.Wait()
		assert.Empty(t, got, "one hold is left: request-2 still waits")
		assert.NoError(t, a1.Context().Err())

		assert.ErrorIs(t, m.ReleaseAs(ctx, "accounts", "request-2"), simba.ErrNotOwner, "releasing someone else's hold")
		require.NoError(t, m.ReleaseAs(ctx, "accounts", "request-1"))
		assert.ErrorIs(t, m.ReleaseAs(ctx, "accounts", "request-1"), simba.ErrNotOwner, "releasing more than acquired")
		assert.ErrorIs(t, a1.Release(ctx), simba.ErrNotOwner, "the hold ReleaseAs gave back is released")
		assert.ErrorIs(t, a1.Context().Err(), context.Canceled)

		b := <-got
		require.NoError(t, b.Release(ctx))
		assert.ErrorIs(t, b.Release(ctx), simba.ErrNotOwner, "double release")
		_, err = m.AcquireAs(ctx, "accounts", " ")
		assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	})
}

// Waiters of one holder queued behind another holder are all served together.
func TestMutexesReentrantWaitersGrantedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMutexes(t, memory.NewStore())
		held, err := m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		got := make(chan *simba.Lease, 2)
		for range 2 {
			go func() {
				l, err := m.AcquireAs(t.Context(), "m", "job-7")
				assert.NoError(t, err)
				got <- l
			}()
		}
		synctest.Wait()
		require.NoError(t, held.Release(t.Context()))
		l1, l2 := <-got, <-got
		require.NoError(t, l1.Release(t.Context()))
		assert.NoError(t, l2.Context().Err(), "the other hold is still live")
		require.NoError(t, l2.Release(t.Context()))
	})
}

// When the tenure is lost, the holder's context ends with ErrOwnershipLost and Release
// reports it; the next holder gets the next tenure and its token.
func TestMutexesTenureLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		mb, err := memory.New(store)
		require.NoError(t, err)
		m, err := simba.NewMutexes(mb, simba.WithTTL(3*time.Second), simba.WithTransition(time.Second))
		require.NoError(t, err)
		l, err := m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		require.NoError(t, mb.Close()) // the store becomes unreachable
		<-l.Done()
		assert.ErrorIs(t, context.Cause(l.Context()), simba.ErrOwnershipLost)
		assert.ErrorIs(t, l.Release(t.Context()), simba.ErrOwnershipLost)
		require.NoError(t, m.Close())
		assert.Zero(t, m.Len())
	})
}

func TestMutexesTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		m, _ := newMutexes(t, store)
		other, _ := newMutexes(t, store)
		l, err := m.TryAcquire(t.Context(), "m")
		require.NoError(t, err)
		_, err = m.TryAcquire(t.Context(), "m")
		assert.ErrorIs(t, err, simba.ErrNotAcquired, "held by another holder of this process")
		_, err = other.TryAcquire(t.Context(), "m")
		assert.ErrorIs(t, err, simba.ErrNotAcquired, "held by another process")
		require.NoError(t, l.Release(t.Context()))
		synctest.Wait()
		l2, err := other.TryAcquire(t.Context(), "m")
		require.NoError(t, err)
		assert.Greater(t, l2.Token(), l.Token())
		require.NoError(t, l2.Release(t.Context()))
		assert.Zero(t, m.Len())
		assert.Zero(t, other.Len())
	})
}

func TestMutexesClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMutexes(t, memory.NewStore())
		held, err := m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		waitErr := make(chan error, 1)
		go func() {
			_, err := m.Acquire(t.Context(), "m")
			waitErr <- err
		}()
		synctest.Wait()
		require.NoError(t, m.Close())
		assert.ErrorIs(t, <-waitErr, simba.ErrClosed)
		assert.Error(t, held.Context().Err(), "the holder's context ended")
		_, err = m.Acquire(t.Context(), "m")
		assert.ErrorIs(t, err, simba.ErrClosed)
		assert.NoError(t, held.Release(t.Context()))
		assert.NoError(t, m.Close())
		assert.Zero(t, m.Len())
	})
}

// The registry keeps nothing for names nobody uses any more (Vert.x's lock map never
// shrinks).
func TestMutexesRegistryDropsUnusedNames(t *testing.T) {
	store := memory.NewStore()
	m, _ := newMutexes(t, store)
	ctx := t.Context()
	for i := range 100_000 {
		l, err := m.Acquire(ctx, fmt.Sprintf("name-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	assert.Zero(t, m.Len(), "registry entries left")
	assert.Zero(t, store.Len(), "store records left")
}

func TestMutexesOptions(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	_, err = simba.NewMutexes(b, simba.WithLocalHandOvers(-1))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	m, err := simba.NewMutexes(b)
	require.NoError(t, err)
	_, err = m.Acquire(t.Context(), " bad")
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	var nilCtx context.Context
	_, err = m.Acquire(nilCtx, "m")
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = m.Acquire(cancelled, "m")
	assert.True(t, errors.Is(err, simba.ErrNotAcquired) && errors.Is(err, context.Canceled))
	assert.Zero(t, m.Len())
}

// TestMutexesHoldCostsNoGoroutine: a held mutex keeps no goroutine of its own, so that a
// registry can hold many per-entity mutexes at once (one per held mutex, watching for the
// backend's close, cost 3 KB each before).
func TestMutexesHoldCostsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMutexes(t, memory.NewStore())
		synctest.Wait()
		before := runtime.NumGoroutine()
		const held = 100
		for i := range held {
			lease, err := m.Acquire(t.Context(), fmt.Sprint("entity-", i))
			require.NoError(t, err)
			defer func() { _ = lease.Release(context.Background()) }()
		}
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, held/20, "goroutines left by %d held mutexes", held)
	})
}
