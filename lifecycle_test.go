package simba_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// Issue 12, finding 6: smaller breaks of the lifecycle contract.

// Run returns when the service is stopped or closed elsewhere, instead of blocking until
// its context ends.
func TestRunReturnsWhenStoppedElsewhere(t *testing.T) {
	for _, how := range []string{"Stop", "Close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, _ := memory.New(memory.NewStore())
				svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"})
				require.NoError(t, err)
				ran := make(chan error, 1)
				go func() { ran <- svc.Run(t.Context()) }()
				synctest.Wait()
				require.Equal(t, simba.StatusRunning, svc.Status())
				if how == "Stop" {
					require.NoError(t, svc.Stop(t.Context()))
				} else {
					require.NoError(t, svc.Close())
				}
				synctest.Wait()
				select {
				case err := <-ran:
					assert.NoError(t, err)
				default:
					t.Fatal("Run still blocks after " + how)
				}
				require.NoError(t, svc.Close())
			})
		})
	}
}

// Stop and Close called from inside a callback of the same service (or a Scheduler's
// work) used to wait for that very callback: a deadlock. They now end belief at once and
// return; the stop completes when the callback has returned.
func TestStopFromInsideCallbacks(t *testing.T) {
	cases := map[string]func(t *testing.T, b simba.Backend) (start func(context.Context) error, stopped func() bool){
		"scheduler work": func(t *testing.T, b simba.Backend) (func(context.Context) error, func() bool) {
			var s *simba.Scheduler
			s, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, func(ctx context.Context, _ simba.Owner) {
				assert.NoError(t, s.Stop(ctx))
				assert.Error(t, ctx.Err(), "belief ended at once")
			})
			require.NoError(t, err)
			return s.Start, func() bool { return s.Status() == simba.StatusInitial }
		},
		"scheduler work closing": func(t *testing.T, b simba.Backend) (func(context.Context) error, func() bool) {
			var s *simba.Scheduler
			s, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, func(context.Context, simba.Owner) {
				assert.NoError(t, s.Close())
			})
			require.NoError(t, err)
			return s.Start, func() bool {
				return s.Status() == simba.StatusInitial && errors.Is(s.Start(t.Context()), simba.ErrClosed)
			}
		},
		"contender callback": func(t *testing.T, b simba.Backend) (func(context.Context) error, func() bool) {
			var svc *simba.Service
			svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c",
				Acquired: func(ctx context.Context, _ simba.State) { assert.NoError(t, svc.Stop(ctx)) }})
			require.NoError(t, err)
			return svc.Start, func() bool { return svc.Status() == simba.StatusInitial }
		},
		"retriever callback": func(t *testing.T, b simba.Backend) (func(context.Context) error, func() bool) {
			holder, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "holder"})
			require.NoError(t, err)
			require.NoError(t, holder.Start(t.Context()))
			t.Cleanup(func() { _ = holder.Close() })
			var svc *simba.Service
			svc, err = simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: "m",
				Notify: func(simba.State) { assert.NoError(t, svc.Stop(context.Background())) }})
			require.NoError(t, err)
			return svc.Start, func() bool { return svc.Status() == simba.StatusInitial }
		},
	}
	for name, setUp := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, _ := memory.New(memory.NewStore())
				start, stopped := setUp(t, b)
				require.NoError(t, start(t.Context()))
				time.Sleep(5 * time.Second)
				synctest.Wait()
				assert.True(t, stopped(), "the stop called from inside completed")
			})
		})
	}
}

// Errors are one line each, with simba's prefix once and the operation and mutex named
// once, whatever wraps what.
func TestErrorsAreOneLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newFaultyStore()
		var errs []error
		collect := func(err error) {
			t.Helper()
			require.Error(t, err)
			errs = append(errs, err)
		}
		l, _ := simba.NewLocker(f, "m")
		f.fail(opStart, errors.New("simba/store: dial tcp 127.0.0.1:1: connection refused"))
		_, err := l.TryAcquire(t.Context())
		collect(err)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		_, err = l.Acquire(ctx)
		cancel()
		collect(err)
		f.fail(opStart, nil)
		f.hang(opStart, true)
		svc, _ := simba.NewService(f, simba.ContenderFuncs{MutexName: "m", ID: "c"})
		collect(svc.Start(t.Context()))
		f.hang(opStart, false)
		f.fail(opAcquire, errors.New("line one\nline two"))
		_, err = l.TryAcquire(t.Context())
		collect(err)
		f.fail(opAcquire, nil)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		f.fail(opRelease, errors.New("refused"))
		collect(lease.Release(t.Context()))
		collect(lease.Release(t.Context()))
		require.NoError(t, l.Close())
		collect(svc.Stop(t.Context()))

		for _, err := range errs {
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one line: %q", msg)
			assert.LessOrEqual(t, strings.Count(msg, "simba: "), 1, "one prefix: %q", msg)
			assert.LessOrEqual(t, strings.Count(msg, `start "m"`), 1, "the operation named once: %q", msg)
		}
	})
}

// A lifecycle's callbacks begin once its Start has completed. A Scheduler's work that
// called Stop got "not running: status STARTING" when the first acquisition's callback
// ran before Start had set the status to RUNNING (seen once in make test with stress-ng
// beside it). A session store that reports this contender the owner inside StartContend,
// and then gives the callback a second to run before it returns, makes that order certain
// if the callbacks are not held until Start has completed.
func TestCallbacksBeginAfterStart(t *testing.T) {
	for _, name := range []string{"scheduler work", "contender callback"} {
		t.Run(name, func(t *testing.T) {
			ran := make(chan struct{})
			b := reportingInside{ran: ran}
			var status func() simba.Status
			var stop func(context.Context) error
			inside := func(ctx context.Context) {
				defer close(ran)
				assert.Equal(t, simba.StatusRunning, status(), "the callback runs once Start has completed")
				assert.NoError(t, stop(ctx))
			}
			var start func(context.Context) error
			if name == "scheduler work" {
				s, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Hour},
					func(ctx context.Context, _ simba.Owner) { inside(ctx) }, simba.WithContenderID("c"))
				require.NoError(t, err)
				defer s.Close()
				start, stop, status = s.Start, s.Stop, s.Status
			} else {
				svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c",
					Acquired: func(ctx context.Context, _ simba.State) { inside(ctx) }})
				require.NoError(t, err)
				defer svc.Close()
				start, stop, status = svc.Start, svc.Stop, svc.Status
			}
			require.NoError(t, start(t.Context()))
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatal("the callback did not run")
			}
			waitFor(t, func() bool { return status() == simba.StatusInitial }) // the stop from inside completed
		})
	}
}

// reportingInside is a session store that reports its participant the owner inside
// StartContend, then waits up to a second for ran to close before it returns.
type reportingInside struct{ ran <-chan struct{} }

func (b reportingInside) StartContend(_ context.Context, p backend.Participant) (backend.Contention, error) {
	p.Report(backend.Record{Owner: p.ContenderID, Token: 1}, time.Now())
	select {
	case <-b.ran:
	case <-time.After(time.Second):
	}
	return stopsAtOnce{}, nil
}

type stopsAtOnce struct{}

func (stopsAtOnce) StopContend(context.Context) error { return nil }

// A Stop from inside the first Acquired callback got "not running: another Start, Stop or
// Close is under way" when the callback began after Start had let its callbacks go but
// before it had let the lifecycle lock go (TestStopFromInsideCallbacks, once in make test
// with stress-ng beside it). The window is short: repeated, with stress-ng --cpu 2 beside
// it, 6 of 1500 stops failed before the callbacks waited for the unlock, 0 of 1500 after.
func TestStopFromTheFirstCallback(t *testing.T) {
	for range 300 {
		synctest.Test(t, func(t *testing.T) {
			b, err := memory.New(memory.NewStore())
			require.NoError(t, err)
			stopped := make(chan error, 1)
			var svc *simba.Service
			svc, err = simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c",
				Acquired: func(ctx context.Context, _ simba.State) { stopped <- svc.Stop(ctx) }})
			require.NoError(t, err)
			require.NoError(t, svc.Start(t.Context()))
			require.NoError(t, <-stopped, "the stop from inside the first callback")
			synctest.Wait()
			require.NoError(t, svc.Close())
		})
	}
}

// reportingThenTimingOut is a session store whose StartContend reports its participant
// the owner and then gets no further before ctx ends: the store named the contender, but
// the Start timed out.
type reportingThenTimingOut struct{}

func (reportingThenTimingOut) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	p.Report(backend.Record{Owner: p.ContenderID, TTL: time.Minute, Transition: time.Minute, Token: 1}, time.Now())
	<-ctx.Done()
	return nil, ctx.Err()
}

// A Start that fails after the store named the contender leaves no belief behind: an
// OnAcquired it delivers comes with its context ended already, and OnReleased follows.
// (The chaos checker counts such a delivery as no belief: a CI run saw one come 5 ms
// after another process had acquired.)
func TestFailedStartDeliversNoLiveTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			acquired []error // the tenure context's error as each OnAcquired began
			released int
		)
		svc, err := simba.NewService(reportingThenTimingOut{}, simba.ContenderFuncs{MutexName: "m", ID: "c",
			Acquired: func(ctx context.Context, _ simba.State) {
				mu.Lock()
				acquired = append(acquired, ctx.Err())
				mu.Unlock()
			},
			Released: func(simba.State) {
				mu.Lock()
				released++
				mu.Unlock()
			},
		}, simba.WithTTL(time.Second), simba.WithCallTimeout(100*time.Millisecond))
		require.NoError(t, err)
		err = svc.Start(t.Context())
		require.ErrorIs(t, err, simba.ErrTimeout)
		synctest.Wait()
		require.NoError(t, svc.Close())
		mu.Lock()
		defer mu.Unlock()
		for i, e := range acquired {
			assert.Error(t, e, "OnAcquired %d began with a live tenure context", i)
		}
		assert.Equal(t, len(acquired), released, "every OnAcquired is followed by OnReleased")
		// Today the tenure is delivered, ended; were it dropped instead, this test and the
		// chaos checker's rule for late deliveries would have nothing left to guard.
		assert.Len(t, acquired, 1, "the store's report was delivered")
	})
}
