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

// Close while an acquisition waits for the store (found by the simulation, seed 20450):
// the acquisition must end with ErrClosed, not hand out a lease that Close then ends under
// its holder. Close documents that it ends an acquisition under way.
func TestCloseDuringAcquisitionHandsOutNoLease(t *testing.T) {
	type acquirer struct {
		name  string
		open  func(b simba.Backend) (acquire func(context.Context) (*simba.Lease, error), close func() error)
		stall string
	}
	locker := func(once bool) func(b simba.Backend) (func(context.Context) (*simba.Lease, error), func() error) {
		return func(b simba.Backend) (func(context.Context) (*simba.Lease, error), func() error) {
			l, err := simba.NewLocker(b, "m")
			require.NoError(t, err)
			if once {
				return l.TryAcquire, l.Close
			}
			return l.Acquire, l.Close
		}
	}
	mutexes := func(once bool) func(b simba.Backend) (func(context.Context) (*simba.Lease, error), func() error) {
		return func(b simba.Backend) (func(context.Context) (*simba.Lease, error), func() error) {
			m, err := simba.NewMutexes(b)
			require.NoError(t, err)
			acquire := func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") }
			if once {
				acquire = func(ctx context.Context) (*simba.Lease, error) { return m.TryAcquire(ctx, "m") }
			}
			return acquire, m.Close
		}
	}
	var cases []acquirer
	for _, stall := range []string{opStart, opAcquire} {
		cases = append(cases,
			acquirer{"Locker.Acquire", locker(false), stall},
			acquirer{"Locker.TryAcquire", locker(true), stall},
			acquirer{"Mutexes.Acquire", mutexes(false), stall},
			acquirer{"Mutexes.TryAcquire", mutexes(true), stall},
		)
	}
	for _, tc := range cases {
		for _, ctxKind := range []string{"background", "cancellable"} {
			t.Run(tc.name+"/"+tc.stall+"/"+ctxKind, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					_, f := newFaultyStore()
					acquire, closeFn := tc.open(f)
					ctx := context.Background()
					if ctxKind == "cancellable" {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						defer cancel()
					}
					f.stall(tc.stall)
					type result struct {
						lease *simba.Lease
						err   error
					}
					got := make(chan result, 1)
					go func() {
						lease, err := acquire(ctx)
						got <- result{lease, err}
					}()
					synctest.Wait() // the acquisition waits for the stalled store
					closed := make(chan error, 1)
					go func() { closed <- closeFn() }()
					synctest.Wait() // Close has begun, and waits for the acquisition
					f.unstall(tc.stall)
					r := <-got
					require.NoError(t, <-closed)
					if r.err == nil {
						assert.NoError(t, context.Cause(r.lease.Context()),
							"Close began before the acquisition ended, yet it handed out a lease that Close then ended")
						return
					}
					assert.ErrorIs(t, r.err, simba.ErrClosed)
				})
			})
		}
	}
}

// Close while Acquire waits to retry a failed start-up: the acquisition ends with
// ErrClosed at once, not when its backoff would have retried.
func TestCloseEndsAnAcquisitionWaitingToRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		l, err := simba.NewLocker(f, "m")
		require.NoError(t, err)
		f.fail(opStart, errors.New("connection refused"))
		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(context.Background())
			got <- err
		}()
		synctest.Wait() // the start-up failed; the acquisition waits to retry
		require.Equal(t, 1, f.count(opStart))
		began := time.Now()
		require.NoError(t, l.Close())
		synctest.Wait()
		select {
		case err := <-got:
			assert.ErrorIs(t, err, simba.ErrClosed)
			assert.Zero(t, time.Since(began), "the acquisition ended when Close returned")
		default:
			t.Fatal("Close returned, and the acquisition still waits to retry its start-up")
		}
	})
}

// A closed backend is no store outage to wait out: Mutexes.Acquire retried its start-up
// until the caller's context ended (forever, with a context that cannot end), where
// Locker.Acquire fails at once.
func TestAcquireOnAClosedBackendFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := memory.New(memory.NewStore())
		require.NoError(t, err)
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		m, err := simba.NewMutexes(b)
		require.NoError(t, err)
		require.NoError(t, b.Close())
		for name, acquire := range map[string]func(context.Context) (*simba.Lease, error){
			"Locker.Acquire":  l.Acquire,
			"Mutexes.Acquire": func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") },
		} {
			began := time.Now()
			got := make(chan error, 1)
			go func() {
				_, err := acquire(context.Background())
				got <- err
			}()
			select {
			case err := <-got:
				assert.ErrorIs(t, err, simba.ErrClosed, name)
				assert.Zero(t, time.Since(began), name)
			case <-time.After(time.Minute):
				t.Errorf("%s: still retrying a closed backend after a minute", name)
			}
		}
		require.NoError(t, l.Close())
		require.NoError(t, m.Close())
	})
}

// A Locker that waits for its turn when its backend is closed: its attempts can only fail
// from then on, and the acquisition ended only with its context (never, with one that
// cannot end), saying nothing of why.
func TestWaitingWhenTheBackendClosesFailsAtOnce(t *testing.T) {
	for _, kind := range []string{"Locker", "Mutexes"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				owner, err := memory.New(store)
				require.NoError(t, err)
				a, err := simba.NewLocker(owner, "m")
				require.NoError(t, err)
				held, err := a.Acquire(t.Context())
				require.NoError(t, err)
				b, err := memory.New(store)
				require.NoError(t, err)
				var (
					acquire func(context.Context) (*simba.Lease, error)
					closeFn func() error
				)
				if kind == "Locker" {
					l, err := simba.NewLocker(b, "m")
					require.NoError(t, err)
					acquire, closeFn = l.Acquire, l.Close
				} else {
					m, err := simba.NewMutexes(b)
					require.NoError(t, err)
					acquire = func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") }
					closeFn = m.Close
				}
				waiters := 2 // holders queued in one Mutexes
				if kind == "Locker" {
					waiters = 1 // a Locker is one holder
				}
				got := make(chan error, waiters)
				for range waiters {
					go func() {
						_, err := acquire(context.Background())
						got <- err
					}()
				}
				synctest.Wait() // waiting for its turn
				require.NoError(t, b.Close())
				closed := time.Now()
				for range waiters {
					select {
					case err := <-got:
						assert.Zero(t, time.Since(closed), "the acquisition ended when its backend closed")
						assert.ErrorIs(t, err, simba.ErrClosed)
						assert.ErrorIs(t, err, simba.ErrNotAcquired)
					case <-time.After(time.Minute):
						t.Error("the acquisition still waits a minute after its backend was closed")
					}
				}
				if err := closeFn(); err != nil {
					assert.ErrorIs(t, err, simba.ErrClosed, "Close may say that the closed backend took no release")
				}
				require.NoError(t, held.Release(t.Context()))
				require.NoError(t, a.Close())
				require.NoError(t, owner.Close())
			})
		})
	}
}

// The backend closes while a waiter's attempt is under way, and the attempt's answer (the
// mutex is held by another) comes after the close: the acquisition ends with ErrClosed,
// not with ErrHeld, as if the answer had undone the close (seen once on a Redis Cluster).
func TestAnAnswerAfterTheBackendClosedKeepsErrClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, fb := newFaultyStore()
		owner, err := memory.New(store)
		require.NoError(t, err)
		a, err := simba.NewLocker(owner, "m")
		require.NoError(t, err)
		held, err := a.Acquire(t.Context())
		require.NoError(t, err)
		l, err := simba.NewLocker(fb, "m")
		require.NoError(t, err)
		fb.stall(opAnswer)
		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(context.Background())
			got <- err
		}()
		synctest.Wait() // the attempt has its answer, held back
		require.Equal(t, 1, fb.count(opAnswer))
		require.NoError(t, fb.Backend.(interface{ Close() error }).Close())
		fb.unstall(opAnswer)
		err = <-got
		assert.ErrorIs(t, err, simba.ErrClosed)
		require.NoError(t, l.Close())
		require.NoError(t, held.Release(t.Context()))
		require.NoError(t, a.Close())
	})
}
