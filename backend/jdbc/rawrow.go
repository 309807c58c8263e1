package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// queryRow runs query with args on q and scans the first row of its answer into dest, as
// q.QueryRowContext(ctx, query, args...).Scan(dest...) does (sql.ErrNoRows when there is
// none). On a pinned connection it asks the driver's connection itself, unless the driver
// leaves the query to database/sql: database/sql's rows start a goroutine per query whose
// context can end, to close them if it does, and waking it cost an uncontended PostgreSQL
// cycle (two such statements) 50-90 µs of client CPU on a 2-core machine. The driver
// keeps ctx as it does for database/sql: pgx and go-sql-driver cancel the statement and
// close the connection when ctx ends, which database/sql then drops (driver.ErrBadConn).
func queryRow(ctx context.Context, q querier, query string, args []any, dest ...any) error {
	conn, pinned := q.(*sql.Conn)
	if !pinned {
		return q.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	err := conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return errLeftToDatabaseSQL
		}
		named, err := namedValues(dc, args)
		if err != nil {
			return err
		}
		rows, err := qc.QueryContext(ctx, query, named)
		if errors.Is(err, driver.ErrSkip) { // go-sql-driver without interpolateParams: a prepared statement
			return errLeftToDatabaseSQL
		}
		if err != nil {
			return err
		}
		err = scanFirst(rows, dest)
		if cerr := rows.Close(); err == nil || errors.Is(err, sql.ErrNoRows) && cerr != nil {
			err = cerr
		}
		return err
	})
	if errors.Is(err, errLeftToDatabaseSQL) {
		return conn.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	return err
}

// errLeftToDatabaseSQL says that the driver's connection runs no query by itself (it has
// no driver.QueryerContext, or asks for a prepared statement), and database/sql must.
var errLeftToDatabaseSQL = errors.New("the driver's connection leaves the query to database/sql")

// namedValues converts args as database/sql does before it hands them to the driver's
// connection dc: the connection's own check first (driver.NamedValueChecker), then, if it
// skips a value or has none, the default conversion (which calls a driver.Valuer).
func namedValues(dc any, args []any) ([]driver.NamedValue, error) {
	checker, _ := dc.(driver.NamedValueChecker)
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv := &named[i]
		nv.Ordinal, nv.Value = i+1, a
		if checker != nil {
			err := checker.CheckNamedValue(nv)
			if err == nil {
				continue
			}
			if !errors.Is(err, driver.ErrSkip) {
				return nil, fmt.Errorf("sql: converting argument $%d type: %w", i+1, err)
			}
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("sql: converting argument $%d type: %w", i+1, err)
		}
		nv.Value = v
	}
	return named, nil
}

// scanFirst scans the first row of rows into dest: sql.ErrNoRows when there is none.
func scanFirst(rows driver.Rows, dest []any) error {
	n := len(rows.Columns())
	if n != len(dest) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", n, len(dest))
	}
	values := make([]driver.Value, n)
	switch err := rows.Next(values); {
	case errors.Is(err, io.EOF):
		return sql.ErrNoRows
	case err != nil:
		return err
	}
	for i, v := range values {
		if err := assign(dest[i], v); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// assign stores v, a value from the driver, in dest, as Rows.Scan would, for the kinds of
// destination the backend's statements scan into.
func assign(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(v)
	case *int64:
		return assignNotNull(d, v)
	case *bool:
		return assignNotNull(d, v)
	case *string:
		return assignNotNull(d, v)
	case *uint64:
		return assignNotNull(d, v)
	}
	return fmt.Errorf("unsupported destination %T", dest)
}

// assignNotNull stores v in d, converted as Rows.Scan converts; NULL is an error.
func assignNotNull[T any](d *T, v driver.Value) error {
	var n sql.Null[T]
	if err := n.Scan(v); err != nil {
		return err
	}
	if !n.Valid {
		return fmt.Errorf("converting NULL to %T is unsupported", *d)
	}
	*d = n.V
	return nil
}
