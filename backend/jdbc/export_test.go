package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"time"
)

// Waiting returns how many of the backend's contentions for mutex wait for its named lock,
// so that benchmarks can start timing a hand-over only once the waiter waits.
func (b *Backend) Waiting(mutex string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for c := range b.contentions {
		c.hand.mu.Lock()
		if c.mutex == mutex && c.hand.waiting {
			n++
		}
		c.hand.mu.Unlock()
	}
	return n
}

// TimedOut reports whether err is d's server ending a wait for a named lock at its
// timeout.
func TimedOut(d Dialect, err error) bool { return d.timedOut(err) }

// SettleSQL returns d's statement that lets a named lock go if the session holds it.
func SettleSQL(d Dialect) string { return d.statements(tableName{name: DefaultTable}).settle }

// ReleaseSQL returns d's release statement for the default table.
func ReleaseSQL(d Dialect) string { return d.statements(tableName{name: DefaultTable}).release }

// PgHolderSQL is a statement that tells which session holds a PostgreSQL advisory lock, 0
// if none. Arguments: key.
const PgHolderSQL = "SELECT " + pgHolderOfK + " FROM (SELECT $1::text::bigint AS k) AS key"

// LockName returns the named lock of mutex's row, as the backend's contentions for mutex
// take it ("" when none is open).
func (b *Backend) LockName(mutex string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.contentions {
		if c.mutex == mutex {
			return c.lock
		}
	}
	return ""
}

// ReleaseUnlockSQL returns d's release statement that also lets the named lock go ("" when
// d has none). Arguments: lock name, mutex, contender, version.
func ReleaseUnlockSQL(d Dialect) string {
	return d.statements(tableName{name: DefaultTable}).releaseUnlock
}

// LockingAcquireSQL returns d's acquire statement that takes the named lock too, for the
// default table on a server like MariaDB's without folds, a ttl and ttl + transition.
// Arguments (MySQL): contender, expected, floor, contender, mutex, floor, contender,
// expected, stale, lock name, lock name.
func LockingAcquireSQL(d Dialect, ttl, lease time.Duration) string {
	return d.(lockingAcquirer).lockingAcquireStatement(tableName{name: DefaultTable}, schema{locksInUpdates: true}, ttl, lease, true)
}

// CycleSQL returns, once the backend has checked its table, the statements of an
// uncontended cycle of a contender with ttl and transition on the hand-over's pinned
// connection: the acquire that tries the named lock (without its read of the row), the
// release that lets it go, and mutex's named lock.
func (b *Backend) CycleSQL(ttl, transition time.Duration, mutex string) (acquire, release, lock string) {
	b.mu.Lock()
	s := *b.schema
	b.mu.Unlock()
	return b.rendered(s, ttl, ttl+transition).taking, b.sql.releaseUnlock, b.dialect.lockName(s, b.table, mutex)
}

// QueryRow is queryRow, on a pinned connection.
func QueryRow(ctx context.Context, conn *sql.Conn, query string, args []any, dest ...any) error {
	return queryRow(ctx, conn, query, args, dest...)
}

// ForgetPreparedOnServer makes the server forget the backend's prepared statements on
// conn's session while the backend keeps them (COM_STMT_CLOSE for copies of them, as a
// proxy that reconnects behind the client would), and returns how many it closed.
func (b *Backend) ForgetPreparedOnServer(conn *sql.Conn) (n int) {
	_ = conn.Raw(func(dc any) error {
		b.stmts.mu.Lock()
		defer b.stmts.mu.Unlock()
		if cs := b.stmts.conns[dc]; cs != nil {
			for _, c := range cs.stmts {
				v := reflect.ValueOf(c.stmt)
				dup := reflect.New(v.Type().Elem())
				dup.Elem().Set(v.Elem())
				_ = dup.Interface().(driver.Stmt).Close()
				n++
			}
		}
		return nil
	})
	return n
}

// SetPreparedConns sets how many connections the backend keeps prepared statements for.
func (b *Backend) SetPreparedConns(n int) {
	b.stmts.mu.Lock()
	defer b.stmts.mu.Unlock()
	b.stmts.maxConns = n
}
