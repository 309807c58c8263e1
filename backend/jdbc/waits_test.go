package jdbc_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/faultproxy"
)

// handOffParty is a service's contention as the hand-off tests drive it, with a channel
// its Participant.Wake signals.
type handOffParty struct {
	backend.LeaseContention
	backend.HandOffer
	woken chan struct{}
}

// party opens a service's contention of b for mutex under id with value.
func party(t *testing.T, b *jdbc.Backend, mutex, id, value string) handOffParty {
	t.Helper()
	woken := make(chan struct{}, 1)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: id, Value: value,
		TTL: 10 * time.Second, Transition: 5 * time.Second,
		Wake: func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	h, ok := c.(backend.HandOffer)
	require.True(t, ok, "the contention hands nothing off")
	return handOffParty{LeaseContention: c.(backend.LeaseContention), HandOffer: h, woken: woken}
}

// TestHandOff: the owner hands the mutex to a waiter of another process: the waiter is
// woken at once (through the named lock), and its next Acquire finds itself the owner
// with a larger token and its value; the owner goes behind those waiting. Failed checks
// change nothing.
func TestHandOff(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		a := party(t, s.backend(t), mutex, "a", "va")
		b := party(t, s.backend(t), mutex, "b", "vb")
		c := party(t, s.backend(t), mutex, "c", "")
		ctx := t.Context()

		first, err := a.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "a", first.Owner)
		for _, p := range []handOffParty{b, c} {
			rec, err := p.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, "a", rec.Owner)
		}
		waiters, err := a.Waiters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "b", Value: "vb"}, {ID: "c"}}, waiters)

		assert.ErrorIs(t, a.HandOff(ctx, "nobody"), simba.ErrNotWaiting)
		assert.ErrorIs(t, c.HandOff(ctx, "b"), simba.ErrNotOwner, "a waiter hands off")
		for _, p := range []handOffParty{b, c} {
			select {
			case <-p.woken: // a wake before the hand-off: drain it
			default:
			}
		}

		require.NoError(t, a.HandOff(ctx, "b"))
		// The named lock goes to the first waiter queued for it: b, or c if c's wait was
		// queued first, which finds b the owner without the lock and passes it on, as
		// its service would.
		select {
		case <-b.woken:
		case <-c.woken:
			rec, err := c.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, "b", rec.Owner, "c, woken first")
			select {
			case <-b.woken:
			case <-time.After(10 * time.Second):
				t.Fatal("the receiver was not woken after c passed the lock on")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver was not woken")
		}
		rec, err := b.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "b", rec.Owner)
		assert.Greater(t, rec.Token, first.Token)
		assert.Equal(t, "vb", rec.Value)
		o, err := simba.Lookup(ctx, s.backend(t), mutex)
		require.NoError(t, err)
		assert.Equal(t, [2]string{"b", "vb"}, [2]string{o.ID, o.Value})

		waiters, err = b.Waiters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "c"}, {ID: "a", Value: "va"}}, waiters, "the giver goes behind those waiting")
		assert.ErrorIs(t, a.HandOff(ctx, "c"), simba.ErrNotOwner, "the giver hands off again")
		rec, err = a.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "b", rec.Owner, "the giver contends on")

		// The row changed behind the owner's back: the check in the store fails.
		db := s.db(t)
		q := "UPDATE simba_mutex SET version = version + 1 WHERE mutex = ?"
		if s.dialect == jdbc.Postgres {
			q = "UPDATE simba_mutex SET version = version + 1 WHERE mutex = $1"
		}
		_, err = db.ExecContext(ctx, q, mutex)
		require.NoError(t, err)
		assert.ErrorIs(t, b.HandOff(ctx, "c"), simba.ErrNotOwner, "an owner whose row moved on")
		waiters, err = b.Waiters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "c"}, {ID: "a", Value: "va"}}, waiters, "a failed hand-off changes nothing")

		require.NoError(t, c.Release(ctx))
		waiters, err = b.Waiters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "a", Value: "va"}}, waiters, "a waiter that released left the queue")
	})
}

// owningParty opens a service's contention "a" on s's store and makes it the owner of a
// mutex of its own; it returns the mutex, a, and the name of the mutex's named lock.
func owningParty(t *testing.T, s dialectStore) (string, handOffParty, string) {
	t.Helper()
	mutex := mutexName(t)
	b := s.backend(t)
	a := party(t, b, mutex, "a", "")
	_, err := a.Acquire(t.Context())
	require.NoError(t, err)
	return mutex, a, b.LockName(mutex)
}

// TestHandOffGiverStaysBehindEarlierWaiters: a hand-off queues its giver behind those
// waiting, and it stays there when the named lock's queue reorders. b waits first, c
// second; a hands the mutex to c. The lock goes to b, which finds c the owner without the
// lock and passes it on, queueing for it again; a queued for it in between (a CI run of
// the conformance suite saw it on a loaded machine), so c's release wakes a before b. a
// must leave the free row to b, which waited longer, rather than take it.
func TestHandOffGiverStaysBehindEarlierWaiters(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex, a, lock := owningParty(t, s)
		ctx, db := t.Context(), s.db(t)
		waiter := func(id string, queued int) handOffParty {
			p := party(t, s.backend(t), mutex, id, "")
			rec, err := p.Acquire(ctx)
			require.NoError(t, err)
			require.Equal(t, "a", rec.Owner)
			waitUntil(t, 10*time.Second, id+" to queue for the named lock", func() bool {
				return lockWaiters(t, s, db, lock) == queued
			})
			return p
		}
		b := waiter("b", 1)
		c := waiter("c", 2)

		require.NoError(t, a.HandOff(ctx, "c"))
		woken(t, b, "b, the first waiter for the lock")
		rec, err := a.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "c", rec.Owner)
		waitUntil(t, 10*time.Second, "the giver to queue for the named lock", func() bool {
			return lockWaiters(t, s, db, lock) == 2 // c, then a
		})
		rec, err = b.Acquire(ctx) // passes the lock on to c, and queues behind a
		require.NoError(t, err)
		require.Equal(t, "c", rec.Owner)
		woken(t, c, "c, after b passed the lock on")
		rec, err = c.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "c", rec.Owner)

		require.NoError(t, c.Release(ctx))
		woken(t, a, "the giver, next in the lock's queue")
		type answer struct {
			rec backend.Record
			err error
		}
		got := make(chan answer, 1)
		go func() {
			rec, err := a.Acquire(ctx)
			got <- answer{rec, err}
		}()
		select {
		case g := <-got:
			t.Fatalf("the giver's acquisition named %q (%v) before b, which waited longer, was woken", g.rec.Owner, g.err)
		case <-b.woken:
		case <-time.After(10 * time.Second):
			t.Fatal("b was not woken")
		}
		rec, err = b.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "b", rec.Owner, "b, which waited longest")
		g := <-got
		require.NoError(t, g.err)
		assert.Equal(t, "b", g.rec.Owner, "the giver's acquisition")
	})
}

// TestHandOffWakesAWaiterAsSoonAsItIsListed: a giver hands off to a waiter the wait table
// lists and wakes it through the named lock, so a waiter must queue for the lock before
// it is listed. c's answers reach it 500 ms late; a hands off to c the moment the table
// lists it. b, first in the lock's queue, is woken, finds c the owner and passes the lock
// on, which c must be queued for by then. A CI run of the conformance suite saw c
// listed and not queued: b took the lock back and c waited for its poll.
func TestHandOffWakesAWaiterAsSoonAsItIsListed(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex, a, lock := owningParty(t, s)
		ctx, db := t.Context(), s.db(t)
		b := party(t, s.backend(t), mutex, "b", "")
		rec, err := b.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "a", rec.Owner)
		waitUntil(t, 10*time.Second, "b to queue for the named lock", func() bool { return lockWaiters(t, s, db, lock) == 1 })

		bc, proxy := proxiedBackend(t, s)
		c := party(t, bc, mutex, "c", "")
		proxy.Delay(faultproxy.Down, 500*time.Millisecond, 0)
		answered := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctx)
			answered <- err
		}()
		waitUntil(t, 10*time.Second, "the wait table to list c", func() bool {
			waiters, err := a.Waiters(ctx)
			require.NoError(t, err)
			return slices.Contains(waiters, backend.Waiter{ID: "c"})
		})
		require.NoError(t, a.HandOff(ctx, "c"))
		woken(t, b, "b, first in the lock's queue")
		rec, err = b.Acquire(ctx) // passes the lock on
		require.NoError(t, err)
		require.Equal(t, "c", rec.Owner)
		woken(t, c, "c, the receiver, through the named lock")
		proxy.Heal()
		require.NoError(t, <-answered)
		rec, err = c.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "c", rec.Owner)
	})
}

// proxiedBackend returns a backend of s's store whose connections pass through a fault
// proxy, with three of them open already (connections made through a slow proxy would
// take many of its round trips).
func proxiedBackend(t *testing.T, s dialectStore) (*jdbc.Backend, *faultproxy.Proxy) {
	t.Helper()
	addr, dsn, opts := server.Addr(), server.DSN(), []jdbc.Option(nil)
	if s.dialect == jdbc.Postgres {
		addr, dsn, opts = pgServer.Addr(), pgServer.DSN(), []jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}
	}
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	driver := map[jdbc.Dialect]string{jdbc.MySQL: "mysql", jdbc.Postgres: "pgx"}[s.dialect]
	db, err := sql.Open(driver, strings.Replace(dsn, addr, p.Addr(), 1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(3)
	var conns []*sql.Conn
	for range 3 {
		conn, err := db.Conn(t.Context())
		require.NoError(t, err)
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		require.NoError(t, conn.Close())
	}
	b, err := jdbc.New(db, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b, p
}

// woken waits until p's Participant.Wake was called.
func woken(t *testing.T, p handOffParty, who string) {
	t.Helper()
	select {
	case <-p.woken:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not woken", who)
	}
}

// lockWaiters returns how many sessions of s's server wait for the named lock lock (as
// Backend.LockName gives it).
func lockWaiters(t *testing.T, s dialectStore, db *sql.DB, lock string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE CONCAT('%', ?, '%')"
	if s.dialect == jdbc.Postgres {
		q = "SELECT count(*) FROM pg_locks, (SELECT $1::text::bigint AS k) AS key WHERE locktype = 'advisory' AND NOT granted " +
			"AND objsubid = 1 AND classid::bigint = (k >> 32) & 4294967295 AND objid::bigint = k & 4294967295"
	}
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), q, lock).Scan(&n))
	return n
}
