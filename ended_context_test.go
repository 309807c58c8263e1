package simba_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// Calls made with a context that has already ended, and lifecycle calls that race each
// other. Found by an adversarial review of the root package (stop 32): Stop picked at
// random between taking the lifecycle lock and its ended context, so that Lease.Release
// with a cancelled context marked the lease released about half the time while its tenure
// went on renewing, and the Locker could not acquire again until Close.

// A Release whose context has already ended (a deferred Release with the request's
// context) still releases: at once or in the background, never not at all.
func TestReleaseWithAnEndedContextReleases(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			store := memory.NewStore()
			b, _ := memory.New(store)
			l, err := simba.NewLocker(b, "m")
			require.NoError(t, err)
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)
			ended, cancel := context.WithCancel(t.Context())
			cancel()
			err = lease.Release(ended)
			if err != nil {
				assert.ErrorIs(t, err, context.Canceled)
			}
			assert.Error(t, lease.Context().Err(), "the lease ended")
			synctest.Wait()
			assert.Zero(t, store.Len(), "the tenure was released on the store (Release said %v)", err)
			next, err := l.Acquire(t.Context())
			require.NoError(t, err, "the locker acquires again")
			require.NoError(t, next.Release(t.Context()))
			require.NoError(t, l.Close())
		})
	}
}

// Stop with an ended context stops, every time, and says that the release may still be
// under way; it used to leave the service running about half the time.
func TestStopWithAnEndedContextStops(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			store := memory.NewStore()
			b, _ := memory.New(store)
			svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"})
			require.NoError(t, err)
			require.NoError(t, svc.Start(t.Context()))
			synctest.Wait()
			require.True(t, svc.IsOwner())
			ended, cancel := context.WithCancel(t.Context())
			cancel()
			err = svc.Stop(ended)
			assert.Equal(t, simba.StatusInitial, svc.Status(), "Stop said %v", err)
			synctest.Wait()
			assert.Zero(t, store.Len(), "the release reached the store")
			require.NoError(t, svc.Close())
		})
	}
}

// Run stops the service once its context ends, and returns within the call timeout even
// when the store never answers the release (ignoring the deadline it was given): the
// release goes on in the background, and Close waits for it. Run used to wait for the
// store, so that an errgroup shutting down hung with it (adversarial review, stop 32).
func TestRunReturnsWhenTheReleaseStalls(t *testing.T) {
	for _, kind := range []string{"service", "scheduler"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, f := newFaultyStore()
				leading := make(chan struct{}, 1)
				lead := func() {
					select {
					case leading <- struct{}{}:
					default:
					}
				}
				var run func(context.Context) error
				var closeIt func() error
				if kind == "service" {
					svc, err := simba.NewService(f, simba.ContenderFuncs{MutexName: "m", ID: "c",
						Acquired: func(context.Context, simba.State) { lead() }})
					require.NoError(t, err)
					run, closeIt = svc.Run, svc.Close
				} else {
					s, err := simba.NewScheduler(f, "m", simba.Schedule{Period: time.Second},
						func(context.Context, simba.Owner) { lead() })
					require.NoError(t, err)
					run, closeIt = s.Run, s.Close
				}
				ctx, cancel := context.WithCancel(t.Context())
				ran := make(chan error, 1)
				go func() { ran <- run(ctx) }()
				<-leading
				f.stall(opRelease)
				cancel()
				ended := time.Now()
				err := <-ran
				assert.LessOrEqual(t, time.Since(ended), simba.DefaultTTL/4, "Run returned later than the call timeout after its context ended")
				assert.ErrorIs(t, err, context.DeadlineExceeded, "Run says the release is still under way")
				closed := make(chan error, 1)
				go func() { closed <- closeIt() }()
				synctest.Wait()
				select {
				case <-closed:
					t.Error("Close returned while the release was under way")
				default:
				}
				f.unstall(opRelease)
				require.NoError(t, <-closed)
				// The release's own call timeout has passed: the lease lapses instead.
				time.Sleep(simba.DefaultTTL + simba.DefaultTransition)
				o, err := simba.Lookup(t.Context(), f, "m")
				require.NoError(t, err)
				assert.True(t, o.IsZero(), "the lease lapsed: %+v", o)
			})
		})
	}
}

// A callback that closes (or stops) its own service while a Stop or Close from outside is
// delivering that very callback: the callback's call returns at once, as it does when
// nothing else is stopping the service, and both end. It used to deadlock, the outer call
// waiting for the callback and the callback for the outer call's lifecycle lock.
func TestCloseFromACallbackWhileStopDeliversIt(t *testing.T) {
	for _, tc := range []struct{ name, callback, inner, outer string }{
		{"OnReleased closes during Stop", "released", "Close", "Stop"},
		{"OnReleased closes during Close", "released", "Close", "Close"},
		{"OnAcquired closes during Stop", "acquired", "Close", "Stop"},
		{"OnAcquired stops during Close", "acquired", "Stop", "Close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := memory.New(memory.NewStore())
			var svc *simba.Service
			inner := make(chan error, 1)
			inAcquired, proceed := make(chan struct{}), make(chan struct{})
			call := func() {
				if tc.inner == "Stop" {
					inner <- svc.Stop(context.Background())
				} else {
					inner <- svc.Close()
				}
			}
			svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: tc.callback + tc.inner + tc.outer, ID: "c",
				Acquired: func(context.Context, simba.State) {
					close(inAcquired)
					if tc.callback == "acquired" {
						<-proceed
						call()
					}
				},
				Released: func(simba.State) {
					if tc.callback == "released" {
						call()
					}
				}})
			require.NoError(t, err)
			require.NoError(t, svc.Start(t.Context()))
			<-inAcquired
			outer := make(chan error, 1)
			go func() {
				if tc.outer == "Stop" {
					outer <- svc.Stop(context.Background())
				} else {
					outer <- svc.Close()
				}
			}()
			if tc.callback == "acquired" {
				require.Eventually(t, func() bool { return svc.Status() != simba.StatusRunning }, 10*time.Second, time.Millisecond)
				close(proceed)
			}
			for _, ch := range []chan error{inner, outer} {
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					t.Fatal("deadlock: the callback's call or the outer call has not returned")
				}
			}
			require.NoError(t, svc.Close())
			assert.Equal(t, simba.StatusInitial, svc.Status())
		})
	}
}

// Close is idempotent, also when called twice at once on a Locker that holds a lease: one
// of the two used to return ErrClosed now and then, the other having closed the service
// under the first one's release.
func TestConcurrentLockerClosesSucceed(t *testing.T) {
	for range 500 {
		store := memory.NewStore()
		b, _ := memory.New(store)
		l, err := simba.NewLocker(b, "m")
		require.NoError(t, err)
		_, err = l.Acquire(t.Context())
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = l.Close() })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Zero(t, store.Len())
	}
}
