package jdbc

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Semaphores and read-write locks: see "Semaphores and read-write locks" in the package
// documentation for the table and the rules of admission.

var (
	//go:embed holds_mysql.sql
	mysqlHoldDDL string
	//go:embed holds_postgres.sql
	postgresHoldDDL string
)

var _ backend.Holder = (*Backend)(nil)

// Holds reports that the backend keeps mutexes, semaphores and read-write locks; see
// backend.Holder.
func (b *Backend) Holds(k backend.Kind) bool {
	return k == backend.Mutex || k == backend.Semaphore || k == backend.RWLock
}

// holdSuffix makes the hold table's name from the mutex table's: simba_mutex_hold.
const holdSuffix = "_hold"

// The hold table's name and holder columns, as its DDL creates them.
var (
	holdNameColumn   = column{name: "name", max: 66, typ: "varchar(66)"}
	holdHolderColumn = column{name: "holder", max: 128, typ: "varchar(128)"}
)

// patience is how long past the first hold's end a waiter may stay silent before it is
// taken for gone and dropped: it asks again within a jitter of that end, or after a
// failed call within its TTL and a quarter, both within its lease and a second.
func patience(lease time.Duration) int64 { return (2*lease + 2*time.Second).Milliseconds() }

// HoldDDL returns the statement that creates the hold table, beside the mutex table, if it
// is missing (CREATE TABLE IF NOT EXISTS), for migrations run by other tools. Options as
// for New: WithTable and WithDialect matter.
func HoldDDL(opts ...Option) (string, error) {
	cfg, t, err := newConfig(opts)
	if err != nil {
		return "", err
	}
	sql, err := holdSQL(cfg.dialect, t)
	if err != nil {
		return "", err
	}
	return sql.ddl, nil
}

// holdStatements is the SQL of the hold table of one dialect. Each statement's arguments
// are listed beside it.
type holdStatements struct {
	table  tableName
	server schema         // what bounds statements on the server (Dialect.bound)
	tx     *sql.TxOptions // the decision's transaction
	ddl    string
	check  string // the server's version; fails if the table or a column is missing
	lock   string // locks the name's row, bounded on the server (Dialect.bound): kind, name
	ensure string // creates the name's row if missing: kind, name, permits
	read   string // every row of the name, each with the database's now: kind, name
	prune  string // drops the name's holders and waiters ended by now: kind, name, now
	insert string // kind, name, holder, shared, place, token, acquired_at, ttl_at, expires_at
	update string // shared, place, token, acquired_at, ttl_at, expires_at, kind, name, holder
	head   string // permits, place, kind, name
	remove string // kind, name, holder

	// The cross-process wake (holds_wake.go).
	session    string // the session's ID
	park       string // follows a mark: waits, answering 0 unless interrupted: [the park lock's name,] seconds
	parkLocked bool   // park waits for the backend's park lock (parkLock), not in a sleep
	parked     string // counts the session's running statements that begin with a mark: session, wakeMarkLen, mark
	findParked string // the running statements that begin with marks (%s: their placeholders), their IDs for killParked: wakeMarkLen, marks...
	killParked string // ends the statement of findParked's ID %d; empty: findParked ends them itself
}

// holdSQL renders the hold table's statements for mutex table t in dialect d.
func holdSQL(d Dialect, t tableName) (holdStatements, error) {
	h := tableName{schema: t.schema, name: t.name + holdSuffix}
	if most := d.maxIdentifier(); len(h.name) > most {
		return holdStatements{}, simba.InvalidArgument("table", t.String(),
			fmt.Sprintf("leaves no room for the hold table %s: at most %d characters", h.name, most-len(holdSuffix)))
	}
	const columns = "kind, name, holder, shared, permits, place, token, acquired_at, ttl_at, expires_at"
	s := holdStatements{
		table:  h,
		check:  "SELECT VERSION(), (SELECT COUNT(*) FROM (SELECT " + columns + " FROM %[1]s WHERE 1 = 0) AS none)",
		lock:   "SELECT 1 FROM %[1]s WHERE %[3]skind = ? AND name = ? AND holder = '' FOR UPDATE",
		read:   "SELECT holder, shared, permits, place, token, acquired_at, ttl_at, expires_at, %[2]s FROM %[1]s WHERE kind = ? AND name = ? ORDER BY place",
		prune:  "DELETE FROM %[1]s WHERE kind = ? AND name = ? AND holder <> '' AND expires_at <= ?",
		insert: "INSERT INTO %[1]s (kind, name, holder, shared, permits, place, token, acquired_at, ttl_at, expires_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
		update: "UPDATE %[1]s SET shared = ?, place = ?, token = ?, acquired_at = ?, ttl_at = ?, expires_at = ? WHERE kind = ? AND name = ? AND holder = ?",
		head:   "UPDATE %[1]s SET permits = ?, place = ? WHERE kind = ? AND name = ? AND holder = ''",
		remove: "DELETE FROM %[1]s WHERE kind = ? AND name = ? AND holder = ?",
	}
	const ensure = "INSERT INTO %[1]s (kind, name, holder, shared, permits, place, token, acquired_at, ttl_at, expires_at) VALUES (?, ?, '', FALSE, ?, 0, 0, 0, 0, 0) "
	var quoted, now, bound string
	numbered := func(q string) string { return q }
	switch d := d.(type) {
	case mysqlDialect:
		quoted, now = d.quote(h), mysqlNow
		s.ddl = strings.Replace(mysqlHoldDDL, "`simba_mutex_hold`", quoted, 1)
		s.ensure = ensure + "ON DUPLICATE KEY UPDATE place = place"
		// A wait for the backend's park lock, not SLEEP: see Hand-over of holds in doc.go.
		s.session, s.park, s.parkLocked = "SELECT CONNECTION_ID()", " GET_LOCK(?, ?)", true
		s.parked = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND LEFT(INFO, ?) = ?"
		// MySQL's: KILL QUERY names a session, which may run another statement by then;
		// holdStatements gives MariaDB's, which names the statement.
		s.findParked = "SELECT ID FROM information_schema.PROCESSLIST WHERE LEFT(INFO, ?) IN (%s)"
		s.killParked = mysqlInterrupt
	case postgresDialect:
		quoted, now = d.quote(h), pgNow
		s.ddl = strings.Replace(postgresHoldDDL, `"simba_mutex_hold"`, quoted, 1)
		s.ensure = ensure + "ON CONFLICT DO NOTHING"
		s.session, s.park = "SELECT pg_backend_pid()", " 0 FROM pg_sleep($1)"
		s.parked = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND left(query, $2) = $3"
		// pg_cancel_backend signals a session at once, in the statement that found it
		// running the marked statement; only sessions it may signal are tried (another
		// role's would fail the statement).
		s.findParked = "SELECT COUNT(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE state = 'active' AND " +
			"pg_has_role(usesysid, 'MEMBER') AND left(query, ?) IN (%s)"
		// The limit is the lock's $1; set for the transaction, it bounds its statements.
		bound = pgBound + " AND "
		numbered = dollars
		// Read committed whatever the server's default: the read after the lock sees every
		// decision committed before it, where a snapshot taken at the lock statement's
		// start (repeatable read) would end it in serialization failures instead. (MySQL's
		// repeatable read takes its snapshot at the first plain read, after the lock.)
		s.tx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	default:
		return holdStatements{}, simba.InvalidArgument("dialect", d.String(), "keeps no semaphores or read-write locks")
	}
	for _, q := range []*string{&s.check, &s.lock, &s.ensure, &s.read, &s.prune, &s.insert, &s.update, &s.head, &s.remove} {
		*q = numbered(fmt.Sprintf(*q, quoted, now, bound))
	}
	return s, nil
}

// dollars numbers a statement's ? placeholders as PostgreSQL's $1, $2, ..., or from $2
// on in one that has $1 already (pgBound's).
func dollars(q string) string {
	var out strings.Builder
	n := 0
	if strings.Contains(q, "$1") {
		n = 1
	}
	for _, r := range q {
		if r == '?' {
			n++
			out.WriteString("$" + strconv.Itoa(n))
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

// holdStatements returns the hold table's statements, checking on the first call that
// succeeds that the table has every column: a missing table is refused.
func (b *Backend) holdStatements(ctx context.Context) (holdStatements, error) {
	b.mu.Lock()
	s := b.holdSQL
	b.mu.Unlock()
	if s != nil {
		return *s, nil
	}
	checked, err := holdSQL(b.dialect, b.table)
	if err != nil {
		return holdStatements{}, err
	}
	var version string
	var none int
	if err := b.db.QueryRowContext(ctx, checked.check).Scan(&version, &none); err != nil {
		err = fmt.Errorf("simba/jdbc: check table %s: %w", checked.table, err)
		if fix, ok := refusalFix(err, checked.table.String()); ok && fix == fixTable {
			return holdStatements{}, &refusal{err: err,
				fix: "create it with CreateTable, beside the mutex table, or run " + oneLine(checked.ddl)}
		}
		return holdStatements{}, refused(err, checked.table.String())
	}
	checked.server = schema{mariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	if checked.server.mariaDB {
		// MariaDB's statement IDs are never reused, so a release ends the parked statement
		// it found and nothing else.
		checked.findParked = "SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE LEFT(INFO, ?) IN (%s)"
		checked.killParked = "KILL QUERY ID %d"
	}
	b.mu.Lock()
	b.holdSQL = &checked
	b.mu.Unlock()
	return checked, nil
}

// startHold returns a semaphore's or read-write lock's contention for p.
func (b *Backend) startHold(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	s, err := b.holdStatements(ctx)
	if err != nil {
		return nil, err
	}
	if err := fits(holdNameColumn, p.Hold.Kind.String()+" name", p.Mutex, s.table); err != nil {
		return nil, err
	}
	if err := fits(holdHolderColumn, "contender ID", p.ContenderID, s.table); err != nil {
		return nil, err
	}
	if p.Hold.Permits > math.MaxInt32 {
		return nil, simba.InvalidArgument("permits", p.Hold.Permits, fmt.Sprintf("must be at most %d in %s", math.MaxInt32, s.table))
	}
	c := &holdContention{
		b: b, sql: s, kind: int64(p.Hold.Kind), name: p.Mutex, id: p.ContenderID, hold: p.Hold,
		ttl: p.TTL.Milliseconds(), lease: (p.TTL + p.Transition).Milliseconds(),
		patience: patience(p.TTL + p.Transition), wake: p.Wake, closed: p.Closed, log: p.Logger,
		mark: wakeMark(s.table, int64(p.Hold.Kind), p.Mutex, p.ContenderID),
	}
	c.parkSQL = c.mark + s.park
	if c.log == nil {
		c.log = discardLogger
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.contentions == nil {
		return nil, fmt.Errorf("simba/jdbc: %w", simba.ErrClosed)
	}
	if b.holds == nil {
		b.holds = make(map[*holdContention]struct{})
	}
	b.holds[c] = struct{}{}
	return c, nil
}

// holdContention is one participant's contention for a semaphore or a read-write lock.
// Its methods are called one at a time (simba's guarantee).
type holdContention struct {
	b                    *Backend
	sql                  holdStatements
	kind                 int64
	name, id             string
	hold                 backend.Hold
	ttl, lease, patience int64 // ms
	wake, closed         func()
	log                  *slog.Logger
	asked                bool    // an Acquire was answered: a hold found under its ID is its own
	db                   dbClock // the database's clock as the last decision read it
	mark, parkSQL        string  // the cross-process wake's (holds_wake.go)
	parking              holdPark
}

var _ backend.LeaseContention = (*holdContention)(nil)

// holdRow is a row of the hold table, with the database's now as the read told it.
type holdRow struct {
	holder                            string
	shared                            bool
	permits                           int
	place, token                      int64
	acquiredAt, ttlAt, expiresAt, now int64
	stored                            bool // the row is in the table (else it is to be inserted)
}

// record is the hold's owner record: durations from the database's now, shortened by
// the clock's resolution, as a mutex row's.
func (r holdRow) record() backend.Record {
	rec := row{owner: r.holder, acquiredAt: uint64(r.acquiredAt), ttlAt: uint64(r.ttlAt),
		transitionAt: uint64(r.expiresAt), now: uint64(r.now)}.record()
	if rec.Owner != "" {
		rec.Token = uint64(r.token)
	}
	return rec
}

// Acquire admits or renews the contender's hold, or queues it, in one transaction that
// holds the name's row lock; see backend.Hold for the answer.
func (c *holdContention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	// Only a decision that was answered makes the contention's next calls renew what it
	// finds under its ID: after a call that failed, a hold found there may still be an
	// earlier contention's (its release lost), which must not pass on its token.
	fresh := !c.asked
	for created := false; ; created = true {
		var rec backend.Record
		var queued bool
		found, err := c.inTx(ctx, func(tx *sql.Tx) (bool, error) {
			var one int
			lock, args := c.b.dialect.bound(c.sql.server, limit(ctx), c.sql.lock, c.kind, c.name)
			switch err := tx.QueryRowContext(ctx, lock, args...).Scan(&one); {
			case errors.Is(err, sql.ErrNoRows):
				return false, nil
			case err != nil:
				return false, err
			}
			var err error
			rec, queued, err = c.decide(ctx, tx, fresh)
			return true, err
		})
		switch {
		case err != nil:
			return backend.Record{}, refused(fmt.Errorf("simba/jdbc: acquire %v %q: %w", c.hold.Kind, c.name, err), c.sql.table.String())
		case found && queued:
			c.asked = true
			c.park()
			return rec, nil
		case found:
			c.asked = true
			c.unpark(false) // it holds, or holds no more after a clock step: nothing to wait for
			return rec, nil
		case created:
			return backend.Record{}, fmt.Errorf("simba/jdbc: acquire %v %q: its row is missing right after it was created", c.hold.Kind, c.name)
		}
		// The name's row is created outside the transaction that locks it: two deciders
		// creating it inside theirs would deadlock on the gap they both lock (MySQL).
		if _, err := c.b.db.ExecContext(ctx, c.sql.ensure, c.kind, c.name, c.hold.Permits); err != nil {
			return backend.Record{}, refused(fmt.Errorf("simba/jdbc: create the row of %v %q: %w", c.hold.Kind, c.name, err), c.sql.table.String())
		}
	}
}

// inTx runs f in a transaction, committed when f reports true without an error, and
// rolled back otherwise.
func (c *holdContention) inTx(ctx context.Context, f func(tx *sql.Tx) (bool, error)) (bool, error) {
	tx, err := c.b.db.BeginTx(ctx, c.sql.tx)
	if err != nil {
		return false, err
	}
	ok, err := f(tx)
	if err != nil || !ok {
		return ok, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return true, tx.Commit()
}

// ignoreDone drops the error of a rollback whose transaction the driver already ended
// (its context ended).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// decide reads the name's rows, with its row locked in tx, drops the holds and waiters
// that have ended, and admits, renews or queues the contender; for a queued one it
// reports true for a queued one.
func (c *holdContention) decide(ctx context.Context, tx *sql.Tx, fresh bool) (backend.Record, bool, error) {
	sent := time.Now()
	head, rows, err := c.readRows(ctx, tx)
	if err != nil {
		return backend.Record{}, false, err
	}
	stepped := c.db.check(c.b, c.log, sent, time.Now(), uint64(head.now)) > 0
	now := head.now
	live := slices.DeleteFunc(slices.Clone(rows), func(r holdRow) bool { return r.expiresAt <= now })
	if len(live) < len(rows) {
		if _, err := tx.ExecContext(ctx, c.sql.prune, c.kind, c.name, now); err != nil {
			return backend.Record{}, false, err
		}
	}
	headChanged := false
	if c.hold.Kind == backend.Semaphore && head.permits != c.hold.Permits {
		if len(live) > 0 {
			return backend.Record{}, false, fmt.Errorf("semaphore %q has %d permits, not %d: %w",
				c.name, head.permits, c.hold.Permits, simba.ErrRefused)
		}
		head.permits, headChanged = c.hold.Permits, true // nobody holds or waits: a new count
	}
	var holders, waiters []holdRow
	for _, r := range live {
		if r.token > 0 {
			holders = append(holders, r)
		} else {
			waiters = append(waiters, r)
		}
	}
	newToken := func() int64 {
		head.place++
		headChanged = true
		return head.place
	}
	var own holdRow
	if i := slices.IndexFunc(holders, func(r holdRow) bool { return r.holder == c.id }); i >= 0 {
		own = holders[i]
		if stepped && !fresh {
			// The database's clock stepped forward since the last answer: the hold on the
			// store has been shorter than the holder believes, by the step. It gives the
			// hold up at once, as a mutex's owner does (see When the database's clock
			// steps); its next acquisition begins a new hold.
			_, err := tx.ExecContext(ctx, c.sql.remove, c.kind, c.name, c.id)
			return backend.Record{}, false, err
		}
		if fresh {
			// A new contention that finds its ID holding (an earlier one's release was
			// lost): a new hold begins, with a new token, as the earlier one has ended.
			own.token, own.acquiredAt = newToken(), now
		}
	} else {
		i := slices.IndexFunc(waiters, func(r holdRow) bool { return r.holder == c.id })
		if i < 0 {
			waiters = append(waiters, holdRow{holder: c.id, place: newToken()}) // its place is the last
			i = len(waiters) - 1
		}
		waiters[i].shared = c.hold.Shared
		own = waiters[i]
		if !c.admits(holders, waiters, i) {
			own.expiresAt = now + c.patience
			first := soonest(holders)
			if first != nil {
				own.expiresAt = max(now, first.expiresAt) + c.patience
			}
			if err := c.write(ctx, tx, own, head, headChanged); err != nil {
				return backend.Record{}, false, err
			}
			if first == nil {
				return backend.Record{}, true, nil
			}
			first.now = now
			return first.record(), true, nil
		}
		own.token, own.acquiredAt = newToken(), now
	}
	own.ttlAt, own.expiresAt, own.now = now+c.ttl, now+c.lease, now
	if err := c.write(ctx, tx, own, head, headChanged); err != nil {
		return backend.Record{}, false, err
	}
	return own.record(), false, nil
}

// readRows reads the name's row (head, with the database's now) and its holders' and
// waiters' rows, in the order of their places.
func (c *holdContention) readRows(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) (head holdRow, rows []holdRow, err error) {
	rs, err := q.QueryContext(ctx, c.sql.read, c.kind, c.name)
	if err != nil {
		return holdRow{}, nil, err
	}
	defer func() { err = errors.Join(err, rs.Close()) }()
	found := false
	for rs.Next() {
		r := holdRow{stored: true}
		if err := rs.Scan(&r.holder, &r.shared, &r.permits, &r.place, &r.token, &r.acquiredAt, &r.ttlAt, &r.expiresAt, &r.now); err != nil {
			return holdRow{}, nil, err
		}
		if r.holder == "" {
			head, found = r, true
		} else {
			rows = append(rows, r)
		}
	}
	if err := rs.Err(); err != nil {
		return holdRow{}, nil, err
	}
	if !found {
		// Only a Lookup reads without the row locked: a name never acquired.
		return holdRow{}, nil, errNoRow
	}
	return head, rows, nil
}

// admits reports whether the waiter at index i is admitted beside the holders: it fits
// there together with every waiter ahead of it, or it is a downgrade's read hold beside
// its own write hold.
func (c *holdContention) admits(holders, waiters []holdRow, i int) bool {
	if c.hold.Shared && c.hold.Beside != "" && len(holders) == 1 &&
		holders[0].holder == c.hold.Beside && !holders[0].shared {
		return true
	}
	return fitsBeside(c.hold.Kind, c.hold.Permits, holders, waiters[:i+1])
}

// fitsBeside reports whether the last of ahead, the waiters of a name of kind from the first on,
// fits beside holders together with every waiter ahead of it.
func fitsBeside(kind backend.Kind, permits int, holders, ahead []holdRow) bool {
	if kind == backend.Semaphore {
		return len(holders)+len(ahead) <= permits
	}
	// Read holds fit beside read holds; a write hold fits alone. A read hold (a
	// downgrade's) that entered after a writer queued keeps that writer out too.
	for _, h := range holders {
		if !h.shared {
			return false
		}
	}
	for _, w := range ahead {
		if !w.shared && (len(holders) > 0 || len(ahead) > 1) {
			return false
		}
	}
	return true
}

// soonest returns the holder whose hold ends first, or nil.
func soonest(holders []holdRow) *holdRow {
	var first *holdRow
	for i := range holders {
		if first == nil || holders[i].expiresAt < first.expiresAt {
			first = &holders[i]
		}
	}
	return first
}

// write stores the contender's row, and the name's row when it changed.
func (c *holdContention) write(ctx context.Context, tx *sql.Tx, own, head holdRow, headChanged bool) error {
	var err error
	if own.stored {
		_, err = tx.ExecContext(ctx, c.sql.update, own.shared, own.place, own.token, own.acquiredAt, own.ttlAt, own.expiresAt,
			c.kind, c.name, c.id)
	} else {
		_, err = tx.ExecContext(ctx, c.sql.insert, c.kind, c.name, c.id, own.shared, own.place, own.token,
			own.acquiredAt, own.ttlAt, own.expiresAt)
	}
	if err != nil || !headChanged {
		return err
	}
	_, err = tx.ExecContext(ctx, c.sql.head, head.permits, head.place, c.kind, c.name)
	return err
}

// Release gives the contender's hold up, or takes it off the waiters, and asks this
// backend's other contentions of the name to try now, and the waiters of other processes
// that fit now (wakeOthers).
func (c *holdContention) Release(ctx context.Context) error {
	if err := c.b.usable(ctx); err != nil {
		return err
	}
	c.unpark(false)
	res, err := c.b.db.ExecContext(ctx, c.sql.remove, c.kind, c.name, c.id)
	if err != nil {
		return refused(fmt.Errorf("simba/jdbc: release %v %q: %w", c.hold.Kind, c.name, err), c.sql.table.String())
	}
	c.b.wakeHolds(c)
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		c.wakeLater()
	}
	return nil
}

// Lookup reads the hold that ends first; see backend.LeaseContention.
func (c *holdContention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	head, rows, err := c.readRows(ctx, c.b.db)
	switch {
	case errors.Is(err, errNoRow):
		return backend.Record{}, nil
	case err != nil:
		return backend.Record{}, refused(fmt.Errorf("simba/jdbc: look up %v %q: %w", c.hold.Kind, c.name, err), c.sql.table.String())
	}
	holders := slices.DeleteFunc(rows, func(r holdRow) bool { return r.token == 0 || r.expiresAt <= head.now })
	first := soonest(holders)
	if first == nil {
		return backend.Record{}, nil
	}
	first.now = head.now
	return first.record(), nil
}

// StopContend forgets the contention and ends its parking, waiting for it as long as ctx
// lasts (Close waits for the rest); its row is left to Release.
func (c *holdContention) StopContend(ctx context.Context) error {
	b := c.b
	b.mu.Lock()
	delete(b.holds, c)
	closing := b.holds == nil
	if !closing {
		b.background.Add(1)
	}
	b.mu.Unlock()
	if closing {
		return nil // Close ends the parking and waits for it
	}
	// The parked statement ends within interruptFor, or its connection is closed, even
	// on a server that answers nothing: longer than a short deadline.
	ended := make(chan struct{})
	go func() {
		defer b.background.Done()
		c.endParking()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return nil
}

// wakeHolds asks the backend's other contentions of c's name to try now, after c left.
func (b *Backend) wakeHolds(c *holdContention) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for o := range b.holds {
		if o != c && o.kind == c.kind && o.name == c.name && o.wake != nil {
			o.wake()
		}
	}
}
