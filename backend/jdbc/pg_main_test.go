package jdbc_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// The PostgreSQL the package's tests share (see shared).
var (
	postgres = shared{name: "PostgreSQL", prefix: "simba-pg-"}
	pgServer *testserver.Postgres
)

// needPostgres starts the shared PostgreSQL if needed (see shared.need).
func needPostgres(t testing.TB) {
	t.Helper()
	postgres.need(t, func(dir string) (interface{ Stop() error }, error) {
		s, err := startPostgres(dir)
		pgServer = s
		return s, err
	})
}

// startPostgres starts a PostgreSQL in dir with the simba_mutex table. Commits are not
// flushed to disk (fsync off): the tests measure nothing, and the machine is shared. It
// loads pg_stat_statements, whose counts some tests read (pgStatements).
func startPostgres(dir string) (*testserver.Postgres, error) {
	s, err := testserver.NewPostgres(dir, "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "shared_preload_libraries=pg_stat_statements")
	if err != nil {
		return nil, err
	}
	if err := startWithTable(s, "pgx", jdbc.WithDialect(jdbc.Postgres)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// openPG opens a pool of its own on the shared PostgreSQL, closed when the test ends.
// params are DSN query parameters.
func openPG(t testing.TB, params ...string) *sql.DB {
	t.Helper()
	needPostgres(t)
	db, err := sql.Open("pgx", pgServer.DSN(params...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newPGBackend returns a PostgreSQL backend on a pool of its own, closed when the test
// ends.
func newPGBackend(t testing.TB, opts ...jdbc.Option) *jdbc.Backend {
	t.Helper()
	b, err := jdbc.New(openPG(t), append([]jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// pgExec runs SQL as the superuser on the shared PostgreSQL.
func pgExec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, pgServer.Exec(ctx, sql))
}

// pgRows returns the rows of table whose mutex starts with prefix.
func pgRows(t testing.TB, db *sql.DB, table, prefix string) []storedRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT mutex, owner_id, ttl_at, transition_at, version, "+
		"transition_at >= (floor(extract(epoch FROM statement_timestamp()) * 1000))::bigint FROM "+table+
		" WHERE left(mutex, length($1)) = $1 ORDER BY mutex", prefix)
	return scanRows(t, rows, err)
}

// pgRow returns the row of mutex, which must exist.
func pgRow(t testing.TB, db *sql.DB, mutex string) storedRow {
	t.Helper()
	return rowOf(t, pgRows(t, db, "simba_mutex", mutex), mutex)
}

// pgConns returns how many connections the server has for the simba role besides db's.
func pgConns(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(),
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'simba' AND pid <> pg_backend_pid()").Scan(&n))
	return n
}
