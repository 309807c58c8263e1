package jdbc

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/simba-go/simba"
)

// Execer is what ExecFenced writes through: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ExecFenced runs query, an UPDATE that claims the fence and writes in one statement, and
// returns an error matching simba.ErrFencedOut when it changed no row (a later tenure has
// written, or no row matched):
//
//	UPDATE orders SET state = ?, fence = ? WHERE id = ? AND fence <= ?      -- MySQL, MariaDB
//	UPDATE orders SET state = $1, fence = $2 WHERE id = $3 AND fence <= $4 -- PostgreSQL
//
// The fence column is a BIGINT starting at 0. On MySQL and MariaDB, open the pool with
// clientFoundRows=true in the DSN: otherwise a write that changes nothing (the same value,
// the same token) counts no row and reads as fenced out.
func ExecFenced(ctx context.Context, db Execer, query string, args ...any) error {
	switch {
	case db == nil:
		return simba.InvalidArgument("db", nil, "must not be nil")
	case !strings.EqualFold(firstWord(query), "UPDATE"):
		return simba.InvalidArgument("query", query, "must be an UPDATE that claims the fence in its WHERE")
	}
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("simba/jdbc: fenced write: %w", err)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("simba/jdbc: fenced write: rows affected: %w", err)
	case n == 0:
		return fmt.Errorf("simba/jdbc: fenced write changed no row: %w", simba.ErrFencedOut)
	}
	return nil
}

// firstWord returns query's first word, past blanks.
func firstWord(query string) string {
	f := strings.Fields(query)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
