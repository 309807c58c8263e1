package jdbc_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend/jdbc"
)

// TestQueryRowAnswersAsDatabaseSQL: a statement run through the pinned connection's driver
// (queryRow) answers as database/sql's QueryRowContext and Scan would, on PostgreSQL (pgx,
// typed values) and MariaDB (go-sql-driver's text protocol, values as bytes): the values,
// no row, NULL into a plain destination, a wrong number of destinations, a statement the
// server refuses.
func TestQueryRowAnswersAsDatabaseSQL(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		checkQueryRow(t, openPG(t), "SELECT $1::bigint + 1, $2::text = 'x', $3::text, NULL::bigint, $4::bigint", []queryRowCase{
			{"SELECT 1 WHERE false", nil, 1},                  // no row
			{"SELECT NULL::bigint", nil, 1},                   // NULL into an int64
			{"SELECT 1, 2", nil, 1},                           // fewer destinations than columns
			{"SELECT $1::bigint", []any{int64(1)}, 2},         // more destinations than columns
			{"SELECT -1::bigint", nil, -1},                    // a negative number into a uint64
			{"SELECT 1 / (SELECT 0)", nil, 1},                 // refused by the server
			{"SELECT * FROM no_such_table", nil, 1},           // refused before it runs
			{"SELECT pg_sleep(0), $1::bigint", []any{"x"}, 1}, // an argument the server cannot read
			{"SELECT 1 FROM generate_series(1, 2) WHERE 1/0 = 0", nil, 1},
		})
	})
	mariadb := []queryRowCase{
		{"SELECT 1 FROM DUAL WHERE false", nil, 1},
		{"SELECT NULL", nil, 1},
		{"SELECT 1, 2", nil, 1},
		{"SELECT ?", []any{int64(1)}, 2},
		{"SELECT -1", nil, -1},
		{"SELECT * FROM no_such_table", nil, 1},
		{"SELECT 'x'", nil, 1},
	}
	t.Run("mariadb", func(t *testing.T) {
		checkQueryRow(t, openDB(t), "SELECT ? + 1, ? = 'x', ?, NULL, ?", mariadb)
	})
	t.Run("mariadb prepared", func(t *testing.T) {
		// Without interpolateParams, go-sql-driver leaves a statement with arguments to
		// database/sql, which prepares it (driver.ErrSkip).
		checkQueryRow(t, openDB(t, "interpolateParams=false"), "SELECT ? + 1, ? = 'x', ?, NULL, ?", mariadb)
	})
}

// queryRowCase is a statement that fails to scan into dests destinations (int64 ones;
// -1: one uint64).
type queryRowCase struct {
	query string
	args  []any
	dests int
}

// checkQueryRow checks queryRow against database/sql on db: values reads 41, "x", "x",
// NULL and 41 from its arguments 41, "x", "x", 41; each of failing fails alike both ways.
func checkQueryRow(t *testing.T, db *sql.DB, values string, failing []queryRowCase) {
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	var n int64
	var b bool
	var s string
	var null sql.NullInt64
	var u uint64
	require.NoError(t, jdbc.QueryRow(ctx, conn, values, []any{int64(41), "x", "x", int64(41)}, &n, &b, &s, &null, &u))
	assert.Equal(t, int64(42), n)
	assert.True(t, b)
	assert.Equal(t, "x", s)
	assert.False(t, null.Valid)
	assert.Equal(t, uint64(41), u)

	for _, c := range failing {
		dest := make([]any, max(c.dests, 1))
		for i := range dest {
			dest[i] = new(int64)
		}
		if c.dests < 0 {
			dest[0] = new(uint64)
		}
		want := conn.QueryRowContext(ctx, c.query, c.args...).Scan(dest...)
		got := jdbc.QueryRow(ctx, conn, c.query, c.args, dest...)
		require.Error(t, want, c.query)
		require.Error(t, got, c.query)
		assert.Equal(t, errors.Is(want, sql.ErrNoRows), errors.Is(got, sql.ErrNoRows), "%s: %v, database/sql: %v", c.query, got, want)
		var wantPG, gotPG interface{ SQLState() string }
		if errors.As(want, &wantPG) {
			require.ErrorAs(t, got, &gotPG, c.query)
			assert.Equal(t, wantPG.SQLState(), gotPG.SQLState(), c.query)
		}
		// Both leave the connection as usable.
		require.NoError(t, conn.PingContext(context.WithoutCancel(ctx)), c.query)
	}
	require.NoError(t, jdbc.QueryRow(ctx, conn, "SELECT 7", nil, &n))
	assert.Equal(t, int64(7), n)
}
