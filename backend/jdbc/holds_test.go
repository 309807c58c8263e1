package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// The hold table's rules that the conformance suite cannot see through simba's timing,
// checked on both dialects by calling the contentions as the service would.

// eachDialect runs test on MariaDB and on PostgreSQL, with a backend maker of each.
func eachDialect(t *testing.T, test func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend)) {
	t.Run("mariadb", func(t *testing.T) { test(t, newBackend) })
	t.Run("postgres", func(t *testing.T) { test(t, newPGBackend) })
}

// holdOf opens a contention of b for hold on name under id, stopped when the test ends.
func holdOf(t *testing.T, b simba.Backend, name, id string, hold backend.Hold, ttl time.Duration) backend.LeaseContention {
	t.Helper()
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: id, TTL: ttl, Transition: ttl / 2,
		Wake: func() {}, Hold: hold})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.LeaseContention)
}

var (
	writeHold = backend.Hold{Kind: backend.RWLock}
	readHold  = backend.Hold{Kind: backend.RWLock, Shared: true}
)

// TestHoldDowngradeKeepsAnEarlierWriterOut: a writer queued while w1 wrote; w1 downgrades
// (a read hold beside its write hold) and gives the write hold back. The queued writer is
// not admitted while the downgrade's reader holds, though it came before that reader
// (Curator's CURATOR-621), nor is a reader queued behind it; both follow in order.
func TestHoldDowngradeKeepsAnEarlierWriterOut(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		w1 := holdOf(t, newB(t), name, "w1", writeHold, 10*time.Second)
		w2 := holdOf(t, newB(t), name, "w2", writeHold, 10*time.Second)
		r := holdOf(t, newB(t), name, "r", readHold, 10*time.Second)
		down := holdOf(t, newB(t), name, "w1-down", backend.Hold{Kind: backend.RWLock, Shared: true, Beside: "w1"}, 10*time.Second)

		first := acquire(t, w1)
		require.Equal(t, "w1", first.Owner)
		assert.Equal(t, "w1", acquire(t, w2).Owner, "the second writer waits for the first")
		assert.Equal(t, "w1", acquire(t, r).Owner, "the reader behind the second writer waits")
		d := acquire(t, down)
		require.Equal(t, "w1-down", d.Owner, "the downgrade reads at once")
		assert.Greater(t, d.Token, first.Token)
		require.NoError(t, w1.Release(t.Context()))

		assert.Equal(t, "w1-down", acquire(t, w2).Owner, "the earlier writer admitted beside the downgrade's reader")
		assert.Equal(t, "w1-down", acquire(t, r).Owner, "a reader admitted ahead of the writer waiting before it")
		require.NoError(t, down.Release(t.Context()))
		second := acquire(t, w2)
		require.Equal(t, "w2", second.Owner)
		assert.Greater(t, second.Token, d.Token)
		assert.Equal(t, "w2", acquire(t, r).Owner)
		require.NoError(t, w2.Release(t.Context()))
		read := acquire(t, r)
		require.Equal(t, "r", read.Owner)
		assert.Greater(t, read.Token, second.Token)
	})
}

// TestHoldPermitCountMismatchRefused: a contender that gives another permit count than the
// semaphore's holders and waiters is refused at once; once nobody holds or waits, a new
// count is taken.
func TestHoldPermitCountMismatchRefused(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		two := holdOf(t, newB(t), name, "two", backend.Hold{Kind: backend.Semaphore, Permits: 2}, 10*time.Second)
		three := holdOf(t, newB(t), name, "three", backend.Hold{Kind: backend.Semaphore, Permits: 3}, 10*time.Second)
		require.Equal(t, "two", acquire(t, two).Owner)
		_, err := three.Acquire(t.Context())
		require.ErrorIs(t, err, simba.ErrRefused)
		assert.ErrorContains(t, err, "has 2 permits, not 3")
		require.NoError(t, two.Release(t.Context()))
		assert.Equal(t, "three", acquire(t, three).Owner, "a new count once nobody holds or waits")
		// Kinds are apart: a read-write lock of the same name is another thing.
		assert.Equal(t, "w", acquire(t, holdOf(t, newB(t), name, "w", writeHold, 10*time.Second)).Owner)
	})
}

// TestHoldDeadWaiterDropped: a waiter that stops asking (its process died) keeps the live
// waiter behind it out only until it could no longer be alive: then the live one is
// admitted.
func TestHoldDeadWaiterDropped(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
		holder := holdOf(t, newB(t), name, "holder", one, 3*time.Second)
		dead := holdOf(t, newB(t), name, "dead", one, 100*time.Millisecond)
		live := holdOf(t, newB(t), name, "live", one, 10*time.Second)
		require.Equal(t, "holder", acquire(t, holder).Owner)
		require.Equal(t, "holder", acquire(t, dead).Owner)
		require.Equal(t, "holder", acquire(t, live).Owner)
		queued := time.Now()
		require.NoError(t, holder.Release(t.Context()))
		// The dead waiter asked last just now: it is ahead, and alive as far as anyone can tell.
		require.Empty(t, acquire(t, live).Owner, "the live waiter admitted ahead of the one before it")
		deadline := time.After(30 * time.Second)
		for {
			if rec := acquire(t, live); rec.Owner == "live" {
				t.Logf("the live waiter admitted %v after the dead one last asked", time.Since(queued))
				return
			}
			select {
			case <-deadline:
				t.Fatal("the live waiter was never admitted past the dead one")
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// TestHoldMissingTableRefused: without the hold table, a semaphore's or read-write lock's
// start is refused, with a message that says how to create the table; CreateTable creates
// it.
func TestHoldMissingTableRefused(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		b := newB(t, jdbc.WithTable("simba_noholds"))
		_, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutexName(t), ContenderID: "c", TTL: time.Second,
			Wake: func() {}, Hold: readHold})
		require.ErrorIs(t, err, simba.ErrRefused)
		assert.ErrorContains(t, err, "simba_noholds_hold")
		assert.ErrorContains(t, err, "CreateTable")
		assert.ErrorContains(t, err, "CREATE TABLE IF NOT EXISTS", "the statement that creates it")
	})
}

// TestHoldDDL: the hold table's statement names the table beside the mutex table.
func TestHoldDDL(t *testing.T) {
	ddl, err := jdbc.HoldDDL(jdbc.WithTable("db.locks"))
	require.NoError(t, err)
	assert.Contains(t, ddl, "CREATE TABLE IF NOT EXISTS `db`.`locks_hold`")
	ddl, err = jdbc.HoldDDL(jdbc.WithDialect(jdbc.Postgres))
	require.NoError(t, err)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "simba_mutex_hold"`)
	_, err = jdbc.HoldDDL(jdbc.WithTable("t234567890123456789012345678901234567890123456789012345678901"))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// TestHoldFreshContentionNewToken: a new contention that finds its ID holding (the
// earlier one's release was lost) begins a new hold with a greater token; the same
// contention's next acquisition renews its hold, token and all.
func TestHoldFreshContentionNewToken(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		b := newB(t)
		first := acquire(t, holdOf(t, b, name, "c", readHold, 10*time.Second))
		again := holdOf(t, b, name, "c", readHold, 10*time.Second)
		second := acquire(t, again)
		require.Equal(t, "c", second.Owner)
		assert.Greater(t, second.Token, first.Token)
		assert.Equal(t, second.Token, acquire(t, again).Token, "a renewal keeps the token")
	})
}

// semaphoreRowLocks are, per dialect, the backend and pool makers and the statement that
// locks a semaphore's name row as a decider does, to hold the store's decisions up.
var semaphoreRowLocks = []struct {
	name string
	newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend
	open func(t testing.TB, params ...string) *sql.DB
	lock string
}{
	{"mariadb", newBackend, openDB, "SELECT 1 FROM simba_mutex_hold WHERE kind = 1 AND name = ? AND holder = '' FOR UPDATE"},
	{"postgres", newPGBackend, openPG, "SELECT 1 FROM simba_mutex_hold WHERE kind = 1 AND name = $1 AND holder = '' FOR UPDATE"},
}

// TestHoldFreshAfterAFailedFirstCall: a new contention that finds its ID holding begins a
// new hold even when its first call failed (the store restarting after the earlier
// contention's release was lost): the call that failed decided nothing, so the next one is
// still the contention's first, and must not renew the earlier hold and its token.
func TestHoldFreshAfterAFailedFirstCall(t *testing.T) {
	for _, d := range semaphoreRowLocks {
		t.Run(d.name, func(t *testing.T) {
			name := mutexName(t)
			b := d.newB(t)
			permit := backend.Hold{Kind: backend.Semaphore, Permits: 1}
			first := acquire(t, holdOf(t, b, name, "c", permit, 10*time.Second))
			again := holdOf(t, b, name, "c", permit, 10*time.Second)

			tx, err := d.open(t).BeginTx(t.Context(), nil) // the store cannot decide meanwhile
			require.NoError(t, err)
			var one int
			require.NoError(t, tx.QueryRowContext(t.Context(), d.lock, name).Scan(&one))
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err = again.Acquire(ctx)
			require.Error(t, err, "an acquisition decided while another session held the name's row")
			require.NoError(t, tx.Rollback())

			second := acquire(t, again)
			require.Equal(t, "c", second.Owner)
			assert.Greater(t, second.Token, first.Token, "the earlier contention's hold renewed, token and all")
		})
	}
}

// TestHoldLockWaitKeepsTheDeadline: while another session holds the name's row locked (a
// decider stalled in its transaction), an acquisition ends by its deadline with an outage,
// not a refusal: the server gives the wait up a little before the deadline, so that the
// connection survives. The next one after the lock is let go decides.
func TestHoldLockWaitKeepsTheDeadline(t *testing.T) {
	for _, d := range semaphoreRowLocks {
		t.Run(d.name, func(t *testing.T) {
			name := mutexName(t)
			c := holdOf(t, d.newB(t), name, "c", backend.Hold{Kind: backend.Semaphore, Permits: 1}, 10*time.Second)
			require.Equal(t, "c", acquire(t, c).Owner)
			tx, err := d.open(t).BeginTx(t.Context(), nil)
			require.NoError(t, err)
			var one int
			require.NoError(t, tx.QueryRowContext(t.Context(), d.lock, name).Scan(&one))

			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err = c.Acquire(ctx)
			require.Error(t, err, "an acquisition decided while another session held the name's row")
			assert.NotErrorIs(t, err, simba.ErrRefused)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "the server gave the lock wait up before the deadline")
			t.Logf("ended with %v", err)

			require.NoError(t, tx.Rollback())
			assert.Equal(t, "c", acquire(t, c).Owner)
		})
	}
}

// TestHoldReleaseWakesTheProcessWaiters: a release asks the backend's other contentions of
// the name to try at once, rather than when the released hold would have lapsed.
func TestHoldReleaseWakesTheProcessWaiters(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name, b := mutexName(t), newB(t)
		one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
		holder := holdOf(t, b, name, "holder", one, 10*time.Second)
		woken := make(chan struct{}, 1)
		c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "waiter", TTL: 10 * time.Second,
			Wake: func() {
				select {
				case woken <- struct{}{}:
				default:
				}
			}, Hold: one})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.StopContend(context.Background()) })
		waiter := c.(backend.LeaseContention)
		require.Equal(t, "holder", acquire(t, holder).Owner)
		require.Equal(t, "holder", acquire(t, waiter).Owner)
		require.NoError(t, holder.Release(t.Context()))
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not woken by the release")
		}
		assert.Equal(t, "waiter", acquire(t, waiter).Owner)
	})
}

// TestHoldPermitsBeyondTheColumn: a permit count the table cannot keep is an invalid
// argument at start, not an error of every acquisition.
func TestHoldPermitsBeyondTheColumn(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		_, err := newB(t).StartContend(t.Context(), backend.Participant{Mutex: mutexName(t), ContenderID: "c",
			TTL: time.Second, Wake: func() {}, Hold: backend.Hold{Kind: backend.Semaphore, Permits: 1 << 31}})
		require.ErrorIs(t, err, simba.ErrInvalidArgument)
	})
}

// TestHoldClockStepForward: the database's clock steps forward by less than a holder's
// lease but more than the margin, so its hold on the store is shorter than it believes.
// Its next answer shows the step: it gives the hold up (no holder in the answer, its row
// gone), the step is reported, and its next acquisition is a new hold, as a mutex's owner.
func TestHoldClockStepForward(t *testing.T) {
	var clock steppedClock
	b, err := jdbc.New(clock.pool(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	name := mutexName(t)
	var logs records
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "a", TTL: 2 * time.Second,
		Transition: time.Second, Wake: func() {}, Logger: slog.New(&logs), Hold: readHold})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	a := c.(backend.LeaseContention)
	first := acquire(t, a)
	require.Equal(t, "a", first.Owner)
	require.Equal(t, first.Token, acquire(t, a).Token, "a renewal, no step")

	clock.step(1500 * time.Millisecond)
	rec := acquire(t, a)
	assert.Empty(t, rec.Owner, "the holder gives the hold up at once")
	assert.Equal(t, uint64(1), b.ClockSteps())
	errs := logs.at(slog.LevelError)
	require.Len(t, errs, 1)
	assert.InDelta(t, 1500, errs[0]["step_ms"], 300)
	var n int
	require.NoError(t, openDB(t).QueryRowContext(t.Context(),
		"SELECT COUNT(*) FROM simba_mutex_hold WHERE kind = 2 AND name = ? AND holder = 'a'", name).Scan(&n))
	assert.Zero(t, n, "released on the store")

	again := acquire(t, a)
	assert.Equal(t, "a", again.Owner)
	assert.Greater(t, again.Token, first.Token, "a new hold")
}

// TestHoldPermitsUnderContention: eight contenders, each on a pool of its own, take and
// give back permits of a semaphore of three as fast as they can. Counted from the answers
// that admit one to the release call that follows, never more than three hold at once,
// no token is handed out twice, and a renewal keeps its hold's token.
func TestHoldPermitsUnderContention(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		const permits, contenders, holds = 3, 8, 6
		name := mutexName(t)
		three := backend.Hold{Kind: backend.Semaphore, Permits: permits}
		var mu sync.Mutex
		holding, most := 0, 0
		tokens := map[uint64]string{}
		var wg sync.WaitGroup
		var errs []error
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		for i := range contenders {
			id := fmt.Sprintf("c%d", i)
			c := holdOf(t, newB(t), name, id, three, 10*time.Second)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				for held := 0; held < holds; {
					rec, err := c.Acquire(ctx)
					if err != nil {
						fail(fmt.Errorf("%s: %w", id, err))
						return
					}
					if rec.Owner != id {
						continue // waiting: try again at once, as a woken waiter would
					}
					mu.Lock()
					holding++
					most = max(most, holding)
					if other, ok := tokens[rec.Token]; ok {
						errs = append(errs, fmt.Errorf("token %d handed to %s and to %s", rec.Token, other, id))
					}
					tokens[rec.Token] = id
					mu.Unlock()
					held++
					// Hold for a round trip: a renewal, which keeps the token.
					renewed, err := c.Acquire(ctx)
					if err == nil && (renewed.Owner != id || renewed.Token != rec.Token) {
						err = fmt.Errorf("renewal answered %q with token %d, not %d", renewed.Owner, renewed.Token, rec.Token)
					}
					mu.Lock()
					holding--
					mu.Unlock()
					if err != nil {
						fail(fmt.Errorf("%s: %w", id, err))
						return
					}
					if err := c.Release(ctx); err != nil {
						fail(fmt.Errorf("%s: %w", id, err))
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			t.Error(err)
		}
		assert.LessOrEqual(t, most, permits, "holders at once")
		assert.Len(t, tokens, contenders*holds)
	})
}

// TestHoldPrivilegeRefusalNamesTheHoldTable: a user that may only read the hold table is
// refused at its first acquisition, with the GRANT on the hold table (not the mutex
// table) as the fix.
func TestHoldPrivilegeRefusalNamesTheHoldTable(t *testing.T) {
	needServer(t)
	rootExec(t, "DROP USER IF EXISTS 'simba_holdro'@'127.0.0.1'; CREATE USER 'simba_holdro'@'127.0.0.1' IDENTIFIED BY 'pw'; "+
		"GRANT SELECT ON simba.simba_mutex_hold TO 'simba_holdro'@'127.0.0.1'")
	t.Cleanup(func() { rootExec(t, "DROP USER IF EXISTS 'simba_holdro'@'127.0.0.1'") })
	b, err := jdbc.New(openDSN(t, fmt.Sprintf("simba_holdro:pw@tcp(%s)/simba?interpolateParams=true", server.Addr())))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	c := holdOf(t, b, mutexName(t), "c", readHold, time.Second)
	_, err = c.Acquire(t.Context())
	require.ErrorIs(t, err, simba.ErrRefused)
	assert.ErrorContains(t, err, "fix: GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex_hold TO the user")
}
