package jdbc_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// scratchTable creates table simba.<name> as root (body: the column definitions, a closing
// parenthesis and table options) and drops it when the test ends.
func scratchTable(t *testing.T, name, body string) {
	t.Helper()
	rootExec(t, fmt.Sprintf("DROP TABLE IF EXISTS simba.%[1]s; CREATE TABLE simba.%[1]s (%[2]s", name, body))
	t.Cleanup(func() { rootExec(t, "DROP TABLE IF EXISTS simba."+name) })
}

// startOn starts a contender for mutex as id on backend b and returns Start's error; a
// started service is stopped when the test ends.
func startOn(t *testing.T, b *jdbc.Backend, mutex, id string) error {
	t.Helper()
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutex, ID: id})
	require.NoError(t, err)
	if err := svc.Start(t.Context()); err != nil {
		return err
	}
	t.Cleanup(func() { _ = svc.Close() })
	return nil
}

const (
	goodColumns = "`mutex` varchar(66) NOT NULL PRIMARY KEY, `acquired_at` bigint unsigned NOT NULL, " +
		"`ttl_at` bigint unsigned NOT NULL, `transition_at` bigint unsigned NOT NULL, " +
		"`owner_id` varchar(128) NOT NULL, `version` int unsigned NOT NULL"
	binary = " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
)

// TestStartRefusesAWrongTable: Start fails with a *SchemaError, within the call timeout,
// for every way a table can miss the format, and a table that names can share a row in.
func TestStartRefusesAWrongTable(t *testing.T) {
	needServer(t)
	cases := []struct{ name, body string }{
		{"missing", ""},
		{"no_version", strings.Replace(goodColumns, ", `version` int unsigned NOT NULL", "", 1) + ")" + binary},
		{"int_times", strings.Replace(goodColumns, "`ttl_at` bigint unsigned", "`ttl_at` int unsigned", 1) + ")" + binary},
		{"signed_int_version", strings.Replace(goodColumns, "`version` int unsigned", "`version` int", 1) + ")" + binary},
		{"no_primary_key", strings.Replace(goodColumns, " PRIMARY KEY", "", 1) + ")" + binary},
		{"composite_key", strings.Replace(goodColumns, " PRIMARY KEY", "", 1) + ", PRIMARY KEY (mutex, owner_id))" + binary},
		{"nullable", strings.Replace(goodColumns, "`owner_id` varchar(128) NOT NULL", "`owner_id` varchar(128) NULL", 1) + ")" + binary},
		{"case_insensitive", goodColumns + ") CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"},
		{"latin1", goodColumns + ") CHARACTER SET latin1 COLLATE latin1_bin"},
		{"utf8mb3", goodColumns + ") CHARACTER SET utf8mb3 COLLATE utf8mb3_bin"},
		// JVM Simba's own DDL, on this server's default character set (latin1,
		// case-insensitive).
		{"jvm_ddl", "mutex varchar(66) not null primary key, acquired_at bigint unsigned not null, " +
			"ttl_at bigint unsigned not null, transition_at bigint unsigned not null, " +
			"owner_id char(32) not null, version int unsigned not null)"},
		{"text_mutex", strings.Replace(goodColumns, "`mutex` varchar(66)", "`mutex` bigint", 1) + ")" + binary},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := "bad_" + c.name
			if c.body != "" {
				scratchTable(t, table, c.body)
			}
			b := newBackend(t, jdbc.WithTable(table))
			err := startOn(t, b, mutexName(t), "c")
			require.ErrorIs(t, err, jdbc.ErrSchema)
			var se *jdbc.SchemaError
			require.ErrorAs(t, err, &se)
			assert.NotEmpty(t, se.Problems)
			t.Log(err)
			if c.body != "" {
				// CreateTable reports an existing table the same way.
				assert.ErrorIs(t, jdbc.CreateTable(t.Context(), openDB(t), jdbc.WithTable(table)), jdbc.ErrSchema)
			}
		})
	}
}

// TestStartChecksRealLengths: a table narrower than the format (JVM Simba's owner_id is
// char(32)) limits names further; Start says so before anything is written.
func TestStartChecksRealLengths(t *testing.T) {
	needServer(t)
	scratchTable(t, "narrow", strings.NewReplacer("varchar(66)", "varchar(40)", "varchar(128)", "char(32)").Replace(goodColumns)+")"+binary)
	b := newBackend(t, jdbc.WithTable("narrow"))
	long := strings.Repeat("界", 41)
	err := startOn(t, b, long, "c")
	require.ErrorIs(t, err, simba.ErrInvalidArgument, "41 characters in varchar(40)")
	assert.NotErrorIs(t, err, simba.ErrRefused, "the name is to change, not the store")
	ascii := strings.Repeat("m", 41)
	err = startOn(t, b, ascii, "c")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.Equal(t, 1, strings.Count(err.Error(), ascii), "the mutex named once (the core names it): %v", err)
	err = startOn(t, b, "m-narrow", strings.Repeat("c", 33))
	require.ErrorIs(t, err, simba.ErrInvalidArgument, "33 characters in char(32)")
	assert.Empty(t, readRows(t, openDB(t), "narrow", ""), "nothing written")

	l, err := simba.NewLocker(b, strings.Repeat("界", 40), simba.WithContenderID(strings.Repeat("c", 32)))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err, "names that fit the real columns")
	require.NoError(t, lease.Release(t.Context()))
}

// A binary column counts bytes.
func TestBinaryColumnsCountBytes(t *testing.T) {
	needServer(t)
	scratchTable(t, "bytes", strings.NewReplacer("varchar", "varbinary").Replace(goodColumns)+")")
	b := newBackend(t, jdbc.WithTable("bytes"))
	require.ErrorIs(t, startOn(t, b, strings.Repeat("é", 34), "c"), simba.ErrInvalidArgument, "68 bytes in varbinary(66)")
	l, err := simba.NewLocker(b, strings.Repeat("é", 33))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err, "66 bytes")
	require.NoError(t, lease.Release(t.Context()))
}

func TestCreateTable(t *testing.T) {
	db := openDB(t)
	t.Cleanup(func() { rootExec(t, "DROP TABLE IF EXISTS simba.created; DROP TABLE IF EXISTS simba.created2") })
	for range 2 {
		require.NoError(t, jdbc.CreateTable(t.Context(), db, jdbc.WithTable("created")), "creates, then finds it")
	}
	require.NoError(t, jdbc.CreateTable(t.Context(), db, jdbc.WithTable("simba.created2")), "schema-qualified")
	b := newBackend(t, jdbc.WithTable("simba.created2"))
	l, err := simba.NewLocker(b, mutexName(t))
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))

	var collation string
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT COLLATION_NAME FROM information_schema.COLUMNS "+
		"WHERE TABLE_SCHEMA = 'simba' AND TABLE_NAME = 'created' AND COLUMN_NAME = 'mutex'").Scan(&collation))
	assert.Equal(t, "utf8mb4_bin", collation, "the DDL's collation, whatever the server's default")
}

// Strings travel in the connection's character set: one that cannot hold every name
// would turn names into '?' on the way.
func TestStartRefusesAConnectionCharset(t *testing.T) {
	b, err := jdbc.New(openDB(t, "charset=latin1"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.ErrorIs(t, startOn(t, b, mutexName(t), "c"), jdbc.ErrSchema)
}

// Without a database in the DSN the table must be qualified.
func TestNoDatabase(t *testing.T) {
	needServer(t)
	db, err := sql.Open("mysql", fmt.Sprintf("simba:simba@tcp(%s)/?interpolateParams=true", server.Addr()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	b, err := jdbc.New(db)
	require.NoError(t, err)
	require.ErrorIs(t, startOn(t, b, mutexName(t), "c"), jdbc.ErrSchema)
	b, err = jdbc.New(db, jdbc.WithTable("simba.simba_mutex"))
	require.NoError(t, err)
	require.NoError(t, startOn(t, b, mutexName(t), "c"))
}

// A read-only server (a replica) fails Start clearly instead of failing every acquisition.
func TestStartRefusesAReadOnlyServer(t *testing.T) {
	needServer(t)
	rootExec(t, "SET GLOBAL read_only = ON")
	t.Cleanup(func() { rootExec(t, "SET GLOBAL read_only = OFF") })
	b := newBackend(t)
	require.ErrorIs(t, startOn(t, b, mutexName(t), "c"), jdbc.ErrSchema)
}

// A user that may read the table but not write it, and a read-only session of a writable
// server: Start succeeded, and the service then retried every acquisition for ever, each
// refused with error 1142 or 1792. Start now fails with a
// schema error that quotes the server and says what to grant.
func TestStartRefusesASessionThatCannotWrite(t *testing.T) {
	needServer(t)
	for _, c := range []struct{ user, grant string }{{"simba_ro", "SELECT"}, {"simba_noupd", "SELECT, INSERT"}} {
		t.Run(c.user, func(t *testing.T) {
			rootExec(t, fmt.Sprintf("DROP USER IF EXISTS '%[1]s'@'127.0.0.1'; CREATE USER '%[1]s'@'127.0.0.1' IDENTIFIED BY 'pw'; "+
				"GRANT %[2]s ON simba.simba_mutex TO '%[1]s'@'127.0.0.1'", c.user, c.grant))
			t.Cleanup(func() { rootExec(t, fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", c.user)) })
			b, err := jdbc.New(openDSN(t, fmt.Sprintf("%s:pw@tcp(%s)/simba?interpolateParams=true", c.user, server.Addr())))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			err = startOn(t, b, mutexName(t), "c")
			require.ErrorIs(t, err, jdbc.ErrSchema)
			assert.Contains(t, err.Error(), "command denied")
			assert.Contains(t, err.Error(), "GRANT SELECT, INSERT, UPDATE, DELETE")
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	t.Run("read-only session", func(t *testing.T) {
		b, err := jdbc.New(openDB(t, "tx_read_only=1"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		err = startOn(t, b, mutexName(t), "c")
		require.ErrorIs(t, err, jdbc.ErrSchema)
		assert.Contains(t, err.Error(), "READ ONLY")
	})
}

// Wrong credentials fail Start with the driver's error, not a validation or schema error.
func TestStartWrongPassword(t *testing.T) {
	needServer(t)
	b, err := jdbc.New(openDSN(t, fmt.Sprintf("simba:wrong@tcp(%s)/simba?interpolateParams=true", server.Addr())))
	require.NoError(t, err)
	err = startOn(t, b, mutexName(t), "c")
	require.Error(t, err)
	assert.NotErrorIs(t, err, jdbc.ErrSchema)
	assert.NotErrorIs(t, err, simba.ErrInvalidArgument)
	t.Log(err)
}
