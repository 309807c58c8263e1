package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// pgTable creates table name (body: the column definitions and closing parenthesis) as
// the superuser, gives it to the simba role, and drops it when the test ends.
func pgTable(t *testing.T, name, body string) {
	t.Helper()
	pgExec(t, fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (%[2]s; ALTER TABLE %[1]s OWNER TO simba;", name, body))
	t.Cleanup(func() { pgExec(t, "DROP TABLE IF EXISTS "+name) })
}

const pgGoodColumns = `mutex varchar(66) COLLATE "C" NOT NULL PRIMARY KEY, acquired_at bigint NOT NULL, ttl_at bigint NOT NULL, ` +
	`transition_at bigint NOT NULL, owner_id varchar(128) COLLATE "C" NOT NULL, version bigint NOT NULL`

// TestPostgresStartRefusesAWrongTable: Start fails with a *SchemaError for every way a
// table can miss the format, and for one in which different names could share a row, with
// the ALTER TABLE that fixes it.
func TestPostgresStartRefusesAWrongTable(t *testing.T) {
	needPostgres(t)
	pgExec(t, `DROP COLLATION IF EXISTS folding; CREATE COLLATION folding (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`)
	cases := []struct{ name, body, fix string }{
		{"missing", "", "CREATE"},
		{"no_version", strings.Replace(pgGoodColumns, ", version bigint NOT NULL", "", 1) + ")", "ADD COLUMN version bigint"},
		{"int_times", strings.Replace(pgGoodColumns, "ttl_at bigint", "ttl_at integer", 1) + ")", "ALTER COLUMN ttl_at TYPE bigint"},
		{"int_version", strings.Replace(pgGoodColumns, "version bigint", "version integer", 1) + ")", "ALTER COLUMN version TYPE bigint"},
		{"numeric_version", strings.Replace(pgGoodColumns, "version bigint", "version numeric", 1) + ")", "ALTER COLUMN version TYPE bigint"},
		{"no_primary_key", strings.Replace(pgGoodColumns, " PRIMARY KEY", "", 1) + ")", "ADD PRIMARY KEY (mutex)"},
		{"composite_key", strings.Replace(pgGoodColumns, " PRIMARY KEY", "", 1) + ", PRIMARY KEY (mutex, owner_id))", "ADD PRIMARY KEY"},
		{"nullable", strings.Replace(pgGoodColumns, "owner_id varchar(128) COLLATE \"C\" NOT NULL", "owner_id varchar(128)", 1) + ")", "SET NOT NULL"},
		{"char_owner", strings.Replace(pgGoodColumns, `owner_id varchar(128) COLLATE "C"`, "owner_id char(32)", 1) + ")", `TYPE varchar(128) COLLATE "C"`},
		{"nondeterministic", strings.Replace(pgGoodColumns, `mutex varchar(66) COLLATE "C"`, `mutex varchar(66) COLLATE folding`, 1) + ")", `TYPE varchar(66) COLLATE "C"`},
		{"bytea_mutex", strings.Replace(pgGoodColumns, `mutex varchar(66) COLLATE "C"`, "mutex bytea", 1) + ")", `TYPE varchar(66)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := "bad_" + c.name
			if c.body != "" {
				pgTable(t, table, c.body)
			}
			b := newPGBackend(t, jdbc.WithTable(table))
			err := startOn(t, b, mutexName(t), "c")
			require.ErrorIs(t, err, jdbc.ErrSchema)
			var se *jdbc.SchemaError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), c.fix)
			assert.NotContains(t, err.Error(), "\n", "one line")
			t.Log(err)
			if c.body != "" {
				// CreateTable reports an existing table the same way.
				assert.ErrorIs(t, jdbc.CreateTable(t.Context(), openPG(t), jdbc.WithDialect(jdbc.Postgres), jdbc.WithTable(table)), jdbc.ErrSchema)
			}
		})
	}
	t.Run("view", func(t *testing.T) {
		pgExec(t, "CREATE VIEW a_view AS SELECT * FROM simba_mutex; ALTER VIEW a_view OWNER TO simba")
		t.Cleanup(func() { pgExec(t, "DROP VIEW a_view") })
		require.ErrorIs(t, startOn(t, newPGBackend(t, jdbc.WithTable("a_view")), mutexName(t), "c"), jdbc.ErrSchema)
	})
	t.Run("not_granted", func(t *testing.T) {
		pgTable(t, "not_granted", pgGoodColumns+")")
		pgExec(t, "ALTER TABLE not_granted OWNER TO postgres")
		err := startOn(t, newPGBackend(t, jdbc.WithTable("not_granted")), mutexName(t), "c")
		require.ErrorIs(t, err, jdbc.ErrSchema)
		assert.Contains(t, err.Error(), "GRANT SELECT, INSERT, UPDATE, DELETE ON")
	})
	t.Run("wrong_dialect", func(t *testing.T) {
		b, err := jdbc.New(openPG(t)) // MySQL's, the default
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		err = startOn(t, b, mutexName(t), "c")
		require.Error(t, err)
		t.Log(err)
	})
}

// TestPostgresStartChecksRealLengths: a table narrower than the format limits names
// further, and Start says so before anything is written; text columns take any length the
// format allows.
func TestPostgresStartChecksRealLengths(t *testing.T) {
	needPostgres(t)
	pgTable(t, "narrow", strings.NewReplacer("varchar(66)", "varchar(40)", "varchar(128)", "varchar(32)").Replace(pgGoodColumns)+")")
	b := newPGBackend(t, jdbc.WithTable("narrow"))
	require.ErrorIs(t, startOn(t, b, strings.Repeat("界", 41), "c"), simba.ErrInvalidArgument, "41 characters in varchar(40)")
	err := startOn(t, b, strings.Repeat("m", 41), "c")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.Equal(t, 1, strings.Count(err.Error(), strings.Repeat("m", 41)), "the mutex named once (the core names it): %v", err)
	require.ErrorIs(t, startOn(t, b, "m-narrow", strings.Repeat("c", 33)), simba.ErrInvalidArgument, "33 characters in varchar(32)")
	assert.Empty(t, pgRows(t, openPG(t), "narrow", ""), "nothing written")

	l, err := simba.NewLocker(b, strings.Repeat("界", 40), simba.WithContenderID(strings.Repeat("c", 32)))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err, "names that fit the real columns")
	require.NoError(t, lease.Release(t.Context()))

	pgTable(t, "texts", strings.NewReplacer("varchar(66)", "text", "varchar(128)", "text").Replace(pgGoodColumns)+")")
	l, err = simba.NewLocker(newPGBackend(t, jdbc.WithTable("texts")), strings.Repeat("m", jdbc.MaxMutexLength))
	require.NoError(t, err)
	lease, err = l.Acquire(t.Context())
	require.NoError(t, err, "text columns")
	require.NoError(t, lease.Release(t.Context()))
}

// TestPostgresCreateTable: CreateTable creates the table once and then finds it, in the
// search_path's schema or in the one named.
func TestPostgresCreateTable(t *testing.T) {
	needPostgres(t)
	pgExec(t, "CREATE SCHEMA IF NOT EXISTS app AUTHORIZATION simba")
	t.Cleanup(func() { pgExec(t, "DROP TABLE IF EXISTS created; DROP SCHEMA app CASCADE") })
	db := openPG(t)
	for range 2 {
		require.NoError(t, jdbc.CreateTable(t.Context(), db, jdbc.WithDialect(jdbc.Postgres), jdbc.WithTable("created")), "creates, then finds it")
	}
	require.NoError(t, jdbc.CreateTable(t.Context(), db, jdbc.WithDialect(jdbc.Postgres), jdbc.WithTable("app.simba_mutex")))
	b := newPGBackend(t, jdbc.WithTable("app.simba_mutex"))
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
	assert.Len(t, pgRows(t, db, "app.simba_mutex", ""), 1, "the row is in the schema named")

	ddl, err := jdbc.DDL(jdbc.WithDialect(jdbc.Postgres), jdbc.WithTable("app.simba_mutex"))
	require.NoError(t, err)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "app"."simba_mutex"`)
}

// TestPostgresConcurrentCreateTable: processes that start together each call CreateTable;
// PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against itself (the loser of the
// race fails on the catalogue's unique index), and every one of them must still succeed.
func TestPostgresConcurrentCreateTable(t *testing.T) {
	needPostgres(t)
	db := openPG(t)
	for round := range 5 {
		table := fmt.Sprintf("racing_%d", round)
		t.Cleanup(func() { pgExec(t, "DROP TABLE IF EXISTS "+table) })
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				errs[i] = jdbc.CreateTable(t.Context(), db, jdbc.WithDialect(jdbc.Postgres), jdbc.WithTable(table))
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, caller %d", round, i)
		}
	}
}

// TestPostgresStartFailsFast: a read-only session (a standby, say), a wrong password and a
// closed port each fail Start at once with a one-line error that says which; a missing
// table is ErrSchema (TestPostgresStartRefusesAWrongTable).
func TestPostgresStartFailsFast(t *testing.T) {
	needPostgres(t)
	b, err := jdbc.New(openPG(t, "options=-c%20default_transaction_read_only%3Don"), jdbc.WithDialect(jdbc.Postgres))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	err = startOn(t, b, mutexName(t), "c")
	require.ErrorIs(t, err, jdbc.ErrSchema)
	assert.Contains(t, err.Error(), "read-only")

	for _, c := range []struct{ name, dsn string }{
		{"wrong password", strings.Replace(pgServer.DSN(), "simba:simba@", "simba:wrong@", 1)},
		{"closed port", "postgres://simba:simba@127.0.0.1:1/simba?sslmode=disable"},
	} {
		db, err := sql.Open("pgx", c.dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		began := time.Now()
		err = startOn(t, b, mutexName(t), "c")
		require.Error(t, err, c.name)
		assert.Less(t, time.Since(began), 5*time.Second, "%s: Start fails fast", c.name)
		assert.NotErrorIs(t, err, jdbc.ErrSchema, c.name)
		assert.NotErrorIs(t, err, simba.ErrInvalidArgument, c.name)
		assert.NotContains(t, err.Error(), "\n", "one line")
		t.Logf("%s: %v", c.name, err)
	}
}

// TestPostgresNamesAtTheLimits: names and IDs at the limits are stored exactly;
// one character more is rejected before any I/O; names that differ only in case or accents
// are different mutexes.
func TestPostgresNamesAtTheLimits(t *testing.T) {
	db := openPG(t)
	b := newPGBackend(t)
	prefix := mutexName(t)
	namesAtTheLimits(t, b, prefix, func(mutex string) storedRow { return pgRow(t, db, mutex) })
	names := []string{prefix + "-lock-e", prefix + "-Lock-E", prefix + "-lock-é", prefix + "-LOCK-É", prefix + "-lock-ｅ"}
	for i, name := range names {
		l, err := simba.NewLocker(newPGBackend(t), name, simba.WithContenderID(fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
		lease, err := l.TryAcquire(t.Context())
		require.NoError(t, err, "%q is a mutex of its own", name)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
	}
	assert.Len(t, pgRows(t, db, "simba_mutex", prefix), 4+len(names), "one row per name, nothing truncated")
}

// TestPostgresStoreDoesNotRejectBadNames shows why the backend checks lengths itself: the
// server refuses an over-long value it would store, but one in a WHERE clause is no error
// at all; it matches nothing (a contender that never wins and never fails).
func TestPostgresStoreDoesNotRejectBadNames(t *testing.T) {
	db := openPG(t)
	_, err := db.ExecContext(t.Context(), "INSERT INTO simba_mutex VALUES ($1, 0, 0, 0, '', 0)", strings.Repeat("n", 67))
	assert.Error(t, err, "too long for varchar(66)")
	res, err := db.ExecContext(t.Context(), "UPDATE simba_mutex SET version = version + 1 WHERE mutex = $1", strings.Repeat("n", 67))
	require.NoError(t, err, "an over-long name in a WHERE is no error...")
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.Zero(t, n, "... it matches nothing")
}

// TestPostgresVersionExhausted: a row at the largest version the format allows gives no
// larger token: acquiring fails rather than repeating one.
func TestPostgresVersionExhausted(t *testing.T) {
	db := openPG(t)
	mutex := mutexName(t)
	_, err := db.ExecContext(t.Context(), "INSERT INTO simba_mutex VALUES ($1, 0, 0, 0, '', 4294967295)", mutex)
	require.NoError(t, err)
	c := leaseOf(t, newPGBackend(t), mutex, "c")
	_, err = c.Acquire(t.Context())
	require.Error(t, err)
	assert.Equal(t, uint64(4294967295), pgRow(t, db, mutex).Version, "nothing written")
}

// TestPostgresTokens: the token is the version of the tenure's first UPDATE, which the
// UPDATE's RETURNING tells; a renewal keeps it and marks ttl_at; a release and a new
// acquisition give a larger one; a row deleted behind the backend's back comes back above
// every version the backend saw.
func TestPostgresTokens(t *testing.T) {
	db := openPG(t)
	mutex := mutexName(t)
	b := newPGBackend(t, jdbc.WithHandOver(false))
	a := leaseOf(t, b, mutex, "a")
	first := acquire(t, a)
	require.Equal(t, "a", first.Owner)
	row := pgRow(t, db, mutex)
	assert.Equal(t, first.Token, row.Version)
	assert.Equal(t, int64(time.Second/time.Millisecond), int64(row.TransitionAt-row.TTLAt), "a new tenure: no mark")

	renewed := acquire(t, a)
	assert.Equal(t, first.Token, renewed.Token, "a renewal keeps the token")
	row = pgRow(t, db, mutex)
	assert.Equal(t, first.Token+1, row.Version, "a renewal bumps the version")
	assert.Equal(t, int64(time.Second/time.Millisecond)+1, int64(row.TransitionAt-row.TTLAt), "a renewal writes ttl_at a millisecond short")

	other := leaseOf(t, newPGBackend(t, jdbc.WithHandOver(false)), mutex, "b")
	assert.Equal(t, "a", acquire(t, other).Owner, "held")
	require.NoError(t, a.Release(t.Context()))
	next := acquire(t, other)
	require.Equal(t, "b", next.Owner)
	assert.Greater(t, next.Token, renewed.Token)
	require.NoError(t, other.Release(t.Context()))

	acquire(t, a)
	require.NoError(t, a.Release(t.Context()))
	high := pgRow(t, db, mutex).Version
	_, err := db.ExecContext(t.Context(), "DELETE FROM simba_mutex WHERE mutex = $1", mutex)
	require.NoError(t, err)
	again := acquire(t, a)
	assert.Greater(t, again.Token, high, "the row came back above the highest version the backend saw")
	require.NoError(t, a.Release(t.Context()))
}

// TestPostgresHandOverWakesTheWaiter: a waiter polls only every 16 s or so with the default
// TTL; the advisory lock hands the mutex over when its owner stops. Also when commits are
// slow (a trigger makes each take 50 ms): the lock goes only once the release committed,
// since a woken waiter's UPDATE reads the row as of its snapshot and does not wait for an
// uncommitted release.
func TestPostgresHandOverWakesTheWaiter(t *testing.T) {
	handOvers(t)
	needPostgres(t)
	pgTable(t, "slow_commits", pgGoodColumns+")")
	pgExec(t, `CREATE OR REPLACE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.05); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT OR UPDATE ON slow_commits DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();`)
	handOvers(t, jdbc.WithTable("slow_commits"))
}

// TestPostgresWokenWaiterFindsTheReleaseCommitted (issue 35): the release lets the
// advisory lock go in the same statement, yet a waiter is woken only once the release has
// committed. The premise: a PostgreSQL UPDATE evaluates its WHERE on the row as its
// snapshot has it and passes over a row whose change is not committed yet, without
// waiting (a blocked UPDATE re-checks the row's new version only when the old one
// matched), so a waiter woken before the commit would find the owner's row. The release
// keeps the lock at transaction level until its transaction ends.
func TestPostgresWokenWaiterFindsTheReleaseCommitted(t *testing.T) {
	ctx := t.Context()
	db := openPG(t)
	mutex := mutexName(t)
	const key = "8070450527952961541"
	_, err := db.ExecContext(ctx, "INSERT INTO simba_mutex VALUES ($1, 0, 0, 9000000000000000000, 'a', 7)", mutex)
	require.NoError(t, err)
	conns := make([]*sql.Conn, 2)
	pids := make([]int64, 2)
	for i := range conns {
		conns[i], err = db.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conns[i].Close() })
		require.NoError(t, conns[i].QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pids[i]))
	}
	a, c := conns[0], conns[1]
	_, err = a.ExecContext(ctx, "SELECT pg_advisory_lock($1::text::bigint)", key)
	require.NoError(t, err)
	granted := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, "SELECT pg_advisory_lock($1::text::bigint)", key)
		granted <- err
	}()
	waiting := func() bool {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND NOT granted",
			pids[1]).Scan(&n))
		return n == 1
	}
	waitUntil(t, 10*time.Second, "c to wait for the advisory lock", waiting)

	tx, err := a.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var unlocked bool
	require.NoError(t, tx.QueryRowContext(ctx, jdbc.ReleaseUnlockSQL(jdbc.Postgres), nil, mutex, "a", 7, key).Scan(&unlocked))
	assert.True(t, unlocked, "the release lets the session's hold go")
	assert.True(t, waiting(), "c still waits while the release has not committed")

	// The premise: an UPDATE meanwhile passes over the row instead of waiting for it.
	res, err := db.ExecContext(ctx, "UPDATE simba_mutex SET owner_id = 'x', version = version + 1 WHERE mutex = $1 AND owner_id = ''", mutex)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.Zero(t, n, "an UPDATE during the release finds the owner's row, and does not wait")

	require.NoError(t, tx.Commit())
	select {
	case err := <-granted:
		require.NoError(t, err, "c is woken once the release committed")
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not let the advisory lock go")
	}
	res, err = c.ExecContext(ctx, "UPDATE simba_mutex SET owner_id = 'c', version = version + 1 WHERE mutex = $1 AND owner_id = ''", mutex)
	require.NoError(t, err)
	n, err = res.RowsAffected()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "c's UPDATE finds the row free")
	_, err = c.ExecContext(ctx, "SELECT pg_advisory_unlock($1::text::bigint)", key)
	require.NoError(t, err)
}

// handOvers hands a mutex back and forth between two contenders on backends with opts.
func handOvers(t *testing.T, opts ...jdbc.Option) {
	t.Helper()
	mutex := mutexName(t)
	ba, bb := newPGBackend(t, opts...), newPGBackend(t, opts...)
	a := newContender(t, ba, mutex, "a")
	b := newContender(t, bb, mutex, "b")
	require.NoError(t, a.svc.Start(t.Context()))
	first := wait(t, a.acquired, 10*time.Second, "acquisition by a")
	require.NoError(t, b.svc.Start(t.Context()))
	waitsBehind(t, b, bb, mutex, "a")

	for range 3 { // back and forth
		began := time.Now()
		require.NoError(t, a.svc.Stop(t.Context()))
		next := wait(t, b.acquired, 5*time.Second, "hand-over to b (polling would take about 16 s)")
		t.Logf("hand-over took %v", time.Since(began))
		assert.Greater(t, next.After.Token, first.After.Token)
		first = next
		a, b = b, a
		ba, bb = bb, ba
		require.NoError(t, b.svc.Start(t.Context()))
		waitsBehind(t, b, bb, mutex, a.svc.ContenderID())
	}
	require.NoError(t, a.svc.Stop(t.Context()))
	require.NoError(t, b.svc.Stop(t.Context()))
}

// TestPostgresReleaseDoesNotWaitForTheDisk (issue 18, the cycle's cost): the release
// statement turns synchronous_commit off for its own transaction, so that its commit does
// not wait for a WAL flush; the session's setting is left as it was. (The test server runs
// with synchronous_commit off; the session turns it on first.)
func TestPostgresReleaseDoesNotWaitForTheDisk(t *testing.T) {
	db := openPG(t)
	mutex := mutexName(t)
	c := leaseOf(t, newPGBackend(t), mutex, "a")
	acquire(t, c)
	row := pgRow(t, db, mutex)
	require.Equal(t, "a", row.Owner)

	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	setting := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var v string
		require.NoError(t, q.QueryRowContext(t.Context(), "SHOW synchronous_commit").Scan(&v))
		return v
	}
	_, err = conn.ExecContext(t.Context(), "SET synchronous_commit = on")
	require.NoError(t, err)
	tx, err := conn.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	res, err := tx.ExecContext(t.Context(), jdbc.ReleaseSQL(jdbc.Postgres), nil, mutex, "a", row.Version)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the release matched the owner's row")
	assert.Equal(t, "off", setting(tx), "within the release's transaction")
	require.NoError(t, tx.Commit())
	assert.Equal(t, "on", setting(conn), "the session's own setting after it")
	assert.Empty(t, pgRow(t, db, mutex).Owner)
}

// TestPostgresStatementsBoundedOnTheServer: an admin transaction holds the
// mutex row with SELECT ... FOR UPDATE. An acquisition gives up at its context's deadline,
// and the server gives its statement up too (lock_timeout, set by the statement): no
// backend session is left waiting for the row. A wait for the advisory lock ends on the
// server at its timeout with the error the dialect knows as one.
func TestPostgresStatementsBoundedOnTheServer(t *testing.T) {
	db := openPG(t)
	mutex := mutexName(t)
	b := newPGBackend(t)
	owner := leaseOf(t, b, mutex, "a")
	acquire(t, owner)

	tx, err := db.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var v uint64
	require.NoError(t, tx.QueryRowContext(t.Context(), "SELECT version FROM simba_mutex WHERE mutex = $1 FOR UPDATE", mutex).Scan(&v))

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	began := time.Now()
	_, err = owner.Acquire(ctx)
	cancel()
	require.Error(t, err, "the renewal waits for the row")
	assert.Less(t, time.Since(began), 2*time.Second, "bounded by the context")
	waiting := func() int {
		var n int
		require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE usename = 'simba' "+
			"AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%'").Scan(&n))
		return n
	}
	waitUntil(t, 5*time.Second, "the server to give the abandoned statement up", func() bool { return waiting() == 0 })
	require.NoError(t, tx.Rollback())
	assert.Equal(t, "a", acquire(t, owner).Owner, "the lease goes on")
	require.NoError(t, owner.Release(t.Context()))

	// The named lock's wait, with a one-second server-side timeout.
	holder, err := db.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	_, err = holder.ExecContext(t.Context(), "SELECT pg_advisory_lock(42)")
	require.NoError(t, err)
	var got sql.NullInt64
	err = db.QueryRowContext(t.Context(), "SELECT CASE WHEN set_config('lock_timeout', ($2::int * 1000)::text, true) IS NULL THEN NULL "+
		"ELSE (pg_advisory_lock($1::text::bigint) IS NOT NULL)::int END", "42", 1).Scan(&got)
	require.Error(t, err)
	assert.True(t, jdbc.TimedOut(jdbc.Postgres, err), "%v", err)
	assert.False(t, jdbc.TimedOut(jdbc.Postgres, context.DeadlineExceeded))
	_, err = holder.ExecContext(t.Context(), "SELECT pg_advisory_unlock(42)")
	require.NoError(t, err)
}

// TestPostgresNoClockStep: the database's clock cannot be moved here, but every answer
// carries it, and a backend whose answers show the expected movement counts no step.
func TestPostgresNoClockStep(t *testing.T) {
	var logs records
	b := newPGBackend(t)
	c := leaseOf(t, b, mutexName(t), "a", slog.New(&logs))
	for range 5 {
		acquire(t, c)
	}
	require.NoError(t, c.Release(t.Context()))
	assert.Zero(t, b.ClockSteps())
	assert.Empty(t, logs.at(slog.LevelError))
}

// TestPostgresPrune: Prune deletes rows without an owner, keeps the floor, and a mutex
// used again gets a larger token than any it had.
func TestPostgresPrune(t *testing.T) {
	db := openPG(t)
	prefix := mutexName(t)
	b := newPGBackend(t, jdbc.WithHandOver(false))
	var high uint64
	for i := range 3 {
		c := leaseOf(t, b, fmt.Sprintf("%s-%d", prefix, i), "a")
		high = max(high, acquire(t, c).Token)
		require.NoError(t, c.Release(t.Context()))
	}
	held := leaseOf(t, b, prefix+"-held", "a")
	acquire(t, held)
	n, err := b.Prune(t.Context(), 0)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, int64(3))
	rows := pgRows(t, db, "simba_mutex", prefix)
	require.Len(t, rows, 1, "the held row stays")
	assert.Equal(t, prefix+"-held", rows[0].Mutex)

	fresh := leaseOf(t, newPGBackend(t, jdbc.WithHandOver(false)), prefix+"-0", "b")
	assert.Greater(t, acquire(t, fresh).Token, high, "a backend that never saw the row starts above the floor")
	require.NoError(t, fresh.Release(t.Context()))
	require.NoError(t, held.Release(t.Context()))
}

// FuzzPostgresNames fuzzes the name and ID limits on the real schema: a
// name and ID that a Locker accepts are stored and read back exactly, owned and released
// by their contender; one that it rejects fails with ErrInvalidArgument.
// The seeds run with the package's tests; make fuzz runs it against a PostgreSQL of each
// fuzz worker's own.
func FuzzPostgresNames(f *testing.F) {
	for _, r := range []string{"m", "é", "界", "😀"} {
		f.Add(strings.Repeat(r, jdbc.MaxMutexLength), strings.Repeat(r, jdbc.MaxContenderIDLength))
		f.Add(strings.Repeat(r, jdbc.MaxMutexLength+1), "c")
		f.Add("m", strings.Repeat(r, jdbc.MaxContenderIDLength+1))
	}
	for _, s := range []string{"Lock-E", "lock-é", "a\x00b", "a\xffb", " m", "m ", "'; DROP TABLE simba_mutex; --", `"quoted"`, "$1"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, mutex, id string) {
		b := newPGBackend(t, jdbc.WithHandOver(false))
		l, err := simba.NewLocker(b, mutex, simba.WithContenderID(id))
		if err != nil {
			require.ErrorIs(t, err, simba.ErrInvalidArgument) // NewLocker does no I/O
			return
		}
		assert.LessOrEqual(t, len([]rune(mutex)), jdbc.MaxMutexLength)
		assert.LessOrEqual(t, len([]rune(id)), jdbc.MaxContenderIDLength)
		lease, err := l.TryAcquire(t.Context())
		require.NoError(t, err, "%q as %q", mutex, id)
		var owner string
		var version uint64
		require.NoError(t, openPG(t).QueryRowContext(t.Context(), "SELECT owner_id, version FROM simba_mutex WHERE mutex = $1", mutex).
			Scan(&owner, &version))
		assert.Equal(t, id, owner, "stored exactly")
		// The first renewal on simba's renewal grid may come right after the acquisition.
		assert.Contains(t, []uint64{lease.Token(), lease.Token() + 1}, version, "the token, or one more after a renewal")
		require.NoError(t, lease.Release(t.Context()))
	})
}

// TestPostgresReleaseLetsTheLockGo: an owner holds its advisory lock for its tenure; its
// release lets it go, and so does a release that finds the row taken from it.
func TestPostgresReleaseLetsTheLockGo(t *testing.T) {
	db := openPG(t)
	advisory := func() int { return advisoryLocks(t, db, "AND granted") }
	before := advisory()
	mutex := mutexName(t)
	c := leaseOf(t, newPGBackend(t), mutex, "a")
	require.Equal(t, "a", acquire(t, c).Owner)
	assert.Equal(t, before+1, advisory(), "the owner holds its advisory lock")
	require.NoError(t, c.Release(t.Context()))
	assert.Equal(t, before, advisory(), "released with the row")
	assert.Empty(t, pgRow(t, db, mutex).Owner)

	require.Equal(t, "a", acquire(t, c).Owner)
	_, err := db.ExecContext(t.Context(), "UPDATE simba_mutex SET owner_id = 'x', version = version + 1 WHERE mutex = $1", mutex)
	require.NoError(t, err)
	require.NoError(t, c.Release(t.Context()))
	assert.Equal(t, before, advisory(), "let go although the row was not the contender's any more")
	assert.Equal(t, "x", pgRow(t, db, mutex).Owner, "another's row is left alone")
}

// TestPostgresPollingFallback: without the hand-over (behind a transaction-pooling proxy)
// nothing takes an advisory lock, and a waiter learns of a release at its next contend
// period.
func TestPostgresPollingFallback(t *testing.T) {
	db := openPG(t)
	advisory := func() int { return advisoryLocks(t, db, "") }
	before := advisory()
	mutex := mutexName(t)
	// The call timeout (ttl/4) outlasts a loaded machine's statements.
	opts := []simba.Option{simba.WithTTL(2 * time.Second), simba.WithTransition(time.Second)}
	a := newContender(t, newPGBackend(t, jdbc.WithHandOver(false)), mutex, "a", opts...)
	cb := &counting{Backend: newPGBackend(t, jdbc.WithHandOver(false))}
	b := newContender(t, cb, mutex, "b", opts...)
	require.NoError(t, a.svc.Start(t.Context()))
	first := wait(t, a.acquired, 10*time.Second, "acquisition by a")
	require.NoError(t, b.svc.Start(t.Context()))
	waitUntil(t, 10*time.Second, "b to find a owning the mutex", func() bool { return cb.answered.Load() > 0 })
	assert.Equal(t, before, advisory(), "no advisory lock taken or waited for")
	began := time.Now()
	require.NoError(t, a.svc.Stop(t.Context()))
	next := wait(t, b.acquired, 10*time.Second, "b at its next contend period")
	t.Logf("hand-over by polling took %v (ttl + transition + jitter at most: 4 s)", time.Since(began))
	assert.Greater(t, next.After.Token, first.After.Token)
	assert.Greater(t, cb.answered.Load(), int64(1), "b acquired on its first attempt, not on a later one")
	require.NoError(t, b.svc.Stop(t.Context()))
}

// advisoryLocks counts the advisory locks on the server, held or waited for, that match
// the condition on pg_locks and ("AND granted": held).
func advisoryLocks(t *testing.T, db *sql.DB, and string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "+and).Scan(&n))
	return n
}

// TestPostgresContendedIsFair: eight Lockers on one mutex take turns. A wait for the
// advisory lock that ends in an error (a cancellation, lock_timeout) may have taken the
// lock all the same; a connection that went back to the pool holding it would let its
// next contention take it again at once, re-entrantly, for ever, while the others starve.
func TestPostgresContendedIsFair(t *testing.T) {
	mutex := mutexName(t)
	const n = 8
	lockers := make([]*simba.Locker, n)
	for i := range lockers {
		l, err := simba.NewLocker(newPGBackend(t), mutex)
		require.NoError(t, err)
		lockers[i] = l
	}
	// Turns are counted once every client has had one, so that the clients that started
	// first (their backends set up, the others' still starting) do not count as favoured.
	var counts [n]atomic.Int64
	var started sync.WaitGroup
	started.Add(n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Go(func() {
			first := true
			for ctx.Err() == nil {
				lease, err := l.Acquire(ctx)
				if err != nil {
					return
				}
				counts[i].Add(1)
				_ = lease.Release(context.Background())
				if first {
					first = false
					started.Done()
				}
			}
		})
	}
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
		wg.Wait()
		t.Fatalf("a client never had a turn in 30s: %v", &counts)
	}
	var base [n]int64
	for i := range counts {
		base[i] = counts[i].Load()
	}
	time.Sleep(2 * time.Second) // the window the turns are counted in
	cancel()
	wg.Wait()
	var lo, hi int64 = 1 << 62, 0
	for i := range counts {
		c := counts[i].Load() - base[i]
		lo, hi = min(lo, c), max(hi, c)
	}
	t.Logf("sections per client in the window: %d to %d", lo, hi)
	assert.GreaterOrEqual(t, float64(lo), 0.2*float64(hi), "the clients take turns")

	// The statement that settles a session that may hold the lock.
	db := openPG(t)
	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	const key, held = "-8070450527952961534", "AND granted AND classid = 2415919105 AND objid = 2" // 0x90000001_00000002
	holder := func() (pid int64) {
		require.NoError(t, db.QueryRowContext(t.Context(), jdbc.PgHolderSQL, key).Scan(&pid))
		return pid
	}
	assert.Zero(t, holder(), "nobody holds the lock")
	_, err = conn.ExecContext(t.Context(), "SELECT pg_advisory_lock($1::text::bigint)", key)
	require.NoError(t, err)
	require.Equal(t, 1, advisoryLocks(t, db, held))
	var pid int64
	require.NoError(t, conn.QueryRowContext(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	assert.Equal(t, pid, holder(), "the statement that tells who holds the lock")
	for range 2 { // let go, then nothing to do
		_, err = conn.ExecContext(t.Context(), jdbc.SettleSQL(jdbc.Postgres), key)
		require.NoError(t, err)
		assert.Zero(t, advisoryLocks(t, db, held))
	}
}

// TestPostgresUncontendedCycleStatements (issues 18, 35): an uncontended Locker cycle runs
// two statements: the acquire, which tries the advisory lock too, and the release, which
// lets it go once its transaction has committed (the try and the unlock were statements of
// their own). The advisory lock is free after the release. The acquire does not carry the
// read of the row that a contended one does (pgAcquireLocking: it cost the server 35-60 µs
// a cycle, unused when the acquire matches).
func TestPostgresUncontendedCycleStatements(t *testing.T) {
	needPostgres(t)
	var s statements
	db := countedDB(t, "pgx", pgServer.DSN(), &s)
	b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	before := advisoryLocks(t, openPG(t), "AND granted")
	const cycles = 50
	counts := cycleStatements(t, b, &s, cycles)
	t.Logf("statements per cycle: %s", perUnit(counts, cycles))
	assert.Equal(t, map[string]int{"acquire+lock": cycles, "release+unlock": cycles}, counts)
	assert.Equal(t, before, advisoryLocks(t, openPG(t), "AND granted"), "the advisory lock is free after the release")
}

// TestPostgresContendedSectionStatements (issue 35): three Lockers take turns on one mutex,
// each acquiring again as soon as it released. A section costs four statements: the
// waiter's wait for the advisory lock, its acquire and its release, and the acquire of the
// one that just released, which tries the lock and reads the row in one. Nobody reads who
// holds the lock apart from a read of the row (a deferral that lasted its while), and no
// acquisition runs its acquire twice.
func TestPostgresContendedSectionStatements(t *testing.T) {
	needPostgres(t)
	checkSectionStatements(t, "pgx", pgServer.DSN(), jdbc.WithDialect(jdbc.Postgres))
}

// TestPostgresAcquireLeavesAFreeRowToTheLockHolder: the acquire that tries the advisory
// lock begins a new tenure only with the lock. When another session holds it (a waiter
// just woken by a release), the free row is left to that session for a while, as after a
// try of its own.
func TestPostgresAcquireLeavesAFreeRowToTheLockHolder(t *testing.T) {
	ctx := t.Context()
	db := openPG(t)
	mutex := mutexName(t)
	_, err := db.ExecContext(ctx, "INSERT INTO simba_mutex VALUES ($1, 0, 0, 0, '', 0)", mutex)
	require.NoError(t, err)
	log := &records{}
	b := newPGBackend(t)
	x := leaseOf(t, b, mutex, "x", slog.New(log))
	holder, err := db.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	var pid int64
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1::text::bigint)) AS l",
		b.LockName(mutex)).Scan(&pid))

	rec := acquire(t, x)
	assert.Contains(t, deferrals(log), pid, "x left the free row to the lock's holder first")
	assert.Equal(t, "x", rec.Owner, "and took it once the holder had not")
	require.NoError(t, x.Release(ctx))
}

// TestPostgresFailedAcquireLetsTheLockGo: an acquire that tried the advisory lock and then
// failed on the server (lock_timeout, behind an admin's row lock) may have taken the lock
// all the same: a session-level advisory lock outlives the failed transaction. It is let
// go before the next try, so that the owner's release lets it go for good and a waiter is
// not left waiting behind a lock nobody knows of.
func TestPostgresFailedAcquireLetsTheLockGo(t *testing.T) {
	ctx := t.Context()
	db := openPG(t)
	mutex := mutexName(t)
	b := newPGBackend(t)
	x := leaseOf(t, b, mutex, "x")
	require.Equal(t, "x", acquire(t, x).Owner) // the row exists
	require.NoError(t, x.Release(ctx))
	before := advisoryLocks(t, db, "AND granted")

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var v uint64
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT version FROM simba_mutex WHERE mutex = $1 FOR UPDATE", mutex).Scan(&v))
	actx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = x.Acquire(actx)
	cancel()
	require.Error(t, err, "the acquire waits for the row")
	require.NoError(t, tx.Rollback())

	require.Equal(t, "x", acquire(t, x).Owner)
	require.NoError(t, x.Release(ctx))
	assert.Equal(t, before, advisoryLocks(t, db, "AND granted"), "no advisory lock is left held")
}

// TestPostgresReadLeavesTheLockSessionAlone: while an owner's pinned session holds the
// advisory lock, a read of the row (Lookup) runs on the pool (see run) and does not touch
// that session. It once checked the pinned connection first all the same, and pgx pings
// a connection idle for more than a second when database/sql checks it: a round trip
// wasted, seen as the session's last query.
func TestPostgresReadLeavesTheLockSessionAlone(t *testing.T) {
	db := openPG(t)
	mutex := mutexName(t)
	b := newPGBackend(t)
	x := leaseOf(t, b, mutex, "x")
	require.Equal(t, "x", acquire(t, x).Owner)
	var session int64
	require.NoError(t, db.QueryRowContext(t.Context(), jdbc.PgHolderSQL, b.LockName(mutex)).Scan(&session))
	require.NotZero(t, session, "the owner's session holds the advisory lock")
	last := func() (q string) {
		require.NoError(t, db.QueryRowContext(t.Context(), "SELECT query FROM pg_stat_activity WHERE pid = $1", session).Scan(&q))
		return q
	}
	before := last()

	time.Sleep(1100 * time.Millisecond) // a premise, not a wait: pgx pings a connection idle for longer than a second
	rec, err := x.Lookup(t.Context())
	require.NoError(t, err)
	require.Equal(t, "x", rec.Owner)
	assert.Equal(t, before, last(), "the lock's session ran nothing for the read")
	require.NoError(t, x.Release(t.Context()))
}
