package jdbc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// The MariaDB the package's tests share, started by the first test that needs it (unit
// tests and fuzz workers never start it) and stopped when the tests end.
var (
	serverOnce sync.Once
	server     *testserver.MariaDB
	serverErr  error
	serverDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if serverDir != "" {
		_ = os.RemoveAll(serverDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needServer starts the shared server if needed. A missing program fails the test, except
// in a -short run without SIMBA_REQUIRE_SERVERS=1, where it skips.
func needServer(t testing.TB) {
	t.Helper()
	serverOnce.Do(func() {
		serverDir, serverErr = os.MkdirTemp("", "simba-my-")
		if serverErr == nil {
			server, serverErr = startServer(serverDir)
		}
	})
	if errors.Is(serverErr, testserver.ErrMissing) && !testserver.Required() && testing.Short() {
		t.Skip(serverErr)
	}
	if serverErr != nil {
		t.Fatalf("MariaDB: %v", serverErr)
	}
}

// startServer starts a MariaDB in dir (which must be short: the socket path is limited)
// with the simba_mutex table.
func startServer(dir string) (*testserver.MariaDB, error) {
	s, err := testserver.NewMariaDB(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", s.DSN())
	if err == nil {
		err = jdbc.CreateTable(ctx, db)
		_ = db.Close()
	}
	if err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// openDB opens a pool of its own on the shared server (a process of its own, as far as
// the store can tell), closed when the test ends. params are DSN parameters.
func openDB(t testing.TB, params ...string) *sql.DB {
	t.Helper()
	needServer(t)
	return openOn(t, server, params...)
}

func openOn(t testing.TB, s *testserver.MariaDB, params ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", s.DSN(params...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newBackend returns a backend on a pool of its own, closed when the test ends.
func newBackend(t testing.TB, opts ...jdbc.Option) *jdbc.Backend {
	t.Helper()
	b, err := jdbc.New(openDB(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

var names atomic.Int64

var nonName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// mutexName returns a mutex name no other test uses, short enough for the table.
func mutexName(t testing.TB) string {
	n := nonName.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "-")
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("t-%s-%d-%d", n, os.Getpid()%10000, names.Add(1))
}

// rootExec runs SQL as root on the shared server.
func rootExec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, server.Exec(ctx, sql))
}

// storedRow is a row of simba_mutex as the tests read it.
type storedRow struct {
	Mutex, Owner string
	TTLAt        uint64
	TransitionAt uint64
	Version      uint64
	Live         bool // transition_at >= the database's now
}

// readRows returns the rows of table whose mutex starts with prefix. (Not with LIKE: on
// MariaDB 10.11 a LIKE 'prefix%' range scan of a utf8mb4_bin key misses names that go on
// with characters outside the Basic Multilingual Plane.)
func readRows(t testing.TB, db *sql.DB, table, prefix string) []storedRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT mutex, owner_id, ttl_at, transition_at, version, "+
		"transition_at >= TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000 FROM "+table+
		" WHERE LEFT(mutex, CHAR_LENGTH(?)) = ? ORDER BY mutex", prefix, prefix)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedRow
	for rows.Next() {
		var r storedRow
		require.NoError(t, rows.Scan(&r.Mutex, &r.Owner, &r.TTLAt, &r.TransitionAt, &r.Version, &r.Live))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// readRow returns the row of mutex, which must exist.
func readRow(t testing.TB, db *sql.DB, mutex string) storedRow {
	t.Helper()
	for _, r := range readRows(t, db, "simba_mutex", mutex) {
		if r.Mutex == mutex {
			return r
		}
	}
	t.Fatalf("no row for mutex %q", mutex)
	return storedRow{}
}

// rowOrErr returns the row of mutex, or an error while the server cannot answer.
func rowOrErr(db *sql.DB, mutex string) (storedRow, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var r storedRow
	err := db.QueryRowContext(ctx, "SELECT mutex, owner_id, ttl_at, transition_at, version FROM simba_mutex WHERE mutex = ?", mutex).
		Scan(&r.Mutex, &r.Owner, &r.TTLAt, &r.TransitionAt, &r.Version)
	return r, err
}
