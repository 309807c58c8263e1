package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// TestCancelledAcquireTakesNoRowAfterRelease: an acquisition's UPDATE waits behind a row
// lock (an administrator's SELECT ... FOR UPDATE) when its caller gives up on it, as Stop
// does with the round under way; the release that follows finds the row free. When the
// row lock goes, the abandoned UPDATE takes the row for a contender that has stopped (the
// server runs it all the same, until the statement's deadline): the sweep the stopped
// contention left behind releases it once that deadline has passed, and the backend's
// Close waits for it. Found by the fault suite (scenario 13, MariaDB, C8: "the row still
// names p3" after every contender had stopped).
func TestCancelledAcquireTakesNoRowAfterRelease(t *testing.T) {
	needServer(t)
	db := openDB(t)
	mutex := mutexName(t)
	b := newBackend(t)
	other := leaseOf(t, b, mutex, "other")
	acquire(t, other) // the row exists, free once released
	require.NoError(t, other.Release(t.Context()))

	tx, _ := lockRow(t, db, mutex)

	c := leaseOf(t, b, mutex, "stopped")
	const window = 2 * time.Second // the UPDATE's deadline, and its server-side limit
	ctx, cancel := context.WithTimeout(t.Context(), window)
	defer cancel()
	abandonWaiting(ctx, t, db, c, cancel, "stopped")
	rctx, rcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer rcancel()
	require.NoError(t, c.Release(rctx))
	require.NoError(t, c.StopContend(rctx))

	require.NoError(t, tx.Commit())
	waitUntil(t, 5*time.Second, "the abandoned UPDATE to take the row", func() bool {
		return readRow(t, db, mutex).Owner == "stopped"
	})
	began := time.Now()
	require.NoError(t, b.Close())
	t.Logf("Close returned after %v", time.Since(began))
	assert.Less(t, time.Since(began), window+time.Second, "Close waits for the sweep, no longer")
	r := readRow(t, db, mutex)
	assert.NotEqual(t, "stopped", r.Owner, "the row an abandoned UPDATE took after the release is left held: %+v", r)
}

// TestAbandonedRenewalTakesNoRowAfterRelease: an owner's renewal waits behind a row lock
// (an administrator's SELECT ... FOR UPDATE) when its caller gives up on it, as Stop does
// with the round under way; the tenure's release commits before the row lock goes (here
// in the administrator's transaction). The server then runs the abandoned renewal on the
// released row. It must take nothing: a renewal that took a free row would begin a tenure
// for a contender that has stopped, which only its lease or a later sweep ends, and the
// waiters the release woke would find the row held and fall back to polling (seen in the
// fault suite, mariadb/06: no successor of a stopped owner within 1.25 s).
func TestAbandonedRenewalTakesNoRowAfterRelease(t *testing.T) {
	needServer(t)
	db := openDB(t)
	mutex := mutexName(t)
	a := leaseOf(t, newBackend(t), mutex, "a")
	require.Equal(t, "a", acquire(t, a).Owner)

	tx, v := lockRow(t, db, mutex)

	// A call without a deadline renews with the acquire statement (one with a deadline
	// renews in a batch, whose statement never took a free row).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	abandonWaiting(ctx, t, db, a, cancel, "a")
	// The release, as the owner's would write it, commits first.
	_, err := tx.ExecContext(t.Context(), "UPDATE simba_mutex SET owner_id = '', ttl_at = 0, transition_at = 0, version = version + 1 WHERE mutex = ?", mutex)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	waitUntil(t, 5*time.Second, "the abandoned renewal to end on the server", func() bool {
		n, err := updatesOf(t.Context(), db, "a")
		return err == nil && n == 0
	})

	r := readRow(t, db, mutex)
	assert.Equal(t, v+1, r.Version, "the abandoned renewal changed the released row: %+v", r)
	assert.Empty(t, r.Owner, "the abandoned renewal took the released row: %+v", r)
}

// TestAbandonedAcquisitionOfTheLockHolderTakesNoRowAfterRelease: a waiter that the named
// lock woke holds it, and its acquisition, which then runs on the pool, waits behind a row
// lock (an administrator's SELECT ... FOR UPDATE) when its caller gives up on it, as Stop
// does with the round under way. Its contention stops and lets the lock go to the next
// waiter; the row lock goes; the server runs the abandoned acquisition. It must take
// nothing: the next waiter, which the lock woke, would find the row held by a contender
// that has stopped, and poll until that lease lapsed or a sweep freed it.
func TestAbandonedAcquisitionOfTheLockHolderTakesNoRowAfterRelease(t *testing.T) {
	needServer(t)
	db := openDB(t)
	mutex := mutexName(t)
	b := newBackend(t)
	o := leaseOf(t, b, mutex, "o")
	require.Equal(t, "o", acquire(t, o).Owner)
	lock := b.LockName(mutex) // once the backend has seen the server
	w := leaseOf(t, newBackend(t), mutex, "w")
	require.Equal(t, "o", acquire(t, w).Owner) // w now waits for the named lock

	// The next waiter, which waits behind w.
	x, err := db.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	var xSession int64
	require.NoError(t, x.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&xSession))
	// waiting holds when n sessions wait for the lock, x among them if xToo.
	waiting := func(n int, xToo bool) func() bool {
		return func() bool {
			var all, xs int
			err := db.QueryRowContext(t.Context(), "SELECT COUNT(*), COALESCE(SUM(ID = ?), 0) FROM information_schema.PROCESSLIST "+
				"WHERE STATE = 'User lock' AND INFO LIKE CONCAT('%', ?, '%')", xSession, lock).Scan(&all, &xs)
			return err == nil && all == n && (xs == 1) == xToo
		}
	}
	waitUntil(t, 5*time.Second, "w to wait for the named lock", waiting(1, false))
	xGot := make(chan error, 1)
	go func() {
		var got sql.NullInt64
		err := x.QueryRowContext(t.Context(), "SELECT GET_LOCK(?, 20)", lock).Scan(&got)
		if err == nil && got.Int64 != 1 {
			err = fmt.Errorf("GET_LOCK answered %v", got)
		}
		xGot <- err
	}()
	waitUntil(t, 5*time.Second, "the next waiter to wait behind w", waiting(2, true))

	require.NoError(t, o.Release(t.Context())) // the lock goes to w, the first to wait
	waitUntil(t, 5*time.Second, "w to get the named lock, the next waiter still waiting", waiting(1, true))

	tx, _ := lockRow(t, db, mutex)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	abandonWaiting(ctx, t, db, w, cancel, "w")
	sctx, scancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer scancel()
	require.NoError(t, w.StopContend(sctx)) // lets the named lock go
	select {
	case err := <-xGot:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter did not get the named lock")
	}

	require.NoError(t, tx.Commit())
	waitUntil(t, 5*time.Second, "the abandoned acquisition to end on the server", func() bool {
		n, err := updatesOf(t.Context(), db, "w")
		return err == nil && n == 0
	})
	r := readRow(t, db, mutex)
	assert.NotEqual(t, "w", r.Owner, "the abandoned acquisition took the row after its contention let the lock go: %+v", r)
}

// lockRow holds mutex's row locked, as an administrator's SELECT ... FOR UPDATE does, in
// a transaction of db (MariaDB) that the test ends, or its cleanup rolls back. It returns
// the transaction and the row's version.
func lockRow(t *testing.T, db *sql.DB, mutex string) (*sql.Tx, uint64) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var v uint64
	require.NoError(t, tx.QueryRowContext(t.Context(), "SELECT version FROM simba_mutex WHERE mutex = ? FOR UPDATE", mutex).Scan(&v))
	return tx, v
}

// abandonWaiting calls c.Acquire under ctx, waits until its UPDATE, for contender id,
// waits on the server (behind lockRow's lock), then gives the call up with cancel, as Stop
// does with the round under way, and returns once the call has failed.
func abandonWaiting(ctx context.Context, t *testing.T, db *sql.DB, c backend.LeaseContention, cancel context.CancelFunc, id string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := c.Acquire(ctx); done <- err }()
	waitUntil(t, 5*time.Second, "the UPDATE to wait for the row lock", func() bool {
		n, err := updatesOf(t.Context(), db, id)
		return err == nil && n > 0
	})
	cancel()
	select {
	case err := <-done:
		require.Error(t, err, "the call was given up")
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return when its context was cancelled")
	}
}

// updatesOf counts the UPDATEs of the mutex table for contender id that the server runs
// now, other sessions'. A prepared statement shows its text with placeholders: the only
// UPDATE running in these tests is the contender's.
func updatesOf(ctx context.Context, db *sql.DB, id string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
		"WHERE ID <> CONNECTION_ID() AND INFO LIKE '%UPDATE `simba_mutex`%' AND (INFO LIKE ? OR COMMAND = 'Execute')",
		"%owner_id = '"+id+"'%").Scan(&n)
	return n, err
}
