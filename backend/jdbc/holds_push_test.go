package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// The cross-process wake of semaphores and read-write locks: a release in one process
// pushes the hand-over to a waiter in another (two backends on pools of their own).

// holdTTL is long enough that no test below can pass by polling: a waiter told of a hold
// tries again by itself only after holdTTL and half of it (its transition window).
const holdTTL = time.Minute

// pushWait bounds a pushed hand-over in the tests: generous, and far below the polling
// bound of holdTTL.
const pushWait = 15 * time.Second

// awaitParked waits until one of b's contentions of name is parked, failing the test
// after pushWait.
func awaitParked(t testing.TB, b *jdbc.Backend, name string) {
	t.Helper()
	deadline := time.Now().Add(pushWait)
	for b.Parked(name) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no contention of %s parked within %v", name, pushWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// wokenHold opens a contention of b for hold on name under id whose Wake signals the
// returned channel, stopped when the test ends.
func wokenHold(t *testing.T, b simba.Backend, name, id string, hold backend.Hold) (backend.LeaseContention, <-chan struct{}) {
	t.Helper()
	woken := make(chan struct{}, 1)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: id, TTL: holdTTL, Transition: holdTTL / 2,
		Wake: func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		}, Hold: hold})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.LeaseContention), woken
}

// awaitWake waits for a wake on woken, failing the test after pushWait.
func awaitWake(t *testing.T, woken <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-woken:
	case <-time.After(pushWait):
		t.Fatalf("%s: not woken within %v (the polling bound is %v)", what, pushWait, holdTTL*3/2)
	}
}

// TestHoldReleaseWakesAnotherProcess: a waiter on one backend is woken by a release on
// another (a pool of its own: another process as far as the store can tell), and admitted
// at its next attempt, several times over: the release comes right after the waiter
// queued, before its wait has begun on the server, as often as not.
func TestHoldReleaseWakesAnotherProcess(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
		for i := range 5 {
			name := mutexName(t)
			holder, _ := wokenHold(t, newB(t), name, "holder", one)
			wb := newB(t)
			waiter, woken := wokenHold(t, wb, name, "waiter", one)
			require.Equal(t, "holder", acquire(t, holder).Owner)
			require.Equal(t, "holder", acquire(t, waiter).Owner)
			if i%2 == 1 {
				awaitParked(t, wb, name) // the wait has begun on the server, this time
			}
			released := time.Now()
			require.NoError(t, holder.Release(t.Context()))
			awaitWake(t, woken, "the waiter in another process")
			t.Logf("round %d: woken %v after the release began", i, time.Since(released))
			assert.Equal(t, "waiter", acquire(t, waiter).Owner)
		}
	})
}

// TestHoldReleaseWakesOnlyWhoFits: a semaphore of two permits, both held in one process,
// three waiters queued in others. One release wakes the first waiter only: the others do
// not fit yet. The next release wakes the second. A read-write lock's writer's release
// wakes both readers queued behind it, not the writer behind them.
func TestHoldReleaseWakesOnlyWhoFits(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		two := backend.Hold{Kind: backend.Semaphore, Permits: 2}
		hb := newB(t)
		h1, _ := wokenHold(t, hb, name, "h1", two)
		h2, _ := wokenHold(t, hb, name, "h2", two)
		require.Equal(t, "h1", acquire(t, h1).Owner)
		require.Equal(t, "h2", acquire(t, h2).Owner)
		var waiters []backend.LeaseContention
		var wakes []<-chan struct{}
		for _, id := range []string{"w1", "w2", "w3"} {
			b := newB(t)
			w, woken := wokenHold(t, b, name, id, two)
			require.NotEqual(t, id, acquire(t, w).Owner)
			awaitParked(t, b, name) // so that the releases below are what wakes it, if anything
			waiters, wakes = append(waiters, w), append(wakes, woken)
		}
		require.NoError(t, h1.Release(t.Context()))
		awaitWake(t, wakes[0], "w1")
		assert.Equal(t, "w1", acquire(t, waiters[0]).Owner)
		require.NoError(t, h2.Release(t.Context()))
		awaitWake(t, wakes[1], "w2")
		assert.Equal(t, "w2", acquire(t, waiters[1]).Owner)
		select {
		case <-wakes[2]:
			t.Error("w3 was woken, though it fits nowhere")
		default:
		}

		name = mutexName(t)
		w, _ := wokenHold(t, newB(t), name, "w", writeHold)
		require.Equal(t, "w", acquire(t, w).Owner)
		r1b, r2b, w2b := newB(t), newB(t), newB(t)
		r1, r1Woken := wokenHold(t, r1b, name, "r1", readHold)
		r2, r2Woken := wokenHold(t, r2b, name, "r2", readHold)
		w2, w2Woken := wokenHold(t, w2b, name, "w2", writeHold)
		for _, c := range []struct {
			c backend.LeaseContention
			b *jdbc.Backend
		}{{r1, r1b}, {r2, r2b}, {w2, w2b}} {
			require.Equal(t, "w", acquire(t, c.c).Owner)
			awaitParked(t, c.b, name)
		}
		require.NoError(t, w.Release(t.Context()))
		awaitWake(t, r1Woken, "r1")
		awaitWake(t, r2Woken, "r2")
		assert.Equal(t, "r1", acquire(t, r1).Owner)
		assert.Equal(t, "r2", acquire(t, r2).Owner)
		select {
		case <-w2Woken:
			t.Error("the writer behind the readers was woken")
		default:
		}
	})
}

// TestSemaphoreHandOverAcrossProcesses: through simba's Semaphore, a permit given back in
// one process reaches a waiter in another well within the polling bound.
func TestSemaphoreHandOverAcrossProcesses(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		opts := []simba.LockerOption{simba.WithTTL(holdTTL), simba.WithTransition(holdTTL / 2)}
		first, err := simba.NewSemaphore(newB(t), name, 1, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = first.Close() })
		secondB := newB(t)
		second, err := simba.NewSemaphore(secondB, name, 1, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = second.Close() })

		held, err := first.Acquire(t.Context())
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*pushWait)
			defer cancel()
			lease, err := second.Acquire(ctx)
			if err == nil {
				err = lease.Release(context.Background())
			}
			got <- err
		}()
		awaitParked(t, secondB, name) // the second waits in the other process, its wake parked
		require.NoError(t, held.Release(t.Context()))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(pushWait):
			t.Fatalf("the permit did not reach the other process within %v (the polling bound is %v)", pushWait, holdTTL*3/2)
		}
	})
}

// TestHoldParkingEndsWithTheContention: a parked waiter's StopContend, and its backend's
// Close, end its parked statement on the server and give its connection up: none is left
// parked on the server, and none in use in its pool but, after StopContend, the one the
// backend keeps for its next parking.
func TestHoldParkingEndsWithTheContention(t *testing.T) {
	for _, d := range []struct {
		name    string
		open    func(t testing.TB, params ...string) *sql.DB
		dialect jdbc.Dialect
		running string // counts the server's running statements that begin with $1
	}{
		{"mariadb", openDB, jdbc.MySQL, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE LEFT(INFO, CHAR_LENGTH(?)) = ?"},
		{"postgres", openPG, jdbc.Postgres, "SELECT COUNT(*) FROM pg_stat_activity WHERE state = 'active' AND left(query, length($1)) = $1"},
	} {
		t.Run(d.name, func(t *testing.T) {
			for _, end := range []string{"StopContend", "Close"} {
				name := mutexName(t)
				one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
				holderB, err := jdbc.New(d.open(t), jdbc.WithDialect(d.dialect))
				require.NoError(t, err)
				t.Cleanup(func() { _ = holderB.Close() })
				holder, _ := wokenHold(t, holderB, name, "holder", one)
				db := d.open(t)
				b, err := jdbc.New(db, jdbc.WithDialect(d.dialect))
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "waiter", TTL: holdTTL,
					Transition: holdTTL / 2, Wake: func() {}, Hold: one})
				require.NoError(t, err)
				require.Equal(t, "holder", acquire(t, holder).Owner)
				require.Equal(t, "holder", acquire(t, c.(backend.LeaseContention)).Owner)
				awaitParked(t, b, name)

				query := d.running
				args := []any{"SELECT /*simba-wake:", "SELECT /*simba-wake:"}
				if d.dialect == jdbc.Postgres {
					args = args[:1]
				}
				parked := func() int {
					var n int
					require.NoError(t, d.open(t).QueryRowContext(t.Context(), query, args...).Scan(&n))
					return n
				}
				require.Equal(t, 1, parked(), "the waiter's statement runs on the server")
				if end == "Close" {
					require.NoError(t, b.Close())
				} else {
					require.NoError(t, c.StopContend(t.Context()))
				}
				assert.Zero(t, b.Parked(name))
				assert.Equal(t, b.Spares(), db.Stats().InUse, "%s: connections in use in the waiter's pool", end)
				if end == "Close" {
					assert.Zero(t, b.Spares(), "a parking connection kept after Close")
				}
				deadline := time.Now().Add(pushWait)
				for parked() > 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%s: the parked statement still runs on the server after %v", end, pushWait)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// TestHoldUnseenParkingPollsOnly: a waiter whose sessions the server does not show
// running statements for (a PostgreSQL role with track_activities off, which another role
// could not signal either) cannot be woken by a release: once its parked statement was not
// seen running, it wakes itself once, for a wake it may have missed, and then waits by
// polling only, not waking itself after every decision. It is admitted when it asks.
func TestHoldUnseenParkingPollsOnly(t *testing.T) {
	needPostgres(t)
	pgExec(t, "DROP ROLE IF EXISTS simba_blind; CREATE ROLE simba_blind LOGIN PASSWORD 'pw'; "+
		"GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex_hold TO simba_blind; ALTER ROLE simba_blind SET track_activities = off")
	t.Cleanup(func() { pgExec(t, "DROP OWNED BY simba_blind; DROP ROLE IF EXISTS simba_blind") })
	db, err := sql.Open("pgx", strings.Replace(pgServer.DSN(), "simba:simba@", "simba_blind:pw@", 1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	name := mutexName(t)
	one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
	holder, _ := wokenHold(t, newPGBackend(t), name, "holder", one)
	var logs records
	woken := make(chan struct{}, 10)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "blind", TTL: holdTTL,
		Transition: holdTTL / 2, Wake: func() { woken <- struct{}{} }, Hold: one, Logger: slog.New(&logs)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	waiter := c.(backend.LeaseContention)
	require.Equal(t, "holder", acquire(t, holder).Owner)
	require.Equal(t, "holder", acquire(t, waiter).Owner)
	awaitWake(t, woken, "the waiter whose parking was not seen")
	msgs := []any{}
	for _, r := range logs.at(slog.LevelDebug) {
		msgs = append(msgs, r["msg"])
	}
	assert.Contains(t, msgs, "simba/jdbc: the server does not show the parked statement running; waiting by polling only")

	require.Equal(t, "holder", acquire(t, waiter).Owner)
	select {
	case <-woken:
		t.Fatal("woken again after a decision, with nothing released")
	case <-time.After(jdbc.ParkSeen + 2*time.Second): // longer than a parking's look for its statement
	}
	assert.Zero(t, b.Parked(name))
	require.NoError(t, holder.Release(t.Context()))
	assert.Equal(t, "blind", acquire(t, waiter).Owner, "admitted when it asks")
}

// TestHoldParkingEndsWithTheAcquisition: an Acquire that waits, parked, past its
// deadline returns by then, and its parked statement ends with it.
func TestHoldParkingEndsWithTheAcquisition(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		opts := []simba.LockerOption{simba.WithTTL(holdTTL), simba.WithTransition(holdTTL / 2)}
		first, err := simba.NewSemaphore(newB(t), name, 1, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = first.Close() })
		wb := newB(t)
		second, err := simba.NewSemaphore(wb, name, 1, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = second.Close() })
		_, err = first.Acquire(t.Context())
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() {
			_, err := second.Acquire(ctx)
			got <- err
		}()
		awaitParked(t, wb, name)
		cancel()
		select {
		case err := <-got:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(pushWait):
			t.Fatalf("the parked acquisition did not return within %v of its end", pushWait)
		}
		deadline := time.Now().Add(pushWait)
		for wb.Parked(name) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("still parked %v after the acquisition ended", pushWait)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// TestHoldWakeRefusedLeavesTheWaiterToPoll: a releaser whose MariaDB user sees the
// waiter's parked statement (PROCESS) but may not end another user's (no
// CONNECTION_ADMIN) cannot wake it: its release succeeds all the same, says so at Debug
// level, and the waiter is admitted when it asks.
func TestHoldWakeRefusedLeavesTheWaiterToPoll(t *testing.T) {
	needServer(t)
	rootExec(t, "DROP USER IF EXISTS 'simba_seer'@'127.0.0.1'; CREATE USER 'simba_seer'@'127.0.0.1' IDENTIFIED BY 'pw'; "+
		"GRANT SELECT, INSERT, UPDATE, DELETE ON simba.simba_mutex_hold TO 'simba_seer'@'127.0.0.1'; "+
		"GRANT PROCESS ON *.* TO 'simba_seer'@'127.0.0.1'")
	t.Cleanup(func() { rootExec(t, "DROP USER IF EXISTS 'simba_seer'@'127.0.0.1'") })
	rb, err := jdbc.New(openDSN(t, fmt.Sprintf("simba_seer:pw@tcp(%s)/simba?interpolateParams=true", server.Addr())))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rb.Close() })

	name := mutexName(t)
	one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
	var logs records
	hc, err := rb.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "holder", TTL: holdTTL,
		Transition: holdTTL / 2, Wake: func() {}, Hold: one, Logger: slog.New(&logs)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = hc.StopContend(context.Background()) })
	holder := hc.(backend.LeaseContention)
	wb := newBackend(t)
	waiter, _ := wokenHold(t, wb, name, "waiter", one)
	require.Equal(t, "holder", acquire(t, holder).Owner)
	require.Equal(t, "holder", acquire(t, waiter).Owner)
	awaitParked(t, wb, name)

	require.NoError(t, holder.Release(t.Context()), "a wake refused is no error of the release")
	// The wake runs after the release returned (wakeLater).
	require.Eventually(t, func() bool {
		for _, r := range logs.at(slog.LevelDebug) {
			if r["msg"] == "simba/jdbc: could not wake the waiters of other processes; they poll" {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the refused wake said so at Debug level")
	assert.Equal(t, "waiter", acquire(t, waiter).Owner, "admitted when it asks")
}

// TestHoldParkedWaiterSleepsOnWhenOthersQueue: a waiter parked behind a held permit is not
// woken when another waiter queues behind it, though the name's rows changed: it fits no
// better. Its parking runs out (its lease, 1.5s here) and parks again after checking the
// rows, which already hold the second waiter. Waking it there made every queuing wake
// every parked waiter into a retry, each ending its own sleep with a KILL.
func TestHoldParkedWaiterSleepsOnWhenOthersQueue(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		name := mutexName(t)
		one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
		holder, _ := wokenHold(t, newB(t), name, "holder", one)
		require.Equal(t, "holder", acquire(t, holder).Owner)
		wb := newB(t)
		const lease = 1500 * time.Millisecond // the parking's length
		woken := make(chan struct{}, 1)
		c, err := wb.StartContend(t.Context(), backend.Participant{Mutex: name, ContenderID: "w1", TTL: lease * 2 / 3,
			Transition: lease / 3, Hold: one, Wake: func() {
				select {
				case woken <- struct{}{}:
				default:
				}
			}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.StopContend(context.Background()) })
		w1 := c.(backend.LeaseContention)
		require.Equal(t, "holder", acquire(t, w1).Owner)
		awaitParked(t, wb, name)
		b2 := newB(t)
		w2, _ := wokenHold(t, b2, name, "w2", one)
		require.Equal(t, "holder", acquire(t, w2).Owner)
		awaitParked(t, b2, name)
		select {
		case <-woken:
			t.Fatal("w1 was woken by a waiter queuing behind it")
		case <-time.After(3 * lease): // w1's parking ran out and parked again meanwhile
		}
		require.NoError(t, holder.Release(t.Context()))
		awaitWake(t, woken, "w1, after the release")
		assert.Equal(t, "w1", acquire(t, w1).Owner)
	})
}

// TestSemaphoreWakesKeepTheCallTimeout: four processes cycle through a semaphore of two
// permits, each wake of a waiter in another process meeting others. No Release outlasts
// a call timeout of a second. On MariaDB, waiters parked in SLEEP() made releases of one
// to two and a half seconds (1 % of them, in every run of 240 cycles): a second wake of a
// sleep, or one that reached it as it ran out, held up the server's sleeps, and that KILL,
// for a second.
func TestSemaphoreWakesKeepTheCallTimeout(t *testing.T) {
	eachDialect(t, func(t *testing.T, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
		const workers, permits, cycles = 4, 2, 60
		name := mutexName(t)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		errs := make(chan error, workers)
		for i := range workers {
			s, err := simba.NewSemaphore(newB(t), name, permits, simba.WithCallTimeout(time.Second),
				simba.WithContenderID(fmt.Sprintf("w%d", i)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			go func() {
				errs <- func() error {
					for range cycles {
						lease, err := s.Acquire(ctx)
						if err != nil {
							return err
						}
						time.Sleep(5 * time.Millisecond)
						if err := lease.Release(ctx); err != nil {
							return err
						}
					}
					return nil
				}()
			}()
		}
		for range workers {
			require.NoError(t, <-errs)
		}
	})
}

// TestHoldParkingKeepsItsConnection: a waiter that parks again after its admission parks
// on the connection of its first parking, kept by its backend: each parking on a new
// connection cost PostgreSQL, which starts a server process for each, 26 ms of every
// hand-over (the permit's hand-over took 44 ms, on MariaDB 4 ms).
func TestHoldParkingKeepsItsConnection(t *testing.T) {
	for _, d := range []struct {
		name     string
		open     func(t testing.TB, params ...string) *sql.DB
		newB     func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend
		sessions string // the sessions that run a statement beginning with $1
	}{
		{"mariadb", openDB, newBackend, "SELECT ID FROM information_schema.PROCESSLIST WHERE LEFT(INFO, CHAR_LENGTH(?)) = ?"},
		{"postgres", openPG, newPGBackend, "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND left(query, length($1)) = $1"},
	} {
		t.Run(d.name, func(t *testing.T) {
			name := mutexName(t)
			one := backend.Hold{Kind: backend.Semaphore, Permits: 1}
			holder, _ := wokenHold(t, d.newB(t), name, "holder", one)
			wb := d.newB(t)
			waiter, woken := wokenHold(t, wb, name, "waiter", one)
			db := d.open(t)
			parkedOn := func() int64 {
				t.Helper()
				awaitParked(t, wb, name)
				args := []any{"SELECT /*simba-wake:", "SELECT /*simba-wake:"}
				if d.name == "postgres" {
					args = args[:1]
				}
				var session int64
				require.NoError(t, db.QueryRowContext(t.Context(), d.sessions, args...).Scan(&session))
				return session
			}
			require.Equal(t, "holder", acquire(t, holder).Owner)
			require.Equal(t, "holder", acquire(t, waiter).Owner)
			first := parkedOn()
			require.NoError(t, holder.Release(t.Context()))
			awaitWake(t, woken, "the waiter")
			require.Equal(t, "waiter", acquire(t, waiter).Owner)
			deadline := time.Now().Add(pushWait)
			for wb.Spares() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the waiter's backend kept no parking connection within %v of its admission", pushWait)
				}
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, waiter.Release(t.Context()))
			require.Equal(t, "holder", acquire(t, holder).Owner)
			require.Equal(t, "holder", acquire(t, waiter).Owner)
			assert.Equal(t, first, parkedOn(), "the second parking's session")
		})
	}
}
