package jdbc

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mysqlDDL creates the table; see mysql.sql.
//
//go:embed mysql.sql
var mysqlDDL string

// MySQL is the dialect of MySQL (5.7 and later) and MariaDB (10.3 and later), the default;
// simba's tests run it against MariaDB 10.11. On MariaDB every table statement also
// carries its own server-side time limit (SET STATEMENT max_statement_time); MySQL has no
// such prefix for UPDATE, so there only the exact-version release keeps a late statement
// harmless (see the package documentation).
var MySQL Dialect = mysqlDialect{}

var (
	_ releaseUnlocker = mysqlDialect{}
	_ lockingAcquirer = mysqlDialect{}
)

type mysqlDialect struct{}

func (mysqlDialect) String() string { return "mysql" }

func (mysqlDialect) quote(t tableName) string {
	if t.schema == "" {
		return "`" + t.name + "`"
	}
	return "`" + t.schema + "`.`" + t.name + "`"
}

func (d mysqlDialect) ddl(t tableName) string {
	return strings.Replace(mysqlDDL, "`simba_mutex`", d.quote(t), 1)
}

func (d mysqlDialect) statements(t tableName) statements {
	q := d.quote(t)
	_, v, _ := valueTable.name(d, t) // "": no room for it, and no values
	_, sl, _ := slotTable.name(d, t)
	clocked := func(stmt string) clocked {
		render := func(clock *strings.Replacer, value string) string {
			return fmt.Sprintf(clock.Replace(strings.ReplaceAll(stmt, "{value}", value)), q)
		}
		valued := valueColumn(d, q, v)
		return clocked{plain: render(mysqlPlainClock, noValue), folding: render(mysqlFoldingClock, noValue),
			plainValued: render(mysqlPlainClock, valued), foldingValued: render(mysqlFoldingClock, valued)}
	}
	return statements{
		keepValue:     sideStatement(mysqlKeepValue, q, v),
		valueAhead:    clocked(strings.ReplaceAll(mysqlValueAhead, "%[2]s", v)),
		clearValue:    sideStatement(mysqlClearValue, q, v),
		lastSlot:      sideStatement(mysqlLastSlot, q, sl),
		claimSlot:     sideStatement(mysqlClaimSlot, q, sl),
		ensureRow:     fmt.Sprintf(mysqlEnsureRow, q),
		read:          clocked(mysqlRead),
		readLocking:   clocked(mysqlReadLocking),
		readTrying:    clocked(mysqlReadTrying),
		release:       fmt.Sprintf(mysqlRelease, q),
		releaseUnlock: fmt.Sprintf(mysqlReleaseUnlock, q),
		waitLock:      mysqlWaitLock,
		unlock:        mysqlUnlock,
		settle:        mysqlUnlock,
		interruptText: mysqlInterrupt,
		ensureFloor:   fmt.Sprintf(mysqlEnsureFloor, q),
		lockFloor:     fmt.Sprintf(mysqlLockFloor, q),
		raiseFloor:    fmt.Sprintf(mysqlRaiseFloor, q),
		prunable:      clocked(mysqlPrunable),
		deleteText:    fmt.Sprintf(mysqlDelete, q, "%s"),
	}
}

func (d mysqlDialect) acquireStatement(t tableName, s schema, ttl, lease time.Duration) string {
	return d.renderAcquire(mysqlAcquire, t, s, ttl, lease)
}

// renderAcquire renders an acquire statement for t, a session like s's, and a ttl and
// ttl + transition.
func (d mysqlDialect) renderAcquire(stmt string, t tableName, s schema, ttl, lease time.Duration) string {
	clock := mysqlPlainClock
	if s.folds {
		clock = mysqlFoldingClock
	}
	q := d.quote(t)
	v := ""
	if s.values {
		_, v, _ = valueTable.name(d, t)
	}
	stmt = strings.ReplaceAll(stmt, "{value}", valueColumn(d, q, v))
	return fmt.Sprintf(clock.Replace(stmt), q, ttl.Milliseconds(), lease.Milliseconds(), parity(ttl, lease))
}

func (d mysqlDialect) acquire(ctx context.Context, q querier, s schema, limit time.Duration, query string, a acquireArgs) (acquireResult, error) {
	return d.runAcquire(ctx, q, s, limit, query, a)
}

func (d mysqlDialect) renewStatement(t tableName, s schema, ttl, lease time.Duration) string {
	return d.renderAcquire(mysqlRenewMany, t, s, ttl, lease)
}

// renewMany runs mysqlRenewMany. Its answer counts the rows renewed: when it counts fewer
// than all, it does not tell which, and none is reported renewed.
func (d mysqlDialect) renewMany(ctx context.Context, q querier, s schema, limit time.Duration, query string, rows []renewRow) ([]bool, uint64, error) {
	query, args := d.bound(s, limit, renewManyQuery(query, len(rows)), renewManyArgs(rows)...)
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, 0, err
	}
	now, err := res.LastInsertId()
	if err != nil {
		return nil, 0, err
	}
	renewed := make([]bool, len(rows))
	if n == int64(len(rows)) {
		for i := range renewed {
			renewed[i] = true
		}
	}
	return renewed, uint64(now) & nowBits, nil
}

func (d mysqlDialect) lockingAcquireStatement(t tableName, s schema, ttl, lease time.Duration, reads bool) string {
	if !s.locksInUpdates || !reads { // it reads no row either way
		return ""
	}
	return d.renderAcquire(mysqlAcquireLocking, t, s, ttl, lease)
}

func (d mysqlDialect) holdingAcquireStatement(t tableName, s schema, ttl, lease time.Duration) string {
	if !s.locksInUpdates {
		return ""
	}
	return d.renderAcquire(mysqlAcquireHolding, t, s, ttl, lease)
}

func (d mysqlDialect) acquireHolding(ctx context.Context, q querier, s schema, limit time.Duration, query, lock string, session int64, a acquireArgs) (acquireResult, error) {
	return d.runAcquire(ctx, q, s, limit, query, a, lock, session)
}

// acquireLocking runs mysqlAcquireLocking. Its answer tells that the session holds the
// lock when it began a new tenure, and nothing of the lock or the row otherwise (see
// mysqlAcquireLocking): the contention reads the row next.
func (d mysqlDialect) acquireLocking(ctx context.Context, conn querier, s schema, limit time.Duration, query, lock string, _ bool, a acquireArgs) (acquireResult, lockTry, *row, error) {
	res, err := d.runAcquire(ctx, conn, s, limit, query, a, lock, lock)
	if err != nil || !res.matched || res.renewed {
		return res, lockTry{}, nil, err
	}
	return res, lockTry{told: true, got: true}, nil, nil
}

// runAcquire runs an acquire statement with q and decodes its answer; more are the
// arguments that follow mysqlAcquire's.
func (d mysqlDialect) runAcquire(ctx context.Context, q querier, s schema, limit time.Duration, query string, a acquireArgs, more ...any) (acquireResult, error) {
	query, args := d.bound(s, limit, query, append([]any{a.contender, a.expect, a.floor, a.contender, a.mutex, a.floor, a.contender, a.expect, a.expect, a.stale}, more...)...)
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return acquireResult{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return acquireResult{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return acquireResult{}, err
	}
	return decodeAcquire(n, id, a.floor)
}

func (d mysqlDialect) releaseUnlock(ctx context.Context, q querier, s schema, limit time.Duration, query string, lock, mutex, contender string, version uint64) (released, unlocked bool, err error) {
	query, args := d.bound(s, limit, query, lock, mutex, contender, version)
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return false, false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return false, false, err
	}
	said, err := res.LastInsertId()
	return true, err == nil && said == 1, nil
}

// decodeAcquire decodes the rows affected by the acquire UPDATE and the LAST_INSERT_ID it
// set: the version it found in bits 32 and up, the renewal in bit 31, and the low 31 bits
// of the database's now. The new version is one more than the larger of the version found
// and floor, as the statement set it.
func decodeAcquire(affected, lastID int64, floor uint64) (acquireResult, error) {
	enc := uint64(lastID)
	switch {
	case affected == 0:
		return acquireResult{}, nil
	case affected != 1:
		return acquireResult{}, fmt.Errorf("acquire changed %d rows; is mutex the primary key?", affected)
	case max(enc>>32, floor) >= maxVersion:
		return acquireResult{}, fmt.Errorf("acquire found version %d, floor %d: past the column's largest", enc>>32, floor)
	}
	return acquireResult{matched: true, found: enc >> 32, version: max(enc>>32, floor) + 1, renewed: enc>>31&1 == 1, now: enc & nowBits}, nil
}

// nowBits are the bits of the database's now that the acquire statement hands back.
const nowBits = 1<<31 - 1

func (d mysqlDialect) bound(s schema, limit time.Duration, query string, args ...any) (string, []any) {
	return d.prefix(s, limit) + query, args
}

// prefix returns the prefix that makes MariaDB give a statement up after d, or "" where
// the server cannot (MySQL).
func (mysqlDialect) prefix(s schema, d time.Duration) string {
	if !s.mariaDB || d <= 0 {
		return ""
	}
	// The server starts counting when it starts the statement, after the client sent it:
	// give it a little less than the caller's deadline so that, as a rule, the server
	// gives up first and the connection survives with a clean error. Two significant
	// digits of milliseconds (at least 81% of d) keep the text the same from one call to
	// the next, so that a prepared statement is used again (prepared.go).
	ms := max(d*9/10, time.Millisecond).Milliseconds()
	unit := int64(1)
	for ms >= 100*unit {
		unit *= 10
	}
	limit := time.Duration(ms/unit*unit) * time.Millisecond
	return fmt.Sprintf(mysqlBoundPrefix, strconv.FormatFloat(limit.Seconds(), 'f', 3, 64))
}

// renewManyQuery completes mysqlRenewMany, rendered as query, for n rows.
func renewManyQuery(query string, n int) string {
	return strings.Replace(query, "{rows}", strings.Repeat(" UNION ALL SELECT ?, ?, ?", max(n-1, 0)), 1)
}

// renewManyArgs are mysqlRenewMany's arguments for rows, sorted by mutex: the order in
// which the statement locks them, as every statement that locks several rows does.
func renewManyArgs(rows []renewRow) []any {
	sorted := slices.SortedFunc(slices.Values(rows), func(a, b renewRow) int { return strings.Compare(a.mutex, b.mutex) })
	args := make([]any, 0, 3*len(rows))
	for _, r := range sorted {
		args = append(args, r.mutex, r.contender, r.version)
	}
	return args
}

func (mysqlDialect) list(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// timedOut: GET_LOCK answers 0 at its timeout; no error means it.
func (mysqlDialect) timedOut(error) bool { return false }

// maxIdentifier is the longest identifier MySQL and MariaDB accept.
func (mysqlDialect) maxIdentifier() int { return 64 }

func (mysqlDialect) lockName(s schema, t tableName, mutex string) string {
	// Named locks are server-wide and their names at most 64 characters: hash the
	// database, table and mutex into one.
	sum := sha256.Sum256([]byte(s.database + "\x00" + t.name + "\x00" + mutex))
	return "simba:" + hex.EncodeToString(sum[:20])
}

func (d mysqlDialect) inspect(ctx context.Context, db *sql.DB, t tableName) (schema, error) {
	var s schema
	var version, csClient, csConn, timeZone, systemZone, user string
	var readOnly, statementLog bool
	err := db.QueryRowContext(ctx, mysqlServer).Scan(&s.database, &version, &csClient, &csConn, &readOnly, &timeZone, &systemZone,
		&statementLog, &user)
	var pg sqlState
	switch {
	case errors.As(err, &pg): // only PostgreSQL's drivers tell a SQLSTATE this way
		return schema{}, fmt.Errorf("read server properties: the server answers as PostgreSQL does, use WithDialect(Postgres): %w", err)
	case err != nil:
		return schema{}, fmt.Errorf("read server properties: %w", err)
	}
	s.mariaDB = strings.Contains(strings.ToLower(version), "mariadb")
	s.folds = mayFold(timeZone, systemZone)
	s.locksInUpdates = !statementLog
	if t.schema != "" {
		s.database = t.schema
	}
	if s.database == "" {
		return schema{}, &SchemaError{Table: t.String(), Problems: []string{
			"no database: name one in the DSN or qualify the table name (WithTable(\"db.simba_mutex\"))"}}
	}
	cols, err := d.columns(ctx, db, s.database, t.name)
	if err != nil {
		return schema{}, err
	}
	var problems []string
	if readOnly {
		problems = append(problems, "the server is read-only (read_only=ON: a replica?); mutexes need a writable primary")
	}
	for _, cs := range []struct{ name, value string }{{"character_set_client", csClient}, {"character_set_connection", csConn}} {
		if cs.value != "utf8mb4" {
			problems = append(problems, fmt.Sprintf("the connection's %s is %s: names would be converted on the way; use utf8mb4 (go-sql-driver: charset=utf8mb4, the default)", cs.name, cs.value))
		}
	}
	if len(cols) == 0 { // information_schema lists no table the user has no privilege on
		problems = append(problems, "the table does not exist, or the user may not use it: create it with CreateTable, or run "+oneLine(d.ddl(t)))
	} else {
		s.mutex, s.owner, problems = checkColumns(d.quote(t), cols, problems)
	}
	if len(problems) == 0 {
		if problems, err = d.checkWrites(ctx, db, s.database, t, account(user), problems); err != nil {
			return schema{}, err
		}
	}
	if len(problems) > 0 {
		return schema{}, &SchemaError{Table: s.database + "." + t.name, Problems: problems}
	}
	return s, nil
}

// checkWrites appends a problem to problems if the session may not update or insert into
// the table (mysqlMayUpdate, mysqlMayInsert), both of which write nothing: the user lacks a
// privilege (the GRANT to run names user, an account), or the session or server is
// read-only. It returns an error when the server does not answer.
func (d mysqlDialect) checkWrites(ctx context.Context, db *sql.DB, database string, t tableName, user string, problems []string) ([]string, error) {
	table := d.quote(tableName{schema: database, name: t.name})
	for _, stmt := range []string{mysqlMayUpdate, mysqlMayInsert} {
		_, err := db.ExecContext(ctx, fmt.Sprintf(stmt, d.quote(t)))
		n, _ := mysqlErrorNumber(err)
		switch fix, refusal := refusalFix(err, table); {
		case err == nil:
			continue
		case !refusal:
			return problems, fmt.Errorf("check that the table can be written: %w", err)
		case fix == fixWritable:
			return append(problems, fmt.Sprintf("the session is read-only (%v); fix: connect to a writable primary, "+
				"without tx_read_only or transaction_read_only in the DSN", err)), nil
		case n == 1142 || n == 1143:
			return append(problems, fmt.Sprintf("user %s may not write it (%v); fix: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s",
				user, err, table, user)), nil
		default:
			return append(problems, fmt.Sprintf("the session may not write it (%v); fix: %s", err, fix)), nil
		}
	}
	return problems, nil
}

// account quotes an account as CURRENT_USER() gives it ("user@host") for a GRANT:
// 'user'@'host'.
func account(user string) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	at := strings.LastIndex(user, "@")
	if at < 0 {
		return quote(user)
	}
	return quote(user[:at]) + "@" + quote(user[at+1:])
}

// mysqlColumn is one row of information_schema.COLUMNS.
type mysqlColumn struct {
	name, dataType, columnType string
	maxLen                     int64
	charset, collation         string
	key, nullable              string
}

func (mysqlDialect) columns(ctx context.Context, db *sql.DB, database, table string) (map[string]mysqlColumn, error) {
	rows, err := db.QueryContext(ctx, mysqlColumns, database, table)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	cols := make(map[string]mysqlColumn)
	for rows.Next() {
		var c mysqlColumn
		if err := rows.Scan(&c.name, &c.dataType, &c.columnType, &c.maxLen, &c.charset, &c.collation, &c.key, &c.nullable); err != nil {
			return nil, fmt.Errorf("read the columns of %s.%s: %w", database, table, err)
		}
		c.name, c.dataType, c.columnType = strings.ToLower(c.name), strings.ToLower(c.dataType), strings.ToLower(c.columnType)
		cols[c.name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %s.%s: %w", database, table, err)
	}
	return cols, nil
}

// checkColumns checks a table's columns against the format and returns the capacities of
// its two string columns and every problem found, appended to problems, each with the
// ALTER TABLE that fixes it.
func checkColumns(table string, cols map[string]mysqlColumn, problems []string) (mutex, owner column, _ []string) {
	primary := 0
	for _, c := range cols {
		if c.key == "PRI" {
			primary++
		}
	}
	for _, name := range []string{"mutex", "acquired_at", "ttl_at", "transition_at", "owner_id", "version"} {
		want := "bigint unsigned"
		switch name {
		case "mutex":
			want = "varchar(66) " + mysqlBinary
		case "owner_id":
			want = "varchar(128) " + mysqlBinary
		case "version":
			want = "int unsigned"
		}
		modify := fmt.Sprintf("ALTER TABLE %s MODIFY `%s` %s NOT NULL", table, name, want)
		c, ok := cols[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("column %s is missing; fix: ALTER TABLE %s ADD COLUMN `%s` %s NOT NULL", name, table, name, want))
			continue
		}
		if c.nullable != "NO" {
			problems = append(problems, fmt.Sprintf("column %s must be NOT NULL; fix: %s", name, modify))
		}
		switch name {
		case "mutex":
			var p []string
			mutex, p = checkText(c, modify)
			problems = append(problems, p...)
			if c.key != "PRI" || primary != 1 {
				fix := fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (`mutex`)", table)
				if primary > 0 {
					fix = fmt.Sprintf("ALTER TABLE %s DROP PRIMARY KEY, ADD PRIMARY KEY (`mutex`)", table)
				}
				problems = append(problems, "column mutex must be the primary key, alone; fix: "+fix)
			}
		case "owner_id":
			var p []string
			owner, p = checkText(c, modify)
			problems = append(problems, p...)
		case "version":
			if !(c.dataType == "bigint" || c.dataType == "int" && strings.Contains(c.columnType, "unsigned")) {
				problems = append(problems, fmt.Sprintf("column version is %s; want int unsigned; fix: %s", c.columnType, modify))
			}
		default:
			if c.dataType != "bigint" {
				problems = append(problems, fmt.Sprintf("column %s is %s; want bigint unsigned (epoch milliseconds); fix: %s", name, c.columnType, modify))
			}
		}
	}
	return mutex, owner, problems
}

// mysqlBinary is the character set and collation of the format's string columns.
const mysqlBinary = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"

// checkText checks a string column: it must keep every name apart (a binary collation of
// utf8mb4, or a binary type) and hold at least one character. fix is the ALTER TABLE that
// makes it the format's.
func checkText(c mysqlColumn, fix string) (column, []string) {
	col := column{name: c.name, max: int(min(c.maxLen, 1<<20)), typ: c.columnType}
	var problems []string
	switch c.dataType {
	case "varbinary", "binary":
		col.bytes = true
	case "varchar", "char":
		if c.charset != "utf8mb4" {
			problems = append(problems, fmt.Sprintf("column %s uses character set %s, which cannot hold every name (unrepresentable characters become '?' and names share a row); fix: %s", c.name, c.charset, fix))
		}
		if !strings.HasSuffix(c.collation, "_bin") {
			problems = append(problems, fmt.Sprintf("column %s uses collation %s, under which names that differ in case or accents are equal and would share a row; fix: %s", c.name, c.collation, fix))
		}
	default:
		problems = append(problems, fmt.Sprintf("column %s is %s; fix: %s", c.name, c.columnType, fix))
	}
	if col.max < 1 {
		problems = append(problems, fmt.Sprintf("column %s holds no characters; fix: %s", c.name, fix))
	}
	return col, problems
}

// mayFold reports whether a session time zone (@@session.time_zone, with
// @@system_time_zone for SYSTEM) may have daylight-saving folds: every zone but UTC and
// fixed offsets.
func mayFold(timeZone, systemZone string) bool {
	if timeZone == "SYSTEM" {
		timeZone = systemZone
	}
	switch strings.ToUpper(timeZone) {
	case "UTC", "GMT", "ETC/UTC", "ETC/GMT", "UNIVERSAL", "ZULU":
		return false
	}
	return !fixedOffset.MatchString(timeZone)
}

// fixedOffset matches a time zone given as an offset from UTC, as MySQL writes one.
var fixedOffset = regexp.MustCompile(`^[+-]\d{1,2}:\d{2}$`)
