package jdbc

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Hand-offs: see "Hand-offs" in the package documentation for the wait table and the
// hand-off's transaction.

var (
	//go:embed waits_mysql.sql
	mysqlWaitDDL string
	//go:embed waits_postgres.sql
	postgresWaitDDL string
)

// waitTable keeps the contenders of services waiting for a mutex.
var waitTable = sideTable{suffix: "_wait", what: "wait", columns: "mutex, contender, value, place, ttl, lease, expires_at",
	mysql: mysqlWaitDDL, pgsql: postgresWaitDDL}

// WaitDDL returns the statement that creates the wait table, beside the mutex table, if it
// is missing (CREATE TABLE IF NOT EXISTS), for migrations run by other tools. Options as
// for New: WithTable and WithDialect matter.
func WaitDDL(opts ...Option) (string, error) { return sideDDL(waitTable, opts) }

// The wait table's statements, in either dialect: ? are arguments (numbered $2, $3, ...
// on PostgreSQL, after pgBound's $1; ?t and ?i of type text and bigint there), {now} the
// database's clock, {bound} pgBound's
// condition on PostgreSQL; %[1]s the mutex table, %[2]d, %[3]d and %[4]d the ttl, ttl +
// transition and parity of a hand-off's receiver, %[5]s the wait table. The hand-off's
// other clock expressions ({end}, {writeStart}, {writeShift}) are the acquire statement's.
const (
	// waitRegister queues a contender, or keeps it queued, until the end of its patience:
	// a new one, or one whose row outlived its patience, at the end. Arguments: mutex,
	// contender, value, ttl, lease, patience (ms), mutex.
	mysqlWaitRegister = "INSERT INTO %[5]s (mutex, contender, value, place, ttl, lease, expires_at) " + waitRegisterRow +
		"ON DUPLICATE KEY UPDATE place = IF(expires_at < {now}, VALUES(place), place), value = VALUES(value), " +
		"ttl = VALUES(ttl), lease = VALUES(lease), expires_at = VALUES(expires_at)"
	pgWaitRegister = "INSERT INTO %[5]s AS w (mutex, contender, value, place, ttl, lease, expires_at) " + waitRegisterRow +
		"ON CONFLICT (mutex, contender) DO UPDATE SET place = CASE WHEN w.expires_at < {now} THEN EXCLUDED.place " +
		"ELSE w.place END, value = EXCLUDED.value, ttl = EXCLUDED.ttl, lease = EXCLUDED.lease, expires_at = EXCLUDED.expires_at"
	waitRegisterRow = "SELECT ?t, ?t, ?t, COALESCE(MAX(place), 0) + 1, ?i, ?i, {now} + ?i FROM %[5]s WHERE {bound}mutex = ? "

	// waitRemove takes a contender off the queue. Arguments: mutex, contender.
	waitRemove = "DELETE FROM %[5]s WHERE {bound}mutex = ? AND contender = ?"

	// waitList lists the waiters within their patience, first come first. Arguments: mutex.
	waitList = "SELECT contender, value FROM %[5]s WHERE {bound}mutex = ? AND expires_at > {now} ORDER BY place, contender"

	// handOffOwner locks the mutex's row for the hand-off and tells whether the caller owns
	// it at the version it knows, with its transition window not ended, and the row's
	// version. Arguments: contender, version, mutex.
	handOffOwner = "SELECT owner_id = ? AND version = ? AND {end} >= {now}, version FROM %[1]s WHERE {bound}mutex = ? FOR UPDATE"

	// handOffWaiter locks the receiver's row in the queue, within its patience, and reads
	// its value, ttl and lease. Arguments: mutex, contender.
	handOffWaiter = "SELECT value, ttl, lease FROM %[5]s WHERE {bound}mutex = ? AND contender = ? AND expires_at > {now} FOR UPDATE"

	// handOffGive makes the receiver the owner with a new tenure, written as its
	// acquisition would write it (a new tenure's even renewal mark). Arguments: version,
	// receiver, mutex, version found.
	handOffGive = "UPDATE %[1]s SET version = ?, acquired_at = {writeStart}, " +
		"ttl_at = {now} + %[2]d + {writeShift} - %[4]d, transition_at = {now} + %[3]d + {writeShift}, owner_id = ? " +
		"WHERE {bound}mutex = ? AND version = ?"
)

// yieldTurns bounds the whiles (deferral, at least) a giver leaves a free row to the
// waiters before it (yieldToEarlier): more than deferTo's, since a waiter woken on a
// loaded machine may take longer than a few of them to take the row.
const yieldTurns = 20

// waitStatements are the wait table's statements for one backend, rendered for its
// dialect and session; empty where it has no wait table.
type waitStatements struct {
	register, remove, list, owner, waiter string
	give                                  func(ttl, lease time.Duration) string
	tx                                    *sql.TxOptions
}

// waitSQL renders the wait table's statements of dialect d beside mutex table t for a
// session like s's.
func waitSQL(d Dialect, t tableName, s schema) waitStatements {
	_, w, err := waitTable.name(d, t)
	if err != nil {
		return waitStatements{}
	}
	q := quoteTable(d, t)
	var clock *strings.Replacer
	var ws waitStatements
	numbered := func(q string) string { return q }
	switch d.(type) {
	case mysqlDialect:
		c := mysqlPlainClock
		if s.folds {
			c = mysqlFoldingClock
		}
		clock = strings.NewReplacer("{now}", mysqlNow, "{bound}", "", "?t", "?", "?i", "?", "{end}", c.Replace("{end}"),
			"{writeStart}", c.Replace("{writeStart}"), "{writeShift}", c.Replace("{writeShift}"))
		ws.register = mysqlWaitRegister
	case postgresDialect:
		clock = strings.NewReplacer("{now}", pgNow, "{bound}", pgBound+" AND ", "?t", "?::text", "?i", "?::bigint",
			"{end}", "transition_at", "{writeStart}", pgNow, "{writeShift}", "0")
		ws.register = pgWaitRegister
		ws.tx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		numbered = dollars
	default:
		return waitStatements{}
	}
	render := func(stmt string, ttl, lease time.Duration) string {
		return fmt.Sprintf(numbered(clock.Replace(stmt)), q, ttl.Milliseconds(), lease.Milliseconds(), parity(ttl, lease), w)
	}
	ws.register = render(ws.register, 0, 0)
	ws.remove = render(waitRemove, 0, 0)
	ws.list = render(waitList, 0, 0)
	ws.owner = render(handOffOwner, 0, 0)
	ws.waiter = render(handOffWaiter, 0, 0)
	ws.give = func(ttl, lease time.Duration) string { return render(handOffGive, ttl, lease) }
	return ws
}

// handOffContention is the contention of a service's contender on a backend whose wait
// table Start found: it lists the contenders waiting and hands the mutex to one
// (backend.HandOffer).
type handOffContention struct{ *contention }

// slotHandOffContention is a handOffContention that records slots too (slotContention).
type slotHandOffContention struct{ *contention }

var (
	_ backend.HandOffer    = handOffContention{}
	_ backend.HandOffer    = slotHandOffContention{}
	_ backend.SlotRecorder = slotHandOffContention{}
)

func (c slotHandOffContention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	return handOffContention(c).Waiters(ctx)
}

func (c slotHandOffContention) HandOff(ctx context.Context, to string) error {
	return handOffContention(c).HandOff(ctx, to)
}

func (c slotHandOffContention) LastSlot(ctx context.Context) (backend.Slot, error) {
	return slotContention(c).LastSlot(ctx)
}

func (c slotHandOffContention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	return slotContention(c).ClaimSlot(ctx, s)
}

// wrap returns c as the contention the backend's side tables make it: a recorder of slots
// with the slot table, a giver of hand-offs with the wait table (for a service's
// contender: a Locker's neither waits in the table nor hands off).
func (c *contention) wrap(s schema, waitsOnly bool) backend.Contention {
	handOffs := s.waits && c.id != "" && !waitsOnly
	switch {
	case s.slots && handOffs:
		return slotHandOffContention{c}
	case s.slots:
		return slotContention{c}
	case handOffs:
		return handOffContention{c}
	}
	return c
}

// Waiters lists the services' contenders waiting for the mutex, first come first, with
// the value each would keep. See backend.HandOffer.
func (c handOffContention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	if err := c.b.usable(ctx); err != nil {
		return nil, err
	}
	out, err := c.waiters(ctx, 0)
	if err != nil {
		return nil, c.b.refused(fmt.Errorf("simba/jdbc: list the waiters: %w", err))
	}
	return out, nil
}

// waiters lists the contenders in the wait table within their patience, first come
// first, up to n of them (0: all).
func (c *contention) waiters(ctx context.Context, n int) ([]backend.Waiter, error) {
	query, args := c.b.dialect.bound(c.schema, limit(ctx), c.waits.list, c.mutex)
	rows, err := c.b.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []backend.Waiter
	for (n == 0 || len(out) < n) && rows.Next() {
		var w backend.Waiter
		if err := rows.Scan(&w.ID, &w.Value); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// yieldToEarlier, in an acquisition of a contention that handed the mutex off and so
// queued behind those waiting (behind), leaves a free row to the first waiter of the wait
// table while that is not this contender. The named lock's queue need not keep the wait
// table's order: the waiter that the hand-off's release woke finds the receiver owning
// without the lock, passes it on and queues for it again, perhaps behind the giver, whose
// turn then comes first when the receiver releases. So the giver lets the lock go, which
// wakes the next waiter for it to take the row, and waits for it again, a while at a time
// as deferTo does, as long as the lock stays with another session; a row another took
// ends the acquisition (done, with its record). It yields no more once nobody waits
// before it (behind ends), when the lock comes back to it (nobody else waits for it: the
// waiters before it poll), after yieldTurns whiles or a lease, or when ctx has less than
// two whiles left.
func (c *contention) yieldToEarlier(ctx context.Context) (_ backend.Record, done bool, _ error) {
	for began, turn := time.Now(), 0; turn < yieldTurns && time.Since(began) < c.lease; turn++ {
		first, err := c.waiters(ctx, 1)
		if err != nil {
			c.log.Debug("simba/jdbc: list the waiters", "error", err)
			return backend.Record{}, false, nil
		}
		if len(first) == 0 || first[0].ID == c.id {
			c.behind = false
			return backend.Record{}, false, nil
		}
		r, free, rec, done, err := c.readFree(ctx)
		if !free || err != nil {
			return rec, done, err
		}
		d := max(deferral, deferralTrips*r.got.Sub(r.sent))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*d {
			return backend.Record{}, false, nil
		}
		c.log.Debug("simba/jdbc: row free while a contender queued before this one's hand-off waits; leaving it the row",
			"waiter", first[0].ID, "for", d)
		if c.holdsLock() {
			c.letGo(ctx)
		}
		granted := c.queue()
		if granted == nil {
			return backend.Record{}, false, nil // no named lock to wait for: nobody to leave the row to
		}
		if err := pause(ctx, d, granted); err != nil {
			return backend.Record{}, true, err
		}
		if closed(granted) {
			return backend.Record{}, false, nil
		}
	}
	return backend.Record{}, false, nil
}

// HandOff makes to the owner with a new tenure, in one transaction with the checks that
// this contender owns the mutex at the version it knows and that to waits; the caller
// takes to's place in the queue, at its end. It then lets the named lock go, and wakes
// to when it contends in this backend. See backend.HandOffer.
func (c handOffContention) HandOff(ctx context.Context, to string) error {
	if err := c.b.usable(ctx); err != nil {
		return err
	}
	if to == "" || to == c.id {
		return fmt.Errorf("simba/jdbc: hand off to %q: %w", to, simba.ErrNotWaiting)
	}
	if c.token == 0 {
		return fmt.Errorf("simba/jdbc: hand off to %q: %w", to, simba.ErrNotOwner)
	}
	version, err := c.handOff(ctx, to)
	if err != nil {
		if errors.Is(err, simba.ErrNotOwner) || errors.Is(err, simba.ErrNotWaiting) {
			return fmt.Errorf("simba/jdbc: hand off to %q: %w", to, err)
		}
		c.doubt = true // the commit's answer may have been lost
		return c.b.refused(fmt.Errorf("simba/jdbc: hand off to %q: %w", to, err))
	}
	c.version, c.token, c.valued = version, 0, 0
	c.observe(version, version)
	c.registered, c.behind = time.Now(), true
	c.letGo(ctx)
	c.b.wakeContender(c.mutex, to)
	return nil
}

// handOff runs the hand-off's transaction and returns the version it gave the row.
func (c handOffContention) handOff(ctx context.Context, to string) (uint64, error) {
	tx, err := c.b.db.BeginTx(ctx, c.waits.tx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	d, b := c.b.dialect, c.b
	var owns bool
	var found uint64
	query, args := d.bound(c.schema, limit(ctx), c.waits.owner, c.id, c.version, c.mutex)
	switch err := tx.QueryRowContext(ctx, query, args...).Scan(&owns, &found); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, simba.ErrNotOwner
	case err != nil:
		return 0, err
	case !owns:
		return 0, simba.ErrNotOwner
	}
	var value string
	var ttl, lease int64
	query, args = d.bound(c.schema, limit(ctx), c.waits.waiter, c.mutex, to)
	switch err := tx.QueryRowContext(ctx, query, args...).Scan(&value, &ttl, &lease); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, simba.ErrNotWaiting
	case err != nil:
		return 0, err
	}
	version := max(found, b.floors.get(c.mutex)) + 1
	if version > maxVersion {
		return 0, fmt.Errorf("the row's version is %d, the largest the column holds: no larger fencing token can be handed out", found)
	}
	give := c.waits.give(time.Duration(ttl)*time.Millisecond, time.Duration(lease)*time.Millisecond)
	query, args = d.bound(c.schema, limit(ctx), give, version, to, c.mutex, found)
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return 0, err
	}
	if c.schema.values {
		query, args = d.bound(c.schema, limit(ctx), b.sql.keepValue, version, value, c.mutex, to, version)
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return 0, err
		}
	}
	query, args = d.bound(c.schema, limit(ctx), c.waits.remove, c.mutex, to)
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return 0, err
	}
	query, args = d.bound(c.schema, limit(ctx), c.waits.register, c.registerArgs()...)
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return 0, err
	}
	return version, tx.Commit()
}

// registerArgs are the arguments of waitStatements.register for this contention.
func (c *contention) registerArgs() []any {
	return []any{c.mutex, c.id, c.value, c.ttl.Milliseconds(), c.lease.Milliseconds(), patience(c.lease), c.mutex}
}

// waiting keeps the contention in the wait table while rec, its Acquire's answer, names
// another owner, and takes it off once it names this contender: a registration when it
// begins waiting and again when half its patience has passed, a removal when it owns.
// Contentions of Lockers (Participant.WaitsOnly) and backends without the wait table do
// not register. A failure is logged and tried again at the next answer: the queue is for
// hand-offs, which a waiter missing from it does not receive.
func (c *contention) waiting(ctx context.Context, rec backend.Record) {
	if c.waits.register == "" {
		return
	}
	var query string
	var args []any
	switch {
	case rec.Owner != "" && rec.Owner != c.id:
		if !c.registered.IsZero() && time.Since(c.registered) < time.Duration(patience(c.lease))*time.Millisecond/2 {
			return
		}
		query, args = c.b.dialect.bound(c.schema, limit(ctx), c.waits.register, c.registerArgs()...)
	case rec.Owner == c.id && !c.registered.IsZero():
		query, args = c.b.dialect.bound(c.schema, limit(ctx), c.waits.remove, c.mutex, c.id)
	default:
		return
	}
	if _, err := c.b.db.ExecContext(ctx, query, args...); err != nil {
		c.log.Debug("simba/jdbc: update the wait table", "error", err)
		return
	}
	if rec.Owner == c.id {
		c.registered = time.Time{}
	} else {
		c.registered = time.Now()
	}
}

// leaveQueue takes the contention off the wait table when it is on it (Release,
// StopContend).
func (c *contention) leaveQueue(ctx context.Context) {
	c.behind = false
	if c.registered.IsZero() {
		return
	}
	query, args := c.b.dialect.bound(c.schema, limit(ctx), c.waits.remove, c.mutex, c.id)
	if _, err := c.b.db.ExecContext(ctx, query, args...); err != nil {
		c.log.Debug("simba/jdbc: leave the wait table", "error", err)
		return
	}
	c.registered = time.Time{}
}

// wakeContender wakes this backend's contentions of mutex under contender ID id.
func (b *Backend) wakeContender(mutex, id string) {
	b.mu.Lock()
	var wake []func()
	for c := range b.contentions {
		if c.mutex == mutex && c.id == id && c.wake != nil {
			wake = append(wake, c.wake)
		}
	}
	b.mu.Unlock()
	for _, w := range wake {
		w()
	}
}
