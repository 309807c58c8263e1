package jdbc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/goroutine"
)

// Issue 35: a Locker made its start-up, first attempt and release on goroutines of its
// own, to keep a deadline that a backend call might not: two goroutine hand-offs per
// uncontended cycle. The backend keeps its calls' deadlines (backend.DeadlineKeeper), so
// the caller's goroutine makes them.

// TestKeepsDeadlines: the backend promises to keep its calls' deadlines.
func TestKeepsDeadlines(t *testing.T) {
	var b simba.Backend = newPGBackend(t)
	keeper, ok := b.(backend.DeadlineKeeper)
	require.True(t, ok, "the backend does not implement backend.DeadlineKeeper")
	assert.True(t, keeper.KeepsDeadlines())
}

// TestUncontendedCycleOnTheCallersGoroutine: with a context that can end, as an
// application's has, every statement of an uncontended Locker cycle is made on the
// caller's goroutine.
func TestUncontendedCycleOnTheCallersGoroutine(t *testing.T) {
	for _, store := range []struct{ name, driver string }{{"mariadb", "mysql"}, {"postgres", "pgx"}} {
		t.Run(store.name, func(t *testing.T) {
			var s statements
			var b *jdbc.Backend
			var err error
			if store.driver == "pgx" {
				needPostgres(t)
				b, err = jdbc.New(countedDB(t, "pgx", pgServer.DSN(), &s), jdbc.WithDialect(jdbc.Postgres))
			} else {
				needServer(t)
				b, err = jdbc.New(countedDB(t, "mysql", server.DSN(), &s))
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			l, err := simba.NewLocker(b, mutexName(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cycle := func() {
				lease, err := l.Acquire(ctx)
				require.NoError(t, err)
				require.NoError(t, lease.Release(ctx))
			}
			cycle() // the row's first use creates it, and the table is checked
			s.recordCallers()
			for range 10 {
				cycle()
			}
			callers := s.takeCallers()
			me := goroutine.ID()
			require.NotZero(t, me)
			elsewhere, others := 0, 0
			for g, n := range callers {
				if g != me {
					elsewhere, others = elsewhere+n, others+1
				}
			}
			assert.NotZero(t, callers[me], "no statement was made on the caller's goroutine")
			assert.Zero(t, elsewhere, "of %d statements, %d were made on %d goroutines other than the caller's",
				callers[me]+elsewhere, elsewhere, others)
		})
	}
}

// stallBound is how long a call with a short deadline may take against a stopped server
// before the test says it waited for something else: well beyond the deadline, below the
// backend's one second for interrupting a statement from another connection, and far
// below the Locker's call timeout.
const stallBound = 900 * time.Millisecond

// shortDeadline is the deadline of the calls made while the server is stopped.
const shortDeadline = 200 * time.Millisecond

// withinDeadline runs call with a context that ends after shortDeadline and checks that it
// returns by stallBound; with failing, that it returns an error.
func withinDeadline(t *testing.T, what string, failing bool, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), shortDeadline)
	defer cancel()
	began := time.Now()
	err := call(ctx)
	took := time.Since(began)
	t.Logf("%s returned after %v: %v", what, took, err)
	if failing {
		assert.Error(t, err, "%s answered a stopped server", what)
	}
	assert.Less(t, took, stallBound, "%s did not return by its deadline", what)
}

// TestCallsKeepDeadlineOnAStoppedServer: with the server stopped (SIGSTOP), every call of
// the backend and of its contentions returns by its context's deadline: the start of a
// backend that has not checked the table yet, an acquisition, a release, the stop of an
// owner and of a waiter (whose wait for the named lock has to be ended), and a Locker's
// acquisition and release, which make their calls on the caller's goroutine.
func TestCallsKeepDeadlineOnAStoppedServer(t *testing.T) {
	for _, store := range []string{"mariadb", "postgres"} {
		t.Run(store, func(t *testing.T) {
			open := newBackend
			var pause, resume func() error
			if store == "postgres" {
				open = func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend { return newPGBackend(t, opts...) }
				needPostgres(t)
				pause, resume = pgServer.Pause, pgServer.Resume
			} else {
				needServer(t)
				pause, resume = server.Pause, server.Resume
			}
			ctx := t.Context()
			mutex := mutexName(t)
			p := func(id string) backend.Participant {
				return backend.Participant{Mutex: mutex, ContenderID: id, TTL: 10 * time.Second, Transition: 6 * time.Second,
					Wake: func() {}, Closed: func() {}}
			}
			start := func(b *jdbc.Backend, id string) backend.LeaseContention {
				c, err := b.StartContend(ctx, p(id))
				require.NoError(t, err)
				return c.(backend.LeaseContention)
			}
			owner, waiter := start(open(t), "owner"), start(open(t), "waiter")
			rec, err := owner.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, "owner", rec.Owner)
			rec, err = waiter.Acquire(ctx) // finds the owner, and waits for the named lock
			require.NoError(t, err)
			require.Equal(t, "owner", rec.Owner)
			l, err := simba.NewLocker(open(t), mutex+"-locker", simba.WithTTL(time.Minute), simba.WithCallTimeout(30*time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			lease, err := l.Acquire(ctx)
			require.NoError(t, err)
			fresh, other := open(t), start(open(t), "other")
			// A semaphore of one permit, held, and a waiter parked on the server.
			sem := backend.Hold{Kind: backend.Semaphore, Permits: 1}
			holder, _ := wokenHold(t, open(t), mutex+"-sem", "holder", sem)
			rec, err = holder.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, "holder", rec.Owner)
			parkedOn := open(t)
			parked, _ := wokenHold(t, parkedOn, mutex+"-sem", "parked", sem)
			_, err = parked.Acquire(ctx)
			require.NoError(t, err)
			awaitParked(t, parkedOn, mutex+"-sem")

			require.NoError(t, pause())
			resumed := false
			t.Cleanup(func() {
				if !resumed {
					_ = resume()
				}
			})
			withinDeadline(t, "StartContend (the table unchecked)", true, func(ctx context.Context) error {
				c, err := fresh.StartContend(ctx, p("fresh"))
				if err == nil {
					_ = c.StopContend(ctx)
				}
				return err
			})
			withinDeadline(t, "Acquire", true, func(ctx context.Context) error { _, err := other.Acquire(ctx); return err })
			withinDeadline(t, "Release", true, owner.Release)
			withinDeadline(t, "StopContend of the owner", false, owner.StopContend)
			withinDeadline(t, "StopContend of a waiter", false, waiter.StopContend)
			withinDeadline(t, "StopContend", false, other.StopContend)
			withinDeadline(t, "StopContend of a parked semaphore waiter", false, parked.StopContend)
			withinDeadline(t, "Lease.Release", true, lease.Release)
			withinDeadline(t, "Locker.TryAcquire", true, func(ctx context.Context) error { _, err := l.TryAcquire(ctx); return err })
			resumed = true
			require.NoError(t, resume())
		})
	}
}
