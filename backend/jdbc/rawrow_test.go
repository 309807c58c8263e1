package jdbc_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend/jdbc"
)

// TestQueryRowAnswersAsDatabaseSQL: a statement run through the pinned connection's driver
// (queryRow) answers as database/sql's QueryRowContext and Scan would: the values, no row,
// NULL into a plain destination, a statement the server refuses.
func TestQueryRowAnswersAsDatabaseSQL(t *testing.T) {
	db := openPG(t)
	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	ctx := t.Context()

	var n int64
	var b bool
	var s string
	var null sql.NullInt64
	require.NoError(t, jdbc.QueryRow(ctx, conn, "SELECT $1::bigint + 1, $2::text = 'x', $2::text, NULL::bigint", []any{int64(41), "x"},
		&n, &b, &s, &null))
	assert.Equal(t, int64(42), n)
	assert.True(t, b)
	assert.Equal(t, "x", s)
	assert.False(t, null.Valid)

	for _, c := range []struct {
		query string
		args  []any
		dest  []any
	}{
		{"SELECT 1 WHERE false", nil, []any{&n}},                      // no row
		{"SELECT NULL::bigint", nil, []any{&n}},                       // NULL into an int64
		{"SELECT 1, 2", nil, []any{&n}},                               // fewer destinations than columns
		{"SELECT $1::bigint", []any{int64(1)}, []any{&n, new(int64)}}, // more destinations than columns
		{"SELECT 1 / (SELECT 0)", nil, []any{&n}},                     // refused by the server
		{"SELECT * FROM no_such_table", nil, []any{&n}},               // refused before it runs
	} {
		want := conn.QueryRowContext(ctx, c.query, c.args...).Scan(c.dest...)
		got := jdbc.QueryRow(ctx, conn, c.query, c.args, c.dest...)
		require.Error(t, want, c.query)
		require.Error(t, got, c.query)
		assert.Equal(t, errors.Is(want, sql.ErrNoRows), errors.Is(got, sql.ErrNoRows), "%s: %v, database/sql: %v", c.query, got, want)
		var wantPG, gotPG interface{ SQLState() string }
		if errors.As(want, &wantPG) {
			require.ErrorAs(t, got, &gotPG, c.query)
			assert.Equal(t, wantPG.SQLState(), gotPG.SQLState(), c.query)
		}
	}
	// The connection still serves after the errors.
	require.NoError(t, jdbc.QueryRow(ctx, conn, "SELECT 7", nil, &n))
	assert.Equal(t, int64(7), n)
}
