package jdbc_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// stmtStatus reads the server's counts of prepares and executions of prepared statements.
func stmtStatus(t *testing.T, db *sql.DB) (prepares, executes int) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute')")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		if name == "Com_stmt_prepare" {
			prepares = n
		} else {
			executes = n
		}
	}
	require.NoError(t, rows.Err())
	return prepares, executes
}

// lockerCycles runs n uncontended cycles of l, each with a deadline, as a service's calls
// have.
func lockerCycles(t *testing.T, l *simba.Locker, n int) {
	t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		cancel()
	}
}

// TestMariaDBCyclesPrepareOnce: the acquire and the release of an uncontended cycle on
// MariaDB run as statements prepared once per connection, not as text the server parses at
// every cycle (each about a quarter of the cycle's server CPU): n cycles make 2n
// executions and a bounded number of prepares. Before, 0 executions.
func TestMariaDBCyclesPrepareOnce(t *testing.T) {
	b := newBackend(t)
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lockerCycles(t, l, 2) // the table's check and the row's creation
	status := openDB(t)
	prepares, executes := stmtStatus(t, status)
	const cycles = 50
	lockerCycles(t, l, cycles)
	p, e := stmtStatus(t, status)
	assert.GreaterOrEqual(t, e-executes, 2*cycles, "executions of prepared statements")
	assert.LessOrEqual(t, p-prepares, 4, "prepares")
}

// TestMariaDBPreparedForgottenByServer: a prepared statement the server no longer knows on
// a live connection (ER_UNKNOWN_STMT_HANDLER, as behind a proxy that reconnected) is
// prepared again, and the cycle goes on; so is one whose connection the server killed.
func TestMariaDBPreparedForgottenByServer(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(2) // the test reaches the backend's connections
	b, err := jdbc.New(db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lockerCycles(t, l, 2)
	status := openDB(t)

	forgotten, sessions := 0, []int64{}
	var conns []*sql.Conn
	for range 2 {
		conn, err := db.Conn(t.Context())
		require.NoError(t, err)
		conns = append(conns, conn)
		forgotten += b.ForgetPreparedOnServer(conn)
		var id int64
		require.NoError(t, conn.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id))
		sessions = append(sessions, id)
	}
	for _, conn := range conns {
		require.NoError(t, conn.Close())
	}
	require.Equal(t, 2, forgotten, "the acquire and the release, prepared")
	prepares, _ := stmtStatus(t, status)
	lockerCycles(t, l, 2)
	p, _ := stmtStatus(t, status)
	assert.Equal(t, 2, p-prepares, "both prepared again, once")

	for _, id := range sessions {
		_, err := status.ExecContext(t.Context(), "KILL CONNECTION ?", id)
		require.NoError(t, err)
	}
	// The pool's new connections: which of them a statement meets is the pool's choice,
	// and a text is prepared on a connection at its second call there, so the cycles go
	// on until both statements were prepared again (in CI two cycles once made one
	// prepare), each at most once per connection.
	prepares, _ = stmtStatus(t, status)
	for range 10 {
		lockerCycles(t, l, 1)
		if p, _ = stmtStatus(t, status); p-prepares >= 2 {
			break
		}
	}
	assert.GreaterOrEqual(t, p-prepares, 2, "prepared on the new connections")
	assert.LessOrEqual(t, p-prepares, 4, "prepared once per statement and connection")
}

// TestMariaDBPreparedRefusedFallsBack: a server that refuses to prepare statements
// (max_prepared_stmt_count = 0, as a proxy might) leaves the cycles to run as text.
func TestMariaDBPreparedRefusedFallsBack(t *testing.T) {
	b := newBackend(t)
	require.NoError(t, server.Exec(t.Context(), "SET GLOBAL max_prepared_stmt_count = 0;"))
	t.Cleanup(func() { _ = server.Exec(context.Background(), "SET GLOBAL max_prepared_stmt_count = 16382;") })
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	status := openDB(t)
	_, executes := stmtStatus(t, status)
	lockerCycles(t, l, 5)
	_, e := stmtStatus(t, status)
	assert.Equal(t, 0, e-executes, "executions of prepared statements")
}

// TestMariaDBPreparedBounded: a backend keeps at most eight prepared statements per
// connection, whatever the number of different statements its contenders run (each ttl
// gives its acquire its own): the server holds no more of them.
func TestMariaDBPreparedBounded(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(2)
	b, err := jdbc.New(db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	status := openDB(t)
	var before int
	require.NoError(t, status.QueryRowContext(t.Context(), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'").Scan(&before))
	prepares, _ := stmtStatus(t, status)
	for i := range 12 {
		l, err := simba.NewLocker(b, mutexName(t), simba.WithTTL(time.Duration(10+i)*time.Second))
		require.NoError(t, err)
		lockerCycles(t, l, 3) // on a pool of two, one connection calls it twice: prepared
		require.NoError(t, l.Close())
	}
	var held int
	require.NoError(t, status.QueryRowContext(t.Context(), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'").Scan(&held))
	p, _ := stmtStatus(t, status)
	require.GreaterOrEqual(t, p-prepares, 13, "each ttl's acquire and the release prepared")
	assert.LessOrEqual(t, held-before, 2*8, "statements the server holds for the backend's two connections")
}

// TestMariaDBPreparedLeavesNoStatementsBehind: with more connections in use than the
// backend keeps statements for, the others run their statements as text, rather than
// prepare them again each time they come back and leave the earlier ones on the server.
func TestMariaDBPreparedLeavesNoStatementsBehind(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	b, err := jdbc.New(db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	b.SetPreparedConns(1)
	status := openDB(t)
	count := func() (n int) {
		require.NoError(t, status.QueryRowContext(t.Context(), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'").Scan(&n))
		return n
	}
	before := count()
	var wg sync.WaitGroup
	for range 4 {
		l, err := simba.NewLocker(b, mutexName(t))
		require.NoError(t, err)
		wg.Go(func() {
			defer func() { assert.NoError(t, l.Close()) }()
			for range 100 {
				lease, err := l.Acquire(t.Context())
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, lease.Release(t.Context()))
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, count()-before, 2, "statements the server holds: the acquire and the release of the one connection kept")
}

// TestMariaDBPreparedOnlyWhatComesAgain: a statement text called once on a connection (its
// time limit a caller's deadline that does not come again) runs as text: no prepare.
func TestMariaDBPreparedOnlyWhatComesAgain(t *testing.T) {
	b := newBackend(t)
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lockerCycles(t, l, 3) // the table's check, the row's creation, the default limit's texts
	status := openDB(t)
	prepares, _ := stmtStatus(t, status)
	for i := range 10 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i+1)*100*time.Millisecond)
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		cancel()
	}
	p, _ := stmtStatus(t, status)
	assert.LessOrEqual(t, p-prepares, 0, "prepares of texts called once")
}
