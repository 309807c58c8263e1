package jdbc

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/simba-go/simba"
)

// sideTable is a table of simba's own beside the mutex table (JVM Simba never reads it),
// named by the mutex table's name and a suffix, in its schema: the value table and the
// slot table. CreateTable creates them; Start looks for them once per backend.
type sideTable struct {
	suffix       string
	what         string // what it keeps, for messages
	columns      string // its columns, for the check
	mysql, pgsql string // the DDL, for simba_mutex + suffix
}

// name returns the side table's name beside t, and its quoted form in d; an error wrapping
// simba.ErrInvalidArgument when t leaves no room for the suffix.
func (st sideTable) name(d Dialect, t tableName) (tableName, string, error) {
	n := tableName{schema: t.schema, name: t.name + st.suffix}
	if most := d.maxIdentifier(); len(n.name) > most {
		return tableName{}, "", simba.InvalidArgument("table", t.String(),
			fmt.Sprintf("leaves no room for the %s table %s: at most %d characters", st.what, n.name, most-len(st.suffix)))
	}
	return n, quoteTable(d, n), nil
}

// ddl returns the side table's CREATE TABLE IF NOT EXISTS beside t.
func (st sideTable) ddl(d Dialect, t tableName) (string, error) {
	_, q, err := st.name(d, t)
	if err != nil {
		return "", err
	}
	switch d.(type) {
	case mysqlDialect:
		return strings.Replace(st.mysql, "`simba_mutex"+st.suffix+"`", q, 1), nil
	case postgresDialect:
		return strings.Replace(st.pgsql, `"simba_mutex`+st.suffix+`"`, q, 1), nil
	}
	return "", simba.InvalidArgument("dialect", d.String(), "keeps no "+st.what+" table")
}

// quoteTable quotes t in d.
func quoteTable(d Dialect, t tableName) string {
	switch d := d.(type) {
	case mysqlDialect:
		return d.quote(t)
	case postgresDialect:
		return d.quote(t)
	}
	return t.String()
}

// sideDDL returns the DDL of st for the options, for SideDDL-like functions.
func sideDDL(st sideTable, opts []Option) (string, error) {
	cfg, t, err := newConfig(opts)
	if err != nil {
		return "", err
	}
	return st.ddl(cfg.dialect, t)
}

// createSide creates st beside t, unless t leaves no room for its name (the backend then
// works without it).
func createSide(ctx context.Context, db *sql.DB, d Dialect, t tableName, st sideTable) error {
	n, _, err := st.name(d, t)
	if err != nil {
		return nil
	}
	ddl, err := st.ddl(d, t)
	if err != nil {
		return nil
	}
	return create(ctx, db, ddl, n)
}

// presentAll reports whether every side table exists beside the mutex table with every
// column, and the session may read them: one statement for the common case (CreateTable
// made them all); where one is missing, present tells which.
func (b *Backend) presentAll(ctx context.Context) (values, slots, waits bool, err error) {
	var all []string
	for _, st := range []sideTable{valueTable, slotTable, waitTable} {
		_, q, err := st.name(b.dialect, b.table)
		if err != nil {
			break
		}
		all = append(all, "(SELECT COUNT(*) FROM (SELECT "+st.columns+" FROM "+q+" WHERE 1 = 0) AS none)")
	}
	var none int
	if len(all) == 3 && b.db.QueryRowContext(ctx, "SELECT "+strings.Join(all, " + ")).Scan(&none) == nil {
		return true, true, true, nil
	}
	if values, err = b.present(ctx, valueTable); err != nil {
		return false, false, false, err
	}
	if slots, err = b.present(ctx, slotTable); err != nil {
		return false, false, false, err
	}
	waits, err = b.present(ctx, waitTable)
	return values, slots, waits, err
}

// present reports whether st exists beside the mutex table with every column, and the
// session may read it: a table that is missing, or that the session may not read, is
// absent (the backend works without it); an outage is an error.
func (b *Backend) present(ctx context.Context, st sideTable) (bool, error) {
	n, q, err := st.name(b.dialect, b.table)
	if err != nil {
		return false, nil
	}
	var none int
	check := "SELECT COUNT(*) FROM (SELECT " + st.columns + " FROM " + q + " WHERE 1 = 0) AS none"
	err = b.db.QueryRowContext(ctx, check).Scan(&none)
	if err == nil {
		return true, nil
	}
	err = fmt.Errorf("simba/jdbc: check table %s: %w", n, err)
	if _, ok := refusalFix(err, n.String()); ok {
		return false, nil
	}
	return false, err
}

// missing is the refusal for a side table that a participant needs and Start did not find.
func (b *Backend) missing(st sideTable, why string) error {
	n, _, err := st.name(b.dialect, b.table)
	if err != nil {
		return err
	}
	ddl, err := st.ddl(b.dialect, b.table)
	if err != nil {
		return err
	}
	return &refusal{err: fmt.Errorf("simba/jdbc: %s, and table %s is missing or may not be read", why, n),
		fix: "create it with CreateTable, beside the mutex table, or run " + oneLine(ddl)}
}
