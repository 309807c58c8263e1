package jdbc

import (
	"context"
	"database/sql"
	"time"
)

// Dialect is the SQL of one database family: MySQL (MySQL and MariaDB), the default, or
// Postgres (PostgreSQL). A dialect renders the statements of one table, runs the one
// statement whose result has a database-specific shape (the acquire), reads what Start
// checks, and bounds statements on the server; everything else (the protocol, tokens,
// hand-over, validation) is shared.
type Dialect interface {
	// String names the dialect in messages.
	String() string

	// ddl returns the CREATE TABLE IF NOT EXISTS statement for t.
	ddl(t tableName) string
	// statements renders the statements for t.
	statements(t tableName) statements
	// acquireStatement renders the acquire statement for t, a server and session like
	// s, and a contention's ttl and ttl + transition.
	acquireStatement(t tableName, s schema, ttl, lease time.Duration) string
	// acquire runs the acquire statement with q, bounded on the server to d (see bound),
	// and decodes its result.
	acquire(ctx context.Context, q querier, s schema, d time.Duration, query string, a acquireArgs) (acquireResult, error)
	// renewStatement renders the statement that renews many tenures at once (renewals.go)
	// for t, a session like s, and contentions' ttl and ttl + transition.
	renewStatement(t tableName, s schema, ttl, lease time.Duration) string
	// renewMany runs the renew statement with q for rows, bounded on the server to d, and
	// reports which of them it renewed (all or none where the answer does not tell which)
	// and the database's now (its low 31 bits, in ms) when it renewed any.
	renewMany(ctx context.Context, q querier, s schema, d time.Duration, query string, rows []renewRow) (renewed []bool, now uint64, err error)
	// inspect reads the server's properties and the table's columns and checks them
	// against the format; it returns a *SchemaError when the table does not match.
	inspect(ctx context.Context, db *sql.DB, t tableName) (schema, error)
	// bound returns a table statement of the dialect and its arguments, made for the
	// server to give the statement up, row-lock waits included, after d (d <= 0: no limit
	// of its own), as far as the server can.
	bound(s schema, d time.Duration, query string, args ...any) (string, []any)
	// list returns the placeholders of n arguments that follow a statement's own, for
	// the IN list of statements.deleteText.
	list(n int) string
	// lockName returns the name of the server-side named lock of a mutex's row.
	lockName(s schema, t tableName, mutex string) string
	// timedOut reports whether err is the server ending a wait for a named lock
	// (statements.waitLock) at its timeout, after which the waiter waits again.
	timedOut(err error) bool
	// maxIdentifier is the longest table or schema name the server keeps as given.
	maxIdentifier() int
}

// releaseUnlocker is a Dialect whose release can let the named lock go itself (see
// mysqlReleaseUnlock, pgReleaseUnlock): releaseUnlock runs that statement with q, bounded
// on the server to d (see Dialect.bound), and reports whether the row was released and
// whether the lock was let go.
type releaseUnlocker interface {
	releaseUnlock(ctx context.Context, q querier, s schema, d time.Duration, query string, lock, mutex, contender string, version uint64) (released, unlocked bool, err error)
}

// lockingAcquirer is a Dialect whose acquire can take the named lock in the same statement
// (see mysqlAcquireLocking, pgAcquireLocking), for a contention on its pinned connection
// that does not hold the lock. lockingAcquireStatement renders that statement as
// acquireStatement does, one that reads the row when it matches nothing where the dialect
// has one and reads asks for it, or returns "" where the session may not run it (see
// schema.locksInUpdates) or, without reads, where the dialect has no statement that
// reads less; acquireLocking runs it with conn, bounded on the server to d, and also
// reports what it found of the lock and, when it matched nothing and the statement read
// the row too (reads), the row (nil: not read).
type lockingAcquirer interface {
	lockingAcquireStatement(t tableName, s schema, ttl, lease time.Duration, reads bool) string
	acquireLocking(ctx context.Context, conn querier, s schema, d time.Duration, query, lock string, reads bool, a acquireArgs) (acquireResult, lockTry, *row, error)
}

// holdingAcquirer is a Dialect whose acquire can begin a new tenure only while a given
// session holds the named lock (see mysqlAcquireHolding), for a contention whose pinned
// connection holds it and whose acquire runs on the pool. holdingAcquireStatement renders
// that statement as acquireStatement does, or returns "" where the session may not run it
// (schema.locksInUpdates); acquireHolding runs it with q, bounded on the server to d.
type holdingAcquirer interface {
	holdingAcquireStatement(t tableName, s schema, ttl, lease time.Duration) string
	acquireHolding(ctx context.Context, q querier, s schema, d time.Duration, query, lock string, session int64, a acquireArgs) (acquireResult, error)
}

// lockTry is what a statement found of the named lock on the session it ran on.
type lockTry struct {
	told    bool  // the statement told whether the session holds the lock; else only session may be set
	got     bool  // the session holds the lock (took it, or held it already)
	other   bool  // another session holds it
	holder  int64 // that session's ID, when told; 0 otherwise
	session int64 // the session's server ID; 0 when not told
}

// statements is the SQL of a dialect for one table; see statements.go. Statements with a
// server-side bound go through Dialect.bound.
type statements struct {
	ensureRow, release                 string
	releaseUnlock                      string // release, letting the named lock go too (releaseUnlocker)
	read, prunable                     clocked
	readLocking                        clocked // read, telling the named lock's holder too; arguments: lock, mutex
	readTrying                         clocked // readLocking, trying the lock first (MySQL; empty where none)
	waitLock, unlock, interruptText    string
	settle                             string // lets the named lock go if the session holds it
	ensureFloor, lockFloor, raiseFloor string
	deleteText                         string
	keepValue, clearValue              string  // write a tenure's owner value, clear a contender's (values.go); "" without room for the value table
	valueAhead                         clocked // write a value ahead of an acquisition (values.go)
	lastSlot, claimSlot                string  // read and claim a mutex's slot (slots.go); "" without room for the slot table
}

// clocked is a statement that reads the database's clock, in two versions: for sessions
// whose time zone has no daylight-saving folds, and for the others; each in two more, for
// backends without the value table and with it (a statement that reads a row reads the
// owner value of its tenure too).
type clocked struct{ plain, folding, plainValued, foldingValued string }

// in returns the version for a session like s's.
func (c clocked) in(s schema) string {
	switch {
	case s.folds && s.values:
		return c.foldingValued
	case s.folds:
		return c.folding
	case s.values:
		return c.plainValued
	}
	return c.plain
}

// querier runs statements: the pool (*sql.DB) or one pinned connection (*sql.Conn).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ querier = (*sql.DB)(nil)
	_ querier = (*sql.Conn)(nil)
)

// acquireArgs are the values the acquire statement needs.
type acquireArgs struct {
	mutex, contender string
	expect           sql.NullInt64 // the version a renewal must find; none: no renewal
	floor            uint64        // the version below which none is handed out
	stale            sql.NullInt64 // a version watched for longer than its lease; none: none
}

// acquireResult is what an acquire statement did.
type acquireResult struct {
	matched bool          // the contender owns the row now
	found   uint64        // the row's version before the statement (when matched)
	version uint64        // the row's version after the statement (when matched)
	renewed bool          // the row was the contender's, at the expected version (when matched)
	now     uint64        // the low 31 bits of the database's now in ms (when matched)
	queued  time.Duration // how long the renewal waited for its batch's statement (renewals.go)
}

// schema is what Start learned about the server and the table, once per backend.
type schema struct {
	database string // MySQL: the database holding the table; PostgreSQL: "database.schema"
	mariaDB  bool   // the server is MariaDB, which can bound statements itself
	folds    bool   // the session's time zone may have daylight-saving folds
	mutex    column // the mutex column's limit
	owner    column // the owner_id column's limit
	// locksInUpdates: the acquire and the release may take and let go of the named lock
	// themselves (lockingAcquirer, releaseUnlocker; not where a MySQL session logs
	// statements as text, for which GET_LOCK and RELEASE_LOCK in an UPDATE are unsafe)
	locksInUpdates bool
	values         bool // the value table is there to read (values.go)
	slots          bool // the slot table is there to read (slots.go)
	waits          bool // the wait table is there to read (waits.go)
}

// column is a string column's capacity.
type column struct {
	name  string
	max   int  // characters, or bytes when bytes is set
	bytes bool // a binary column: lengths count bytes
	typ   string
}
