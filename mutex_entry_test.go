package simba_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// The state machine of a Mutexes entry (mutex_entry.go): a test per transition, and the
// liveness findings of issue 12 (finding 5), each of which a mutation build re-introduces.

// twoProcesses is a store shared by a Mutexes registry (this process, its store calls
// breakable) and a Locker of another process.
type twoProcesses struct {
	store *memory.Store
	f     *faultyBackend
	m     *simba.Mutexes
	other *simba.Locker
}

func newTwoProcesses(t *testing.T, opts ...simba.MutexesOption) *twoProcesses {
	t.Helper()
	store := memory.NewStore()
	mine, _ := memory.New(store)
	theirs, _ := memory.New(store)
	f := newFaultyBackend(mine)
	m, err := simba.NewMutexes(f, opts...)
	require.NoError(t, err)
	other, err := simba.NewLocker(theirs, "m")
	require.NoError(t, err)
	return &twoProcesses{store: store, f: f, m: m, other: other}
}

func (p *twoProcesses) close(t *testing.T) {
	t.Helper()
	require.NoError(t, p.m.Close())
	require.NoError(t, p.other.Close())
	assert.Zero(t, p.store.Len(), "nothing left on the store")
}

func (p *twoProcesses) state() string { return simba.MutexState(p.m, "m") }

// acquisition is an Acquire under way on a goroutine of its own.
type acquisition struct {
	done  chan struct{}
	lease *simba.Lease
	err   error
}

func acquireAsync(ctx context.Context, acquire func(context.Context) (*simba.Lease, error)) *acquisition {
	a := &acquisition{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.lease, a.err = acquire(ctx)
	}()
	return a
}

func (a *acquisition) finished() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// wait waits for the acquisition, for a minute at most (of the bubble's time: a test in
// which a waiter is stranded fails instead of running its renewals forever).
func (a *acquisition) wait(t *testing.T) *simba.Lease {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		t.Fatal("not acquired within a minute")
	}
	require.NoError(t, a.err)
	return a.lease
}

func acquireM(m *simba.Mutexes) func(context.Context) (*simba.Lease, error) {
	return func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") }
}

// idle -> starting -> owning -> stopping -> idle: the free mutex, held and released.
func TestEntryOwnsAFreeMutexAndLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		assert.Equal(t, "", p.state())
		p.f.stall(opStart)
		a := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		assert.Equal(t, "starting", p.state())
		p.f.unstall(opStart)
		lease := a.wait(t)
		assert.Equal(t, "owning", p.state())
		p.f.stall(opRelease)
		released := make(chan error, 1)
		go func() { released <- lease.Release(t.Context()) }()
		synctest.Wait()
		assert.Equal(t, "stopping", p.state())
		p.f.unstall(opRelease)
		require.NoError(t, <-released)
		assert.Equal(t, "", p.state(), "the entry left the registry")
		p.close(t)
	})
}

// starting -> waiting -> owning: another process holds the mutex, then releases it.
func TestEntryWaitsForAnotherProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		theirs, err := p.other.Acquire(t.Context())
		require.NoError(t, err)
		a := acquireAsync(t.Context(), acquireM(p.m))
		time.Sleep(time.Minute)
		assert.Equal(t, "waiting", p.state())
		assert.False(t, a.finished())
		require.NoError(t, theirs.Release(t.Context()))
		lease := a.wait(t)
		assert.Equal(t, "owning", p.state())
		assert.Greater(t, lease.Token(), theirs.Token())
		require.NoError(t, lease.Release(t.Context()))
		p.close(t)
	})
}

// starting -> backingOff -> idle -> starting -> owning: the store refuses the start-up
// while an Acquire waits, then comes back; starting -> idle when only a TryAcquire asked.
func TestEntryBacksOffWhileTheStoreIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		p.f.fail(opStart, errRefused)
		_, err := p.m.TryAcquire(t.Context(), "m")
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		assert.ErrorIs(t, err, errRefused)
		assert.Equal(t, "", p.state(), "starting -> idle: nobody waits, the entry left")

		a := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		assert.Equal(t, "backing off", p.state())
		time.Sleep(10 * time.Second)
		assert.False(t, a.finished())
		p.f.fail(opStart, nil)
		lease := a.wait(t)
		assert.Equal(t, "owning", p.state())
		require.NoError(t, lease.Release(t.Context()))
		p.close(t)
	})
}

// owning -> waiting: the tenure is lost (the store stops answering, the local TTL end
// passes); the holder's lease ends, and the entry contends again.
func TestEntryLosesItsTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		lease, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		p.f.fail(opAcquire, errRefused)
		<-lease.Done()
		assert.ErrorIs(t, context.Cause(lease.Context()), simba.ErrOwnershipLost)
		synctest.Wait()
		assert.Equal(t, "waiting", p.state())
		p.f.fail(opAcquire, nil)
		err = lease.Release(t.Context())
		assert.ErrorIs(t, err, simba.ErrOwnershipLost)
		p.close(t)
	})
}

// owning -> deciding -> owning: at the hand-over limit the store says nobody else waits,
// and local hand-overs go on.
func TestEntryKeepsTheMutexWhenNobodyElseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t, simba.WithLocalHandOvers(1))
		first, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		second := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait() // queued before the third
		third := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		require.NoError(t, first.Release(t.Context())) // the first hand-over
		l2 := second.wait(t)
		p.f.stall(opWaiters)
		released := make(chan error, 1)
		go func() { released <- l2.Release(t.Context()) }() // the limit: ask the store
		synctest.Wait()
		assert.Equal(t, "deciding", p.state())
		assert.False(t, third.finished(), "no hand-over while the store is asked")
		p.f.unstall(opWaiters)
		l3 := third.wait(t)
		require.NoError(t, <-released)
		assert.Equal(t, "owning", p.state())
		assert.Equal(t, first.Token(), l3.Token(), "the same tenure")
		require.NoError(t, l3.Release(t.Context()))
		p.close(t)
	})
}

// owning -> deciding -> stopping -> idle -> starting: another process waits, so the mutex
// goes back to the store; the local waiter then waits for its turn after the other's.
// While the tenure is being given back, nobody is granted it (finding 5: a grant of an
// ending tenure).
func TestEntryGivesTheMutexBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t, simba.WithLocalHandOvers(0))
		first, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		theirs := acquireAsync(t.Context(), p.other.Acquire)
		second := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		p.f.stall(opRelease)
		released := make(chan error, 1)
		go func() { released <- first.Release(t.Context()) }()
		synctest.Wait()
		assert.Equal(t, "stopping", p.state())
		third := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		assert.False(t, second.finished(), "a waiter was granted the tenure that is being given back")
		assert.False(t, third.finished(), "a new waiter was granted the tenure that is being given back")
		p.f.unstall(opRelease)
		require.NoError(t, <-released)
		l := theirs.wait(t)
		assert.Greater(t, l.Token(), first.Token())
		assert.False(t, second.finished())
		require.NoError(t, l.Release(t.Context()))
		l2 := second.wait(t)
		assert.Greater(t, l2.Token(), l.Token())
		require.NoError(t, l2.Release(t.Context()))
		require.NoError(t, third.wait(t).Release(t.Context()))
		p.close(t)
	})
}

// deciding -> waiting: the tenure ends while the store is being asked.
func TestEntryLosesItsTenureWhileDeciding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t, simba.WithLocalHandOvers(0))
		first, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		second := acquireAsync(t.Context(), acquireM(p.m))
		synctest.Wait()
		p.f.stall(opWaiters)
		p.f.fail(opAcquire, errRefused)
		go func() { _ = first.Release(t.Context()) }()
		synctest.Wait()
		assert.Equal(t, "deciding", p.state())
		time.Sleep(simba.DefaultTTL) // the tenure lapses meanwhile
		synctest.Wait()
		assert.Equal(t, "waiting", p.state())
		p.f.fail(opAcquire, nil)
		p.f.unstall(opWaiters)
		l := second.wait(t)
		assert.Greater(t, l.Token(), first.Token(), "a new tenure")
		require.NoError(t, l.Release(t.Context()))
		p.close(t)
	})
}

// Finding 5: a TryAcquire that took up a new tenure before OnAcquired was delivered
// granted only its own waiter, and OnAcquired then granted nobody: the oldest waiter slept
// forever while the process owned the mutex. Whatever the interleaving, the oldest waiter
// is served.
func TestTryAcquireDoesNotStrandTheOldestWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for i := range 100 {
			p := newTwoProcesses(t)
			theirs, err := p.other.Acquire(t.Context())
			require.NoError(t, err)
			oldest := acquireAsync(t.Context(), acquireM(p.m))
			synctest.Wait()
			require.NoError(t, theirs.Release(t.Context()))
			try := acquireAsync(t.Context(), func(ctx context.Context) (*simba.Lease, error) { return p.m.TryAcquire(ctx, "m") })
			<-try.done
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			select {
			case <-oldest.done:
			case <-ctx.Done():
				t.Fatalf("run %d: the oldest waiter was not served while its process owned the mutex (TryAcquire: %v)", i, try.err)
			}
			cancel()
			require.NoError(t, oldest.err)
			if try.err == nil {
				require.NoError(t, try.lease.Release(t.Context()))
			}
			require.NoError(t, oldest.lease.Release(t.Context()))
			p.close(t)
		}
	})
}

// Finding 5: a reentrant AcquireAs after the tenure was lost dereferenced the missing
// tenure. It is refused with ErrOwnershipLost.
func TestReentrantAcquireAfterLossIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		lease, err := p.m.AcquireAs(t.Context(), "m", "job-1")
		require.NoError(t, err)
		p.f.fail(opAcquire, errRefused)
		<-lease.Done()
		synctest.Wait()
		again, err := p.m.AcquireAs(t.Context(), "m", "job-1")
		assert.Nil(t, again)
		assert.ErrorIs(t, err, simba.ErrOwnershipLost)
		assert.ErrorIs(t, err, simba.ErrNotAcquired)
		p.f.fail(opAcquire, nil)
		assert.ErrorIs(t, lease.Release(t.Context()), simba.ErrOwnershipLost)
		p.close(t)
	})
}

// Finding 5: Close returned while another goroutine was stopping the same mutex's
// contender; the store still named the owner afterwards.
func TestMutexesCloseWaitsForStopsUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		lease, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		p.f.stall(opRelease)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err = lease.Release(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "Release keeps its deadline")
		closed := make(chan error, 1)
		go func() { closed <- p.m.Close() }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while the release was under way")
		default:
		}
		p.f.unstall(opRelease)
		require.NoError(t, <-closed)
		assert.Zero(t, p.store.Len(), "the store no longer names the owner")
		require.NoError(t, p.other.Close())
	})
}

// Finding 5: a TryAcquire that came while the contender was being stopped failed
// although the mutex was free. It waits for the stop and makes its attempt.
func TestTryAcquireWaitsForAStopUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTwoProcesses(t)
		lease, err := p.m.Acquire(t.Context(), "m")
		require.NoError(t, err)
		p.f.stall(opRelease)
		go func() { _ = lease.Release(t.Context()) }()
		synctest.Wait()
		require.Equal(t, "stopping", p.state())
		try := acquireAsync(t.Context(), func(ctx context.Context) (*simba.Lease, error) { return p.m.TryAcquire(ctx, "m") })
		time.Sleep(time.Second)
		p.f.unstall(opRelease)
		next := try.wait(t)
		assert.Greater(t, next.Token(), lease.Token())
		require.NoError(t, next.Release(t.Context()))
		p.close(t)
	})
}
