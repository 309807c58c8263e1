package jdbc

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// postgresDDL creates the table; see postgres.sql.
//
//go:embed postgres.sql
var postgresDDL string

// Postgres is the dialect of PostgreSQL 13 and later, through a database/sql driver such
// as pgx's (github.com/jackc/pgx/v5/stdlib); simba's tests run it against PostgreSQL 15.
// The package doc's PostgreSQL section says what differs from MySQL.
var Postgres Dialect = postgresDialect{}

type postgresDialect struct{}

func (postgresDialect) String() string { return "postgres" }

func (postgresDialect) quote(t tableName) string {
	if t.schema == "" {
		return `"` + t.name + `"`
	}
	return `"` + t.schema + `"."` + t.name + `"`
}

func (d postgresDialect) ddl(t tableName) string {
	return strings.Replace(postgresDDL, `"simba_mutex"`, d.quote(t), 1)
}

func (d postgresDialect) statements(t tableName) statements {
	q := d.quote(t)
	_, v, _ := valueTable.name(d, t) // "": no room for it, and no values
	_, sl, _ := slotTable.name(d, t)
	same := func(stmt string) clocked {
		plain := fmt.Sprintf(strings.ReplaceAll(stmt, "{value}", noValue), q)
		valued := fmt.Sprintf(strings.ReplaceAll(stmt, "{value}", valueColumn(d, q, v)), q)
		return clocked{plain: plain, folding: plain, plainValued: valued, foldingValued: valued}
	}
	return statements{
		keepValue:     sideStatement(pgKeepValue, q, v),
		valueAhead:    same(strings.ReplaceAll(pgValueAhead, "%[2]s", v)),
		clearValue:    sideStatement(pgClearValue, q, v),
		lastSlot:      sideStatement(pgLastSlot, q, sl),
		claimSlot:     sideStatement(pgClaimSlot, q, sl),
		ensureRow:     fmt.Sprintf(pgEnsureRow, q),
		read:          same(pgRead),
		readLocking:   same(pgReadLocking),
		release:       fmt.Sprintf(pgRelease, q),
		releaseUnlock: fmt.Sprintf(pgReleaseUnlock, q),
		waitLock:      pgWaitLock,
		unlock:        pgUnlock,
		settle:        pgSettle,
		interruptText: pgInterrupt,
		ensureFloor:   fmt.Sprintf(pgEnsureFloor, q),
		lockFloor:     fmt.Sprintf(pgLockFloor, q),
		raiseFloor:    fmt.Sprintf(pgRaiseFloor, q),
		prunable:      same(pgPrunable),
		deleteText:    fmt.Sprintf(pgDelete, q, "%s"),
	}
}

func (d postgresDialect) acquireStatement(t tableName, _ schema, ttl, lease time.Duration) string {
	return fmt.Sprintf(pgAcquire, d.quote(t), ttl.Milliseconds(), lease.Milliseconds(), parity(ttl, lease))
}

func (d postgresDialect) acquire(ctx context.Context, q querier, s schema, limit time.Duration, query string, a acquireArgs) (acquireResult, error) {
	query, args := d.bound(s, limit, query, a.floor, a.contender, a.expect, a.mutex, a.stale)
	var version, mark, now, found int64
	err := queryRow(ctx, q, query, args, &version, &mark, &now, &found)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return acquireResult{}, nil
	case err != nil:
		return acquireResult{}, err
	}
	return pgAcquired(version, mark, now, found)
}

func (d postgresDialect) renewStatement(t tableName, _ schema, ttl, lease time.Duration) string {
	return fmt.Sprintf(pgRenewMany, d.quote(t), ttl.Milliseconds(), lease.Milliseconds(), parity(ttl, lease))
}

// renewMany runs pgRenewMany: the rows go as JSON, and the answer names the mutexes
// renewed.
func (d postgresDialect) renewMany(ctx context.Context, q querier, s schema, limit time.Duration, query string, rows []renewRow) ([]bool, uint64, error) {
	type jsonRow struct {
		M string `json:"m"`
		O string `json:"o"`
		V uint64 `json:"v"`
	}
	list := make([]jsonRow, len(rows))
	at := make(map[string]int, len(rows))
	for i, r := range rows {
		list[i] = jsonRow{M: r.mutex, O: r.contender, V: r.version}
		at[r.mutex] = i
	}
	text, err := json.Marshal(list)
	if err != nil {
		return nil, 0, err
	}
	query, args := d.bound(s, limit, query, string(text))
	answer, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer answer.Close()
	renewed := make([]bool, len(rows))
	var now int64
	for answer.Next() {
		var mutex string
		if err := answer.Scan(&mutex, &now); err != nil {
			return nil, 0, err
		}
		i, ok := at[mutex]
		if !ok {
			return nil, 0, fmt.Errorf("the renewal of many mutexes answered mutex %q, which it was not asked to renew", mutex)
		}
		renewed[i] = true
	}
	if err := answer.Err(); err != nil {
		return nil, 0, err
	}
	return renewed, uint64(now) & nowBits, nil
}

var (
	_ lockingAcquirer = postgresDialect{}
	_ releaseUnlocker = postgresDialect{}
)

func (d postgresDialect) lockingAcquireStatement(t tableName, s schema, ttl, lease time.Duration, reads bool) string {
	q, v := d.quote(t), ""
	if s.values {
		_, v, _ = valueTable.name(d, t)
	}
	stmt := pgAcquireTaking
	if reads {
		stmt = strings.ReplaceAll(pgAcquireLocking, "{value}", valueColumn(d, q, v))
	}
	return fmt.Sprintf(stmt, q, ttl.Milliseconds(), lease.Milliseconds(), parity(ttl, lease))
}

// acquireLocking runs pgAcquireLocking (reads) or pgAcquireTaking: what the try did, and
// the UPDATE's answer or, when it matched nothing and the statement read the row, the row
// (missing when there is none).
func (d postgresDialect) acquireLocking(ctx context.Context, conn querier, s schema, limit time.Duration, query, lock string, reads bool, a acquireArgs) (acquireResult, lockTry, *row, error) {
	query, args := d.bound(s, limit, query, a.floor, a.contender, a.expect, a.mutex, a.stale, lock)
	// The answer's columns in one allocation: scanned through pointers, each variable of
	// its own would be one.
	var ans struct {
		got, session                                                       int64
		version, mark, now, found                                          sql.NullInt64
		owner, value                                                       sql.NullString
		acquiredAt, ttlAt, transitionAt, rowVersion, rowNow, token, holder sql.NullInt64
	}
	dest := []any{&ans.got, &ans.session, &ans.version, &ans.mark, &ans.now, &ans.found,
		&ans.owner, &ans.acquiredAt, &ans.ttlAt, &ans.transitionAt, &ans.rowVersion, &ans.rowNow, &ans.value, &ans.token, &ans.holder}
	if !reads {
		dest = dest[:6]
	}
	if err := queryRow(ctx, conn, query, args, dest...); err != nil {
		return acquireResult{}, lockTry{}, nil, err
	}
	try := lockTry{told: true, got: ans.got == 1, other: ans.got != 1, session: ans.session}
	if ans.version.Valid {
		res, err := pgAcquired(ans.version.Int64, ans.mark.Int64, ans.now.Int64, ans.found.Int64)
		return res, try, nil, err
	}
	if !reads {
		return acquireResult{}, try, nil, nil
	}
	if !ans.owner.Valid {
		return acquireResult{}, try, &row{missing: true}, nil
	}
	if try.other {
		try.holder = ans.holder.Int64 // 0 unless the row is free
	}
	return acquireResult{}, try, &row{owner: ans.owner.String, acquiredAt: uint64(ans.acquiredAt.Int64), ttlAt: uint64(ans.ttlAt.Int64),
		transitionAt: uint64(ans.transitionAt.Int64), version: uint64(ans.rowVersion.Int64), now: uint64(ans.rowNow.Int64),
		value: ans.value.String, token: uint64(ans.token.Int64),
		lock: try}, nil
}

func (d postgresDialect) releaseUnlock(ctx context.Context, q querier, s schema, limit time.Duration, query string, lock, mutex, contender string, version uint64) (released, unlocked bool, err error) {
	query, args := d.bound(s, limit, query, mutex, contender, version, lock)
	err = queryRow(ctx, q, query, args, &unlocked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, unlocked, err
}

// pgAcquired checks and decodes the answer of an acquire that matched.
func pgAcquired(version, mark, now, found int64) (acquireResult, error) {
	if version <= 0 || now < 0 || mark < 0 || mark > 1 || found < 0 || found >= version {
		return acquireResult{}, fmt.Errorf("acquire returned version %d, renewal mark %d, now %d, version found %d", version, mark, now, found)
	}
	return acquireResult{matched: true, found: uint64(found), version: uint64(version), renewed: mark == 1, now: uint64(now) & nowBits}, nil
}

// bound passes the limit as the statement's first argument ($1): lock_timeout in whole
// milliseconds, a little less than d so that, as a rule, the server gives up first and
// the connection survives with a clean error; nil (the session's own) without a limit.
func (postgresDialect) bound(_ schema, d time.Duration, query string, args ...any) (string, []any) {
	var ms any
	if d > 0 {
		ms = strconv.FormatInt(max(d*9/10, time.Millisecond).Milliseconds(), 10)
	}
	return query, append([]any{ms}, args...)
}

// list numbers the placeholders from $2: $1 is the limit.
func (postgresDialect) list(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i+2))
	}
	return b.String()
}

// sqlState is implemented by the errors of PostgreSQL drivers (pgx's *pgconn.PgError,
// lib/pq's *pq.Error), so that the package reads error codes without importing a driver.
type sqlState interface{ SQLState() string }

// lockNotAvailable is the SQLSTATE of lock_timeout's error.
const lockNotAvailable = "55P03"

func (postgresDialect) timedOut(err error) bool {
	var e sqlState
	return errors.As(err, &e) && e.SQLState() == lockNotAvailable
}

// maxIdentifier: PostgreSQL truncates longer names to 63 bytes.
func (postgresDialect) maxIdentifier() int { return 63 }

// lockName returns the advisory lock's key, a bigint in decimal digits: the first 8 bytes
// of a hash of the database, schema, table and mutex. Advisory locks are shared by every
// application of a database: a key another application uses by chance costs hand-overs
// their speed, never safety.
func (postgresDialect) lockName(s schema, t tableName, mutex string) string {
	sum := sha256.Sum256([]byte(s.database + "\x00" + t.name + "\x00" + mutex))
	return strconv.FormatInt(int64(binary.BigEndian.Uint64(sum[:8])), 10)
}

func (d postgresDialect) inspect(ctx context.Context, db *sql.DB, t tableName) (schema, error) {
	var s schema
	var current, defaultSchema, serverEncoding, clientEncoding, role string
	var version int
	var readOnly bool
	var nspace sql.NullString
	var isTable, mayDelete sql.NullBool
	quoted := d.quote(t)
	err := db.QueryRowContext(ctx, pgServer, quoted).Scan(&current, &defaultSchema, &version, &serverEncoding, &clientEncoding,
		&readOnly, &role, &nspace, &isTable, &mayDelete)
	if _, mysql := mysqlErrorNumber(err); mysql {
		return schema{}, fmt.Errorf("read server properties: the server answers as MySQL does, use the MySQL dialect (no WithDialect(Postgres)): %w", err)
	} else if err != nil {
		return schema{}, fmt.Errorf("read server properties: %w", err)
	}
	if !nspace.Valid {
		where := "on the search_path (schema " + defaultSchema + ")"
		if t.schema != "" {
			where = "in schema " + t.schema
		}
		return schema{}, &SchemaError{Table: t.String(), Problems: []string{
			"the table does not exist " + where + ": create it with CreateTable, or run " + oneLine(d.ddl(t))}}
	}
	s.database = current + "." + nspace.String
	s.locksInUpdates = true
	table := nspace.String + "." + t.name
	cols, err := d.columns(ctx, db, quoted)
	if err != nil {
		return schema{}, err
	}
	var problems []string
	if version < 130000 {
		problems = append(problems, fmt.Sprintf("the server is PostgreSQL %d.%d; simba needs 13 or later", version/10000, version%10000))
	}
	if readOnly {
		problems = append(problems, "the server is read-only (a standby, or default_transaction_read_only=on); mutexes need a writable primary")
	}
	if serverEncoding != "UTF8" {
		problems = append(problems, fmt.Sprintf("the database's encoding is %s, which cannot hold every name (SQL_ASCII does not even check them); create the database with ENCODING 'UTF8'", serverEncoding))
	}
	if clientEncoding != "UTF8" {
		problems = append(problems, fmt.Sprintf("the session's client_encoding is %s: names would be converted on the way; use UTF8 (pgx always does)", clientEncoding))
	}
	if !isTable.Bool {
		problems = append(problems, "it is not a table (a view?)")
	}
	if missing := pgMissingPrivileges(cols); len(missing) > 0 && isTable.Bool {
		if !mayDelete.Bool {
			missing = append(missing, "DELETE") // named, though only Prune needs it
		}
		problems = append(problems, fmt.Sprintf("role %s may not %s it; fix: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s",
			role, strings.Join(missing, ", "), quoted, role))
	}
	s.mutex, s.owner, problems = checkPgColumns(quoted, cols, problems)
	if len(problems) > 0 {
		return schema{}, &SchemaError{Table: table, Problems: problems}
	}
	return s, nil
}

// pgMissingPrivileges returns the privileges that the session's role lacks on a column of
// the format that cols has, of those acquisitions need: SELECT and INSERT on every column,
// UPDATE on every column but mutex. Each is held on the table or on every such column.
// (DELETE, which only Prune needs, fails Start only along with one of these: Prune reports
// its absence as a refusal.)
func pgMissingPrivileges(cols map[string]pgColumn) []string {
	var missing []string
	for _, priv := range []string{"SELECT", "INSERT", "UPDATE"} {
		for _, name := range []string{"mutex", "acquired_at", "ttl_at", "transition_at", "owner_id", "version"} {
			c, ok := cols[name]
			if ok && !c.may[priv] && !(priv == "UPDATE" && name == "mutex") {
				missing = append(missing, priv)
				break
			}
		}
	}
	return missing
}

// oneLine returns a statement without its comment lines, on one line.
func oneLine(stmt string) string {
	var lines []string
	for _, l := range strings.Split(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// pgColumn is one row of pgColumns.
type pgColumn struct {
	name, typ, declared string
	maxLen              int
	notNull             bool
	collation           string
	deterministic       bool
	primary             bool
	may                 map[string]bool // the session's role's privileges on the column: SELECT, INSERT, UPDATE
}

func (postgresDialect) columns(ctx context.Context, db *sql.DB, quoted string) (map[string]pgColumn, error) {
	rows, err := db.QueryContext(ctx, pgColumns, quoted)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", quoted, err)
	}
	defer rows.Close()
	cols := make(map[string]pgColumn)
	for rows.Next() {
		var c pgColumn
		var mayRead, mayInsert, mayUpdate bool
		if err := rows.Scan(&c.name, &c.typ, &c.declared, &c.maxLen, &c.notNull, &c.collation, &c.deterministic, &c.primary,
			&mayRead, &mayInsert, &mayUpdate); err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", quoted, err)
		}
		c.may = map[string]bool{"SELECT": mayRead, "INSERT": mayInsert, "UPDATE": mayUpdate}
		cols[c.name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", quoted, err)
	}
	return cols, nil
}

// checkPgColumns checks a table's columns against the format and returns the capacities
// of its two string columns and every problem found, appended to problems, each with the
// ALTER TABLE that fixes it.
func checkPgColumns(table string, cols map[string]pgColumn, problems []string) (mutex, owner column, _ []string) {
	primary := 0
	for _, c := range cols {
		if c.primary {
			primary++
		}
	}
	for _, name := range []string{"mutex", "acquired_at", "ttl_at", "transition_at", "owner_id", "version"} {
		c, ok := cols[name]
		want := "bigint"
		switch name {
		case "mutex":
			want = `varchar(66) COLLATE "C"`
		case "owner_id":
			want = `varchar(128) COLLATE "C"`
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("column %s is missing; fix: ALTER TABLE %s ADD COLUMN %s %s NOT NULL", name, table, name, want))
			continue
		}
		if !c.notNull {
			problems = append(problems, fmt.Sprintf("column %s must be NOT NULL; fix: ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", name, table, name))
		}
		alter := fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s", table, name, want)
		switch name {
		case "mutex", "owner_id":
			col, p := checkPgText(c, alter)
			problems = append(problems, p...)
			if name == "mutex" {
				mutex = col
				if !c.primary || primary != 1 {
					problems = append(problems, fmt.Sprintf("column mutex must be the primary key, alone; fix: ALTER TABLE %s ADD PRIMARY KEY (mutex)", table))
				}
			} else {
				owner = col
			}
		default:
			if c.typ != "int8" {
				problems = append(problems, fmt.Sprintf("column %s is %s; want bigint; fix: %s", name, c.declared, alter))
			}
		}
	}
	return mutex, owner, problems
}

// checkPgText checks a string column: varchar or text, under a deterministic collation
// (different strings never equal), holding at least one character. char(n) is refused: it
// pads values with spaces, which an owner would then not recognise as its own ID.
func checkPgText(c pgColumn, alter string) (column, []string) {
	col := column{name: c.name, max: c.maxLen, typ: c.declared}
	if col.max < 0 {
		col.max = 1 << 20
	}
	var problems []string
	switch c.typ {
	case "varchar", "text":
		if !c.deterministic {
			problems = append(problems, fmt.Sprintf("column %s uses the nondeterministic collation %s, under which different names may be equal and would share a row; fix: %s", c.name, c.collation, alter))
		}
	case "bpchar":
		problems = append(problems, fmt.Sprintf("column %s is %s, which pads values with spaces; fix: %s", c.name, c.declared, alter))
	default:
		problems = append(problems, fmt.Sprintf("column %s is %s; fix: %s", c.name, c.declared, alter))
	}
	if col.max < 1 {
		problems = append(problems, fmt.Sprintf("column %s holds no characters; fix: %s", c.name, alter))
	}
	return col, problems
}
