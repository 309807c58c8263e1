package jdbc_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// sqlModes are the server modes the limits are checked in, as DSN parameters.
var sqlModes = []struct{ name, param string }{
	{"strict", "sql_mode=%27STRICT_TRANS_TABLES%27"},
	{"non-strict", "sql_mode=%27%27"},
}

// TestNamesAtTheLimits: names and IDs at the limits work on the real schema in
// both modes and are stored exactly; one character more is rejected before any I/O.
func TestNamesAtTheLimits(t *testing.T) {
	for _, mode := range sqlModes {
		t.Run(mode.name, func(t *testing.T) {
			db := openDB(t, mode.param)
			var got string
			require.NoError(t, db.QueryRowContext(t.Context(), "SELECT @@SESSION.sql_mode").Scan(&got))
			require.Equal(t, mode.name == "strict", strings.Contains(got, "STRICT"), "sql_mode %q", got)
			b, err := jdbc.New(db)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })

			prefix := mutexName(t)
			namesAtTheLimits(t, b, prefix, func(mutex string) storedRow { return readRow(t, db, mutex) })
			assert.Len(t, readRows(t, db, "simba_mutex", prefix), 4, "one row per name, nothing truncated")
		})
	}
}

// TestFoldedNamesKeepApart: names that a case- or accent-insensitive collation would treat
// as equal are different mutexes, held at the same time by different contenders.
func TestFoldedNamesKeepApart(t *testing.T) {
	for _, mode := range sqlModes {
		t.Run(mode.name, func(t *testing.T) {
			db := openDB(t, mode.param)
			prefix := mutexName(t)
			names := []string{prefix + "-lock-e", prefix + "-Lock-E", prefix + "-lock-é", prefix + "-LOCK-É", prefix + "-lock-ｅ"}
			for i, name := range names {
				b, err := jdbc.New(db)
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				l, err := simba.NewLocker(b, name, simba.WithContenderID("c"+string(rune('0'+i))))
				require.NoError(t, err)
				lease, err := l.TryAcquire(t.Context())
				require.NoError(t, err, "%q is a mutex of its own", name)
				t.Cleanup(func() { _ = lease.Release(context.Background()) })
			}
			rows := readRows(t, db, "simba_mutex", prefix)
			require.Len(t, rows, len(names))
			for _, r := range rows {
				assert.Contains(t, names, r.Mutex)
				assert.NotEmpty(t, r.Owner)
			}
		})
	}
}

// TestStoreDoesNotRejectBadNames shows, on a table in the format, why the backend checks
// lengths itself instead of leaving it to the server: depending on sql_mode the server
// truncates silently, and an UPDATE with an over-long value simply matches nothing.
func TestStoreDoesNotRejectBadNames(t *testing.T) {
	needServer(t)
	ddl, err := jdbc.DDL(jdbc.WithTable("raw_limits"))
	require.NoError(t, err)
	rootExec(t, "USE simba; DROP TABLE IF EXISTS raw_limits; "+ddl)
	t.Cleanup(func() { rootExec(t, "DROP TABLE IF EXISTS simba.raw_limits") })
	name66 := strings.Repeat("n", 66)
	id128 := strings.Repeat("c", 128)
	insert := "INSERT IGNORE INTO raw_limits VALUES (?, 0, 0, 0, '', 0)"
	count := func(db *sql.DB, where string, args ...any) int {
		var n int
		require.NoError(t, db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM raw_limits WHERE "+where, args...).Scan(&n))
		return n
	}

	nonStrict := openDB(t, sqlModes[1].param)
	_, err = nonStrict.ExecContext(t.Context(), "INSERT INTO raw_limits VALUES (?, 0, 0, 0, '', 0)", name66+"A")
	require.NoError(t, err, "non-strict: a 67-character name is accepted...")
	assert.Equal(t, 1, count(nonStrict, "mutex = ?", name66), "... and truncated to 66")
	_, err = nonStrict.ExecContext(t.Context(), insert, name66+"B")
	require.NoError(t, err)
	assert.Equal(t, 1, count(nonStrict, "mutex LIKE 'nnn%'"), "two different names share one row")
	assert.Zero(t, count(nonStrict, "mutex = ?", name66+"A"), "the long name never matches its own row")
	_, err = nonStrict.ExecContext(t.Context(), "UPDATE raw_limits SET owner_id = ? WHERE mutex = ?", id128+"X", name66)
	require.NoError(t, err, "non-strict: a 129-character owner is accepted...")
	assert.Zero(t, count(nonStrict, "owner_id = ?", id128+"X"), "... truncated: its owner cannot find it to renew or release")
	assert.Equal(t, 1, count(nonStrict, "owner_id = ?", id128))

	strict := openDB(t, sqlModes[0].param)
	_, err = strict.ExecContext(t.Context(), "UPDATE raw_limits SET owner_id = ? WHERE mutex = ?", id128+"X", name66)
	assert.Error(t, err, "strict: data too long")
	res, err := strict.ExecContext(t.Context(), "UPDATE raw_limits SET version = version + 1 WHERE mutex = ?", name66+"A")
	require.NoError(t, err, "strict: an over-long name in a WHERE is no error...")
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.Zero(t, n, "... it matches nothing: a contender that never wins and never fails")
	_, err = strict.ExecContext(t.Context(), insert, strings.Repeat("o", 66)+"C")
	require.NoError(t, err, "strict: INSERT IGNORE downgrades the error...")
	assert.Equal(t, 1, count(strict, "mutex = ?", strings.Repeat("o", 66)), "... and truncates")
}

// A row whose version reached the column's maximum cannot give a larger token: acquiring
// fails with an error rather than repeating a token or answering "free" for ever.
func TestVersionExhausted(t *testing.T) {
	db := openDB(t)
	mutex := mutexName(t)
	_, err := db.ExecContext(t.Context(), "INSERT INTO simba_mutex VALUES (?, 0, 0, 0, '', 4294967295)", mutex)
	require.NoError(t, err)
	b := newBackend(t)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "c", TTL: time.Second, Wake: func() {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	rec, err := c.(backend.LeaseContention).Acquire(t.Context())
	require.Error(t, err, "got %+v", rec)
	t.Log(err)
	assert.Equal(t, uint64(4294967295), readRow(t, db, mutex).Version, "nothing written")
}

// namesAtTheLimits takes and releases, on b, mutexes of prefix and the longest names and
// IDs in characters of one to four bytes, reading the rows with row: each is stored
// exactly and released by its owner; one character more is refused before the store.
func namesAtTheLimits(t *testing.T, b simba.Backend, prefix string, row func(mutex string) storedRow) {
	t.Helper()
	for _, r := range []string{"m", "é", "界", "😀"} {
		mutex := prefix + strings.Repeat(r, jdbc.MaxMutexLength-len([]rune(prefix)))
		id := strings.Repeat(r, jdbc.MaxContenderIDLength)
		l, err := simba.NewLocker(b, mutex, simba.WithContenderID(id))
		require.NoError(t, err)
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err, "%q", r)
		stored := row(mutex)
		assert.Equal(t, mutex, stored.Mutex, "stored as given")
		assert.Equal(t, id, stored.Owner, "stored as given")
		assert.Equal(t, lease.Token(), stored.Version)
		require.NoError(t, lease.Release(t.Context()), "the owner recognises its own row")
		assert.Empty(t, row(mutex).Owner, "released")

		_, err = simba.NewLocker(b, mutex+r, simba.WithContenderID(id))
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "a 67-character name")
		_, err = simba.NewLocker(b, mutex, simba.WithContenderID(id+r))
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "a 129-character ID")
	}
}
