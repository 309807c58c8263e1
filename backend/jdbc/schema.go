package jdbc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/simba-go/simba"
)

// DDL returns the statement that creates the table if it is missing (CREATE TABLE IF NOT
// EXISTS), for migrations run by other tools. Options as for New: WithTable and
// WithDialect matter.
func DDL(opts ...Option) (string, error) {
	cfg, t, err := newConfig(opts)
	if err != nil {
		return "", err
	}
	return cfg.dialect.ddl(t), nil
}

// CreateTable creates the table on db if it is missing, and beside it the hold table of
// semaphores and read-write locks (HoldDDL), the value table of owner values (ValueDDL), the
// slot table of Schedulers' slots (SlotDDL) and the wait table of hand-offs (WaitDDL), and
// then checks the table as Start does:
// an existing table that does not match the format is reported as a *SchemaError rather
// than left for Start to find. It does not close db.
func CreateTable(ctx context.Context, db *sql.DB, opts ...Option) error {
	if ctx == nil {
		return simba.InvalidArgument("ctx", nil, "must not be nil")
	}
	if db == nil {
		return simba.InvalidArgument("db", nil, "must not be nil")
	}
	cfg, t, err := newConfig(opts)
	if err != nil {
		return err
	}
	if err := create(ctx, db, cfg.dialect.ddl(t), t); err != nil {
		return err
	}
	// A table name that leaves no room for the hold table's suffix keeps mutexes only:
	// StartContend refuses a semaphore or read-write lock on it as an invalid argument.
	if holds, err := holdSQL(cfg.dialect, t); err == nil {
		if err := create(ctx, db, holds.ddl, holds.table); err != nil {
			return err
		}
	}
	// So does one without room for the value table's (no owner values), the slot table's
	// (no slots recorded) or the wait table's (no hand-offs).
	for _, st := range []sideTable{valueTable, slotTable, waitTable} {
		if err := createSide(ctx, db, cfg.dialect, t, st); err != nil {
			return err
		}
	}
	_, err = cfg.dialect.inspect(ctx, db, t)
	var se *SchemaError
	if err != nil && !errors.As(err, &se) {
		return refused(fmt.Errorf("simba/jdbc: check table %s: %w", t, err), t.String())
	}
	return err
}

// create runs ddl, a CREATE TABLE IF NOT EXISTS of table t.
func create(ctx context.Context, db *sql.DB, ddl string, t tableName) error {
	// PostgreSQL's CREATE TABLE IF NOT EXISTS fails the loser of a race between two
	// creators (on the catalogue's unique index) once the winner has committed: the
	// second try finds the winner's table.
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		if _, again := db.ExecContext(ctx, ddl); again != nil {
			err = fmt.Errorf("simba/jdbc: create table %s: %w", t, err)
			if isRefusal(err) {
				return &refusal{err: err, fix: "create it as a user that may create tables, or in a migration (DDL returns the statement)"}
			}
			return err
		}
	}
	return nil
}
