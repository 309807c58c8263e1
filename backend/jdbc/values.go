package jdbc

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Owner values: see "Owner values" in the package documentation for the table and the
// rules that keep a value with its tenure.

var (
	//go:embed values_mysql.sql
	mysqlValueDDL string
	//go:embed values_postgres.sql
	postgresValueDDL string
)

// valueTable keeps the owner value of each mutex's tenure.
var valueTable = sideTable{suffix: "_value", what: "value", columns: "mutex, owner_id, token, value",
	mysql: mysqlValueDDL, pgsql: postgresValueDDL}

var _ backend.ValueKeeper = (*Backend)(nil)

// KeepsValues reports that the backend keeps owner values for mutexes, in the value table
// beside the mutex table; see backend.ValueKeeper. A contender with a value is refused at
// its start when that table is missing.
func (b *Backend) KeepsValues(k backend.Kind) bool { return k == backend.Mutex }

// ValueDDL returns the statement that creates the value table, beside the mutex table, if
// it is missing (CREATE TABLE IF NOT EXISTS), for migrations run by other tools. Options
// as for New: WithTable and WithDialect matter.
func ValueDDL(opts ...Option) (string, error) { return sideDDL(valueTable, opts) }

// The value a read answers with a row: the value row's, when it names the row's owner and
// the row's tenure. Its token is that tenure's first version: the row's version when the
// row's last write began a tenure (an even renewal mark), and below it when that write was
// a renewal (an odd one). %[1]s stands for the mutex table, %[2]s for the value table.
// The same value row's token is the tenure's, which the read answers too (Record.Token).
// %[3]s stands for the column read: value or token, and %[4]s for what stands for none.
const (
	mysqlValue = "COALESCE((SELECT v.%[3]s FROM %[2]s AS v WHERE v.mutex = %[1]s.mutex AND v.owner_id = %[1]s.owner_id " +
		"AND (v.token = %[1]s.version OR v.token < %[1]s.version " +
		"AND ((CAST(%[1]s.transition_at AS SIGNED) - CAST(%[1]s.ttl_at AS SIGNED)) & 1) = 1)), %[4]s)"
	pgValue = "COALESCE((SELECT v.%[3]s FROM %[2]s AS v WHERE v.mutex = %[1]s.mutex AND v.owner_id = %[1]s.owner_id " +
		"AND (v.token = %[1]s.version OR v.token < %[1]s.version AND ((%[1]s.transition_at - %[1]s.ttl_at) & 1) = 1)), %[4]s)"

	// noValue stands for the value and its token where there is no value table.
	noValue = "'', 0"
)

// The value write: a contender with a value writes it, with its tenure's token, while its
// tenure is on the row at the version its contention last saw, before any renewal (which
// would make a value row of an earlier tenure of the same ID look like this one's).
// MySQL's answers, through LAST_INSERT_ID, 1 when the row was there to write from (its
// rows affected would be 0 for a value row written already, the same, by a write whose
// answer was lost); PostgreSQL's, its rows affected. Arguments: token, value, mutex,
// contender, version.
const (
	mysqlKeepValue = "INSERT INTO %[2]s (mutex, owner_id, token, value) SELECT mutex, owner_id, LAST_INSERT_ID(1) * ?, ? FROM %[1]s " +
		"WHERE mutex = ? AND owner_id = ? AND version = ? " +
		"ON DUPLICATE KEY UPDATE owner_id = VALUES(owner_id), token = VALUES(token), value = VALUES(value)"
	pgKeepValue = "INSERT INTO %[2]s AS v (mutex, owner_id, token, value) SELECT mutex, owner_id, $2::bigint, $3::text FROM %[1]s " +
		"WHERE " + pgBound + " AND mutex = $4 AND owner_id = $5 AND version = $6 " +
		"ON CONFLICT (mutex) DO UPDATE SET owner_id = EXCLUDED.owner_id, token = EXCLUDED.token, value = EXCLUDED.value"
)

// The value's write ahead of an acquisition that may begin a tenure (the contention has
// none): it writes the value row for the tenure the acquisition would begin, whose token
// is the version the acquisition would write, while the row is free (or stale: the
// acquisition's own conditions), so that the acquisition's commit makes the value the
// tenure's at once, and no reader finds the tenure without it. Where the row is not free,
// it writes nothing; where the acquisition then finds another version (someone took the
// row between the two), the value row names a tenure that never was (no reader can match
// it: the version went to another owner) and the contention writes its value after the
// acquisition (keepValue). It answers the token it wrote (MySQL: LAST_INSERT_ID; 0: none).
// Arguments: contender, floor, value, mutex, floor, stale version (NULL: none); on
// PostgreSQL: limit, contender, floor, value, mutex, stale version.
const (
	mysqlValueAhead = "INSERT INTO %[2]s (mutex, owner_id, token, value) " +
		"SELECT mutex, ?, LAST_INSERT_ID(GREATEST(version, ?) + 1), ? FROM %[1]s " +
		"WHERE mutex = ? AND GREATEST(version, ?) < 4294967295 AND (" + mysqlFree + " OR version <=> ?) " +
		"ON DUPLICATE KEY UPDATE owner_id = VALUES(owner_id), token = VALUES(token), value = VALUES(value)"
	pgValueAhead = "INSERT INTO %[2]s AS v (mutex, owner_id, token, value) " +
		"SELECT mutex, $2::text, GREATEST(version, $3::bigint) + 1, $4::text FROM %[1]s " +
		"WHERE " + pgBound + " AND mutex = $5 AND GREATEST(version, $3::bigint) < 4294967295 AND (" + pgFree +
		" OR version IS NOT DISTINCT FROM $6) " +
		"ON CONFLICT (mutex) DO UPDATE SET owner_id = EXCLUDED.owner_id, token = EXCLUDED.token, value = EXCLUDED.value " +
		"RETURNING token"
)

// valueAhead runs the value's write ahead of an acquisition (see mysqlValueAhead) and
// returns the token it wrote the value for; 0 when the row was not free.
func (c *contention) valueAhead(ctx context.Context) (uint64, error) {
	var stale sql.NullInt64
	if c.stale() {
		stale = sql.NullInt64{Int64: int64(c.watch.version), Valid: true}
	}
	floor := c.b.floors.get(c.mutex)
	var token uint64
	err := c.run(ctx, false, func(q querier) error {
		stmt := c.b.sql.valueAhead.in(c.schema)
		if _, pg := c.b.dialect.(postgresDialect); pg {
			query, args := c.b.dialect.bound(c.schema, limit(ctx), stmt, c.id, floor, c.value, c.mutex, stale)
			err := q.QueryRowContext(ctx, query, args...).Scan(&token)
			if errors.Is(err, sql.ErrNoRows) {
				token, err = 0, nil
			}
			return err
		}
		query, args := c.b.dialect.bound(c.schema, limit(ctx), stmt, c.id, floor, c.value, c.mutex, floor, stale)
		res, err := q.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		token = uint64(id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("write the owner value: %w", err)
	}
	return token, nil
}

// The clearing of a value row that names a contender without a value: a contender ID
// that had a value and comes back without one (a process restarted without it) would
// otherwise find its earlier tenure's value answered with its own renewals. Arguments:
// mutex, contender.
const (
	mysqlClearValue = "DELETE FROM %[2]s WHERE mutex = ? AND owner_id = ?"
	pgClearValue    = "DELETE FROM %[2]s WHERE " + pgBound + " AND mutex = $2 AND owner_id = $3"
)

// maxCleared bounds how many mutex and contender pairs a backend remembers having cleared.
const maxCleared = 4096

// clearValue deletes the value row that names a contender without a value, once per
// backend for a mutex and a contender, when it has begun a tenure and before that tenure
// is renewed (a renewal is what would make a value row of an earlier tenure of its ID
// look like this one's): the first tenure pays one statement, later ones none. (Before
// the first renewal instead, tenures never renewed would pay nothing; but the renewal
// would then wait for it, and a renewal whose statement must go out at once, as the
// answer of a lost one is awaited, would not.) A refusal (no DELETE privilege on the
// value table) counts as done, as no later try would do better; an outage is tried again
// before the next renewal. Either way the acquisition goes on. It reports whether the row
// is cleared.
func (b *Backend) clearValue(ctx context.Context, s schema, mutex, id string) (done bool) {
	key := mutex + "\x00" + id
	b.mu.Lock()
	_, done = b.cleared[key]
	b.mu.Unlock()
	if done {
		return true
	}
	// A quarter of the call's time at most: the renewal that follows is what the call is
	// for (a clearing whose answer is slow or lost must not leave it no time).
	if d := limit(ctx); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d/4)
		defer cancel()
	}
	query, args := b.dialect.bound(s, limit(ctx), b.sql.clearValue, mutex, id)
	_, err := b.db.ExecContext(ctx, query, args...)
	if err != nil && !errors.Is(b.refused(err), simba.ErrRefused) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cleared == nil || len(b.cleared) >= maxCleared {
		b.cleared = make(map[string]struct{})
	}
	b.cleared[key] = struct{}{}
	return true
}

// clearValue clears the value row naming the contender (Backend.clearValue), and remembers
// it for the contention's later renewals: the backend forgets the pairs it cleared once it
// has cleared maxCleared, and a process holding more mutexes than that would otherwise
// send a DELETE with every renewal.
func (c *contention) clearValue(ctx context.Context) {
	if !c.cleared {
		c.cleared = c.b.clearValue(ctx, c.schema, c.mutex, c.id)
	}
}

// valueColumn returns the value and token columns of dialect d for the mutex table q
// beside value table v (quoted); "" for v: no value table.
func valueColumn(d Dialect, q, v string) string {
	if v == "" {
		return noValue
	}
	expr := mysqlValue
	if _, ok := d.(postgresDialect); ok {
		expr = pgValue
	}
	return fmt.Sprintf(expr, q, v, "value", "''") + ", " + fmt.Sprintf(expr, q, v, "token", "0")
}

// keepValue writes the contention's value for its tenure (token), while the row holds that
// tenure at the version the contention last saw, unless it wrote it already; it reports
// whether the value row is the tenure's now. A row that moved on wrote nothing: its tenure
// is over, or a renewal whose answer was lost came between (a later write, at the next
// version, does it).
func (c *contention) keepValue(ctx context.Context) (bool, error) {
	if c.valued == c.token {
		return true, nil
	}
	kept, err := c.writeValue(ctx, c.token, c.value, c.version)
	if kept {
		c.valued = c.token
	}
	return kept, err
}

// writeValue writes value with token into the value row, while the row holds this
// contender's tenure at version; it reports whether it did.
func (c *contention) writeValue(ctx context.Context, token uint64, value string, version uint64) (bool, error) {
	var kept bool
	err := c.run(ctx, false, func(q querier) error {
		query, args := c.b.dialect.bound(c.schema, limit(ctx), c.b.sql.keepValue, token, value, c.mutex, c.id, version)
		res, err := q.ExecContext(ctx, query, args...)
		if err == nil {
			kept, err = wrote(c.b.dialect, res)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write the owner value: %w", err)
	}
	return kept, nil
}

// wrote reports whether a write of a side table took place: on MySQL its LAST_INSERT_ID
// says 1 (the statement sets it where it writes: rows affected count only the rows that
// changed, or, with clientFoundRows, those found), elsewhere one row was affected.
func wrote(d Dialect, res sql.Result) (bool, error) {
	if _, ok := d.(mysqlDialect); ok {
		id, err := res.LastInsertId()
		return id == 1, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
