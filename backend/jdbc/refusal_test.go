package jdbc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// brokenStore is a store that answers Start with a refusal (refused) or not at all.
type brokenStore struct {
	name string
	// open prepares the store (as root) and returns a backend on it.
	open    func(t *testing.T) *jdbc.Backend
	refused bool
	starts  bool   // Start succeeds: nothing the service needs is missing
	says    string // what the message must say (case-insensitive)
}

// TestStartRefusals: a store that refuses the backend (wrong credentials, a missing
// database, privilege or table, a wrong column, a read-only server or session) fails
// Start with an error matching simba.ErrRefused, in one line that says what to fix and
// names the mutex once; a store that does not answer, or has no connection to spare,
// fails it with an error that does not: the service retries those (issue 33, items 1, 13
// and 14).
func TestStartRefusals(t *testing.T) {
	needServer(t)
	myDSN := func(userPass, database string, params ...string) string {
		return fmt.Sprintf("%s@tcp(%s)/%s?%s", userPass, server.Addr(), database, strings.Join(append([]string{"interpolateParams=true"}, params...), "&"))
	}
	myBackend := func(dsn string, opts ...jdbc.Option) func(t *testing.T) *jdbc.Backend {
		return func(t *testing.T) *jdbc.Backend {
			b, err := jdbc.New(openDSN(t, dsn), opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		}
	}
	// myUser creates user with grant ({user} in it names the account) and returns a backend
	// that connects as user to database.
	myUser := func(user, grant, database string) func(t *testing.T) *jdbc.Backend {
		return func(t *testing.T) *jdbc.Backend {
			rootExec(t, fmt.Sprintf("DROP USER IF EXISTS '%[1]s'@'127.0.0.1'; CREATE USER '%[1]s'@'127.0.0.1' IDENTIFIED BY 'pw'; %[2]s",
				user, strings.ReplaceAll(grant, "{user}", fmt.Sprintf("'%s'@'127.0.0.1'", user))))
			t.Cleanup(func() { rootExec(t, fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", user)) })
			return myBackend(myDSN(user+":pw", database))(t)
		}
	}
	mysqlCases := []brokenStore{
		{name: "wrong password", open: myBackend(myDSN("simba:wrong", "simba")), refused: true, says: "Access denied"},
		{name: "unknown database", open: myUser("simba_lost", "GRANT ALL ON simba_gone.* TO {user}", "simba_gone"),
			refused: true, says: "Unknown database"},
		{name: "database without privileges", open: myBackend(myDSN("simba:simba", "no_such_db")), refused: true,
			says: "Access denied for user 'simba'@'127.0.0.1' to database 'no_such_db'"},
		{name: "user without privileges", open: myUser("simba_none", "", "simba"), refused: true, says: "Access denied"},
		{name: "user that may only read", open: myUser("simba_read", "GRANT SELECT ON simba.simba_mutex TO {user}", "simba"),
			refused: true, says: "user 'simba_read'@'127.0.0.1' may not write it (Error 1142 (42000): UPDATE command denied to user " +
				"'simba_read'@'127.0.0.1' for table `simba`.`simba_mutex`); fix: GRANT SELECT, INSERT, UPDATE, DELETE ON `simba`.`simba_mutex` " +
				"TO 'simba_read'@'127.0.0.1'"},
		{name: "user that may not update", open: myUser("simba_noupd", "GRANT SELECT, INSERT ON simba.simba_mutex TO {user}", "simba"),
			refused: true, says: "UPDATE command denied"},
		{name: "missing table", open: myBackend(myDSN("simba:simba", "simba"), jdbc.WithTable("no_such_table")),
			refused: true, says: "CREATE TABLE IF NOT EXISTS `no_such_table`"},
		{name: "wrong column", open: func(t *testing.T) *jdbc.Backend {
			scratchTable(t, "no_version", strings.Replace(goodColumns, ", `version` int unsigned NOT NULL", "", 1)+")"+binary)
			return myBackend(myDSN("simba:simba", "simba"), jdbc.WithTable("no_version"))(t)
		}, refused: true, says: "column version is missing"},
		{name: "read-only server", open: func(t *testing.T) *jdbc.Backend {
			rootExec(t, "SET GLOBAL read_only = ON")
			t.Cleanup(func() { rootExec(t, "SET GLOBAL read_only = OFF") })
			return myBackend(myDSN("simba:simba", "simba"))(t)
		}, refused: true, says: "read-only"},
		{name: "read-only session", open: myBackend(myDSN("simba:simba", "simba", "tx_read_only=1")), refused: true, says: "READ ONLY"},
		{name: "TLS the server does not offer", open: myBackend(myDSN("simba:simba", "simba", "tls=true")), refused: true, says: "TLS"},
		{name: "wrong dialect", open: myBackend(myDSN("simba:simba", "simba"), jdbc.WithDialect(jdbc.Postgres)), refused: true,
			says: "the server answers as MySQL does, use the MySQL dialect"},
		{name: "closed port", open: func(t *testing.T) *jdbc.Backend {
			return myBackend("simba:simba@tcp(127.0.0.1:1)/simba?interpolateParams=true&timeout=1s")(t)
		}, says: "connection refused"},
		{name: "too many connections", open: func(t *testing.T) *jdbc.Backend {
			b := myUser("simba_one", "GRANT ALL ON simba.* TO {user} WITH MAX_USER_CONNECTIONS 1", "simba")(t)
			hold := openDSN(t, myDSN("simba_one:pw", "simba"))
			conn, err := hold.Conn(t.Context()) // the user's one connection
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			return b
		}, says: "max_user_connections"},
	}
	for _, c := range mysqlCases {
		t.Run("mysql/"+c.name, func(t *testing.T) { checkStart(t, c) })
	}

	needPostgres(t)
	pgDSN := func(userPass, database string, params ...string) string {
		return fmt.Sprintf("postgres://%s@%s/%s?%s", userPass, pgServer.Addr(), database, strings.Join(append([]string{"sslmode=disable"}, params...), "&"))
	}
	pgBackend := func(dsn string, opts ...jdbc.Option) func(t *testing.T) *jdbc.Backend {
		return func(t *testing.T) *jdbc.Backend {
			db, err := sql.Open("pgx", dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			b, err := jdbc.New(db, append([]jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}, opts...)...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		}
	}
	pgRole := func(role, grant string, opts ...jdbc.Option) func(t *testing.T) *jdbc.Backend {
		return func(t *testing.T) *jdbc.Backend {
			pgExec(t, fmt.Sprintf("DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s LOGIN PASSWORD 'pw'; %[2]s", role, strings.ReplaceAll(grant, "{role}", role)))
			t.Cleanup(func() { pgExec(t, fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE IF EXISTS %[1]s", role)) })
			return pgBackend(pgDSN(role+":pw", "simba"), opts...)(t)
		}
	}
	pgCases := []brokenStore{
		{name: "wrong password", open: pgBackend(pgDSN("simba:wrong", "simba")), refused: true, says: "password authentication failed"},
		{name: "unknown database", open: pgBackend(pgDSN("simba:simba", "no_such_db")), refused: true, says: "does not exist"},
		{name: "role without privileges", open: pgRole("simba_none", ""), refused: true,
			says: `role simba_none may not SELECT, INSERT, UPDATE, DELETE it; fix: GRANT SELECT, INSERT, UPDATE, DELETE ON "simba_mutex" TO simba_none`},
		{name: "role that may only read", open: pgRole("simba_read", "GRANT SELECT ON simba_mutex TO {role}"), refused: true,
			says: "may not INSERT, UPDATE, DELETE it"},
		{name: "role that may not update", open: pgRole("simba_noupd", "GRANT SELECT, INSERT ON simba_mutex TO {role}"), refused: true,
			says: "may not UPDATE, DELETE it"},
		{name: "missing table", open: pgBackend(pgDSN("simba:simba", "simba"), jdbc.WithTable("no_such_table")),
			refused: true, says: `CREATE TABLE IF NOT EXISTS "no_such_table"`},
		{name: "wrong column", open: func(t *testing.T) *jdbc.Backend {
			pgTable(t, "no_version", strings.Replace(pgGoodColumns, ", version bigint NOT NULL", "", 1)+")")
			return pgBackend(pgDSN("simba:simba", "simba"), jdbc.WithTable("no_version"))(t)
		}, refused: true, says: "column version is missing"},
		{name: "read-only session", open: pgBackend(pgDSN("simba:simba", "simba", "options=-c%20default_transaction_read_only%3Don")),
			refused: true, says: "read-only"},
		{name: "wrong dialect", open: func(t *testing.T) *jdbc.Backend {
			b, err := jdbc.New(openPG(t)) // MySQL's, the default
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		}, refused: true, says: "the server answers as PostgreSQL does, use WithDialect(Postgres)"},
		{name: "role that may not delete", open: pgRole("simba_nodel", "GRANT SELECT, INSERT, UPDATE ON simba_mutex TO {role}"),
			starts: true}, // only Prune needs DELETE
		{name: "role with column privileges", open: pgRole("simba_cols", "GRANT SELECT, INSERT ON simba_mutex TO {role}; "+
			"GRANT UPDATE (acquired_at, ttl_at, transition_at, owner_id, version) ON simba_mutex TO {role}"), starts: true},
		{name: "closed port", open: pgBackend("postgres://simba:simba@127.0.0.1:1/simba?sslmode=disable&connect_timeout=1"),
			says: "connection refused"},
		{name: "TLS the server does not offer", open: pgBackend(strings.Replace(pgDSN("simba:simba", "simba"), "sslmode=disable", "sslmode=require", 1)),
			refused: true, says: "TLS"},
		{name: "malformed DSN", open: pgBackend(strings.Replace(pgDSN("simba:simba", "simba"), "sslmode=disable", "sslmode=bogus", 1)),
			refused: true, says: "sslmode is invalid"},
		{name: "too many connections", open: pgRole("simba_none_left", "ALTER ROLE {role} CONNECTION LIMIT 0"), says: "too many connections"},
	}
	for _, c := range pgCases {
		t.Run("postgres/"+c.name, func(t *testing.T) { checkStart(t, c) })
	}
}

// checkStart starts a contender on c's store and checks the error Start returns.
func checkStart(t *testing.T, c brokenStore) {
	b := c.open(t)
	mutex := mutexName(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutex, ID: "c"})
	require.NoError(t, err)
	err = svc.Start(ctx)
	if err == nil {
		_ = svc.Close()
	}
	if c.starts {
		require.NoError(t, err)
		l, err := simba.NewLocker(b, mutex)
		require.NoError(t, err)
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		return
	}
	require.Error(t, err, "Start succeeded")
	t.Log(err)
	require.NoError(t, ctx.Err(), "Start answered before its deadline")
	assert.Equal(t, c.refused, errors.Is(err, simba.ErrRefused), "errors.Is(err, simba.ErrRefused)")
	assert.Contains(t, strings.ToLower(err.Error()), strings.ToLower(c.says))
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.Equal(t, 1, strings.Count(err.Error(), mutex), "the mutex named once")
	assert.NotContains(t, err.Error(), "is it PostgreSQL", "it is")
	assert.NotContains(t, err.Error(), "the statement DDL returns", "Go API jargon: print the statement")
}

// TestRefusalDuringContention: a privilege revoked while a contention runs makes its next
// Acquire, Release and Lookup fail with an error that matches simba.ErrRefused and says
// what to grant (issue 33, item 1).
func TestRefusalDuringContention(t *testing.T) {
	needServer(t)
	needPostgres(t)
	for _, c := range []struct {
		dialect, create, revokeUpdate, revokeSelect, drop string
		open                                              func(t *testing.T) *jdbc.Backend
	}{{
		dialect: "mysql",
		create: "DROP USER IF EXISTS 'simba_rev'@'127.0.0.1'; CREATE USER 'simba_rev'@'127.0.0.1' IDENTIFIED BY 'pw'; " +
			"GRANT SELECT, INSERT, UPDATE, DELETE ON simba.simba_mutex TO 'simba_rev'@'127.0.0.1'",
		revokeUpdate: "REVOKE UPDATE ON simba.simba_mutex FROM 'simba_rev'@'127.0.0.1'",
		revokeSelect: "REVOKE SELECT ON simba.simba_mutex FROM 'simba_rev'@'127.0.0.1'",
		drop:         "DROP USER IF EXISTS 'simba_rev'@'127.0.0.1'",
		open: func(t *testing.T) *jdbc.Backend {
			b, err := jdbc.New(openDSN(t, fmt.Sprintf("simba_rev:pw@tcp(%s)/simba?interpolateParams=true", server.Addr())), jdbc.WithHandOver(false))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	}, {
		dialect:      "postgres",
		create:       "DROP ROLE IF EXISTS simba_rev; CREATE ROLE simba_rev LOGIN PASSWORD 'pw'; GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex TO simba_rev",
		revokeUpdate: "REVOKE UPDATE ON simba_mutex FROM simba_rev",
		revokeSelect: "REVOKE SELECT ON simba_mutex FROM simba_rev",
		drop:         "DROP OWNED BY simba_rev; DROP ROLE IF EXISTS simba_rev",
		open: func(t *testing.T) *jdbc.Backend {
			db, err := sql.Open("pgx", strings.Replace(pgServer.DSN(), "simba:simba@", "simba_rev:pw@", 1))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres), jdbc.WithHandOver(false))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	}} {
		t.Run(c.dialect, func(t *testing.T) {
			exec := rootExec
			if c.dialect == "postgres" {
				exec = pgExec
			}
			exec(t, c.create)
			t.Cleanup(func() { exec(t, c.drop) })
			l := leaseOf(t, c.open(t), mutexName(t), "a")
			require.Equal(t, "a", acquire(t, l).Owner)

			exec(t, c.revokeUpdate)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := l.Acquire(ctx)
			require.ErrorIs(t, err, simba.ErrRefused, "a renewal without UPDATE")
			assert.Contains(t, err.Error(), "fix: GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex TO the user")
			assert.NotContains(t, err.Error(), "\n")
			t.Log(err)
			err = l.Release(ctx)
			require.ErrorIs(t, err, simba.ErrRefused, "a release without UPDATE")
			t.Log(err)

			exec(t, c.revokeSelect)
			_, err = l.Lookup(ctx)
			require.ErrorIs(t, err, simba.ErrRefused, "a read without SELECT")
			t.Log(err)
			require.NoError(t, ctx.Err())
		})
	}
}

// CreateTable as a user that may not create tables fails with a refusal that says so.
func TestCreateTableRefused(t *testing.T) {
	needServer(t)
	rootExec(t, "DROP USER IF EXISTS 'simba_dml'@'127.0.0.1'; CREATE USER 'simba_dml'@'127.0.0.1' IDENTIFIED BY 'pw'; "+
		"GRANT SELECT, INSERT, UPDATE, DELETE ON simba.* TO 'simba_dml'@'127.0.0.1'")
	t.Cleanup(func() { rootExec(t, "DROP USER IF EXISTS 'simba_dml'@'127.0.0.1'") })
	db := openDSN(t, fmt.Sprintf("simba_dml:pw@tcp(%s)/simba?interpolateParams=true", server.Addr()))
	err := jdbc.CreateTable(t.Context(), db, jdbc.WithTable("not_created"))
	require.ErrorIs(t, err, simba.ErrRefused)
	assert.Contains(t, err.Error(), "CREATE command denied")
	assert.Contains(t, err.Error(), "fix: create it as a user that may create tables")
	t.Log(err)
}

// A role without DELETE starts (acquisitions do not need it), and its Prune fails with a
// refusal that says what to grant.
func TestPostgresPruneWithoutDelete(t *testing.T) {
	needPostgres(t)
	pgExec(t, "DROP ROLE IF EXISTS simba_keep; CREATE ROLE simba_keep LOGIN PASSWORD 'pw'; GRANT SELECT, INSERT, UPDATE ON simba_mutex TO simba_keep")
	t.Cleanup(func() { pgExec(t, "DROP OWNED BY simba_keep; DROP ROLE IF EXISTS simba_keep") })
	db, err := sql.Open("pgx", strings.Replace(pgServer.DSN(), "simba:simba@", "simba_keep:pw@", 1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))
	_, err = b.Prune(t.Context(), 0) // the row just released is prunable
	require.ErrorIs(t, err, simba.ErrRefused)
	assert.Contains(t, err.Error(), "fix: GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex TO the user")
	t.Log(err)
}

// An outage while a contention runs (connections reset, then nothing answers) fails its
// calls with errors that do not match simba.ErrRefused: the service retries them.
func TestOutageDuringContention(t *testing.T) {
	b, p := proxied(t)
	l := leaseOf(t, b, mutexName(t), "a")
	require.Equal(t, "a", acquire(t, l).Owner)
	p.PauseAccept(true)
	t.Cleanup(func() { p.PauseAccept(false) })
	p.Reset()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := l.Acquire(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, simba.ErrRefused)
	t.Log(err)
	_, err = l.Lookup(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, simba.ErrRefused)
}
