package jdbc

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/simba-go/simba"
)

// pruneBatch is how many rows one transaction of Prune deletes at most.
const pruneBatch = 100

// Prune deletes the rows of mutexes that have had no owner for longer than age, by the
// database's clock (released, created, or left by an owner whose transition window ended,
// that long ago; a row JVM Simba released counts as released long ago), and returns how
// many it deleted. A mutex whose row was pruned gets it back at its next use, with no
// token lower than before. Prune is safe at any time, from any number of processes, while
// the mutexes are in use (see the package doc, Pruning); each of its transactions deletes
// up to 100 rows and holds their locks, and a connection of the pool, for a moment.
//
// ctx bounds the whole run; age must not be negative.
func (b *Backend) Prune(ctx context.Context, age time.Duration) (int64, error) {
	if ctx == nil {
		return 0, simba.InvalidArgument("ctx", nil, "must not be nil")
	}
	if age < 0 {
		return 0, simba.InvalidArgument("age", age, "must not be negative")
	}
	if err := b.usable(ctx); err != nil {
		return 0, err
	}
	s, err := b.checkedSchema(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := b.exec(ctx, b.db, s, b.sql.ensureFloor); err != nil {
		return 0, b.refused(fmt.Errorf("simba/jdbc: prune: %w", err))
	}
	var total int64
	for {
		n, err := b.pruneBatch(ctx, s, age)
		total += n
		if err != nil {
			return total, b.refused(fmt.Errorf("simba/jdbc: prune: %w", err))
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// pruneBatch deletes up to pruneBatch rows in one transaction, and raises the floor row
// to the highest version among them.
func (b *Backend) pruneBatch(ctx context.Context, s schema, age time.Duration) (int64, error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var floor uint64
	query, args := b.dialect.bound(s, limit(ctx), b.sql.lockFloor)
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&floor); err != nil {
		return 0, err
	}
	query, args = b.dialect.bound(s, limit(ctx), b.sql.prunable.in(s), age.Milliseconds(), pruneBatch)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	var names []any
	for rows.Next() {
		var name string
		var version uint64
		if err := rows.Scan(&name, &version); err != nil {
			_ = rows.Close()
			return 0, err
		}
		names = append(names, name)
		floor = max(floor, version)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, nil
	}
	if _, err := b.exec(ctx, tx, s, b.sql.raiseFloor, floor); err != nil {
		return 0, err
	}
	res, err := b.exec(ctx, tx, s, fmt.Sprintf(b.sql.deleteText, b.dialect.list(len(names))), names...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// exec runs a statement with q, bounded on the server by ctx's deadline.
func (b *Backend) exec(ctx context.Context, q interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, s schema, query string, args ...any) (sql.Result, error) {
	query, args = b.dialect.bound(s, limit(ctx), query, args...)
	return q.ExecContext(ctx, query, args...)
}
