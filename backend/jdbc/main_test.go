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
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// The MariaDB the package's tests share, started by the first test that needs it (unit
// tests and fuzz workers never start it) and stopped when the tests end.
var (
	maria  = shared{name: "MariaDB", prefix: "simba-my-"}
	server *testserver.MariaDB
)

func TestMain(m *testing.M) {
	code := m.Run()
	maria.stop()
	postgres.stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// shared is a server the package's tests share: started once, by the first test that
// needs it, in a directory of its own, and stopped by TestMain.
type shared struct {
	name, prefix string
	once         sync.Once
	srv          interface{ Stop() error }
	err          error
	dir          string
}

// need starts the server with start if needed. A missing program fails the test, except
// in a -short run without SIMBA_REQUIRE_SERVERS=1, where it skips.
func (s *shared) need(t testing.TB, start func(dir string) (interface{ Stop() error }, error)) {
	t.Helper()
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", s.prefix)
		if s.err == nil {
			s.srv, s.err = start(s.dir)
		}
	})
	if errors.Is(s.err, testserver.ErrMissing) && !testserver.Required() && testing.Short() {
		t.Skip(s.err)
	}
	if s.err != nil {
		t.Fatalf("%s: %v", s.name, s.err)
	}
}

func (s *shared) stop() {
	if s.err == nil && s.srv != nil {
		_ = s.srv.Stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// needServer starts the shared MariaDB if needed (see shared.need).
func needServer(t testing.TB) {
	t.Helper()
	maria.need(t, func(dir string) (interface{ Stop() error }, error) {
		// A commit's log is written, not flushed, as on the tests' PostgreSQL: the tests
		// measure nothing, and the machine is shared (a killed server loses nothing that
		// reached it; the restart tests start servers of their own, with the defaults).
		s, err := startServer(dir, "--innodb-flush-log-at-trx-commit=2")
		server = s
		return s, err
	})
}

// startServer starts a MariaDB in dir (which must be short: the socket path is limited)
// with the simba_mutex table; extra are server options.
func startServer(dir string, extra ...string) (*testserver.MariaDB, error) {
	s, err := testserver.NewMariaDB(dir, extra...)
	if err != nil {
		return nil, err
	}
	return s, startWithTable(s, "mysql")
}

// startWithTable starts s and creates the simba_mutex table on it through driver, with
// opts; it stops s again on failure.
func startWithTable(s interface {
	Start(ctx context.Context) error
	Stop() error
	DSN(params ...string) string
}, driver string, opts ...jdbc.Option) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		return err
	}
	db, err := sql.Open(driver, s.DSN())
	if err == nil {
		err = jdbc.CreateTable(ctx, db, opts...)
		_ = db.Close()
	}
	if err != nil {
		_ = s.Stop()
	}
	return err
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
	return scanRows(t, rows, err)
}

// scanRows reads the rows of a query for mutex, owner_id, ttl_at, transition_at, version
// and whether the row is live.
func scanRows(t testing.TB, rows *sql.Rows, err error) []storedRow {
	t.Helper()
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
	return rowOf(t, readRows(t, db, "simba_mutex", mutex), mutex)
}

// rowOf returns the row of mutex among rows, which must have it.
func rowOf(t testing.TB, rows []storedRow, mutex string) storedRow {
	t.Helper()
	for _, r := range rows {
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
