package jdbc

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Slots: see "Slots" in the package documentation for the table.

var (
	//go:embed slots_mysql.sql
	mysqlSlotDDL string
	//go:embed slots_postgres.sql
	postgresSlotDDL string
)

// slotTable keeps, per mutex, the last slot a Scheduler started.
var slotTable = sideTable{suffix: "_slot", what: "slot", columns: "mutex, at, token",
	mysql: mysqlSlotDDL, pgsql: postgresSlotDDL}

// SlotDDL returns the statement that creates the slot table, beside the mutex table, if it
// is missing (CREATE TABLE IF NOT EXISTS), for migrations run by other tools. Options as
// for New: WithTable and WithDialect matter.
func SlotDDL(opts ...Option) (string, error) { return sideDDL(slotTable, opts) }

// The slot statements; %[1]s stands for the mutex table (unused), %[2]s for the slot table.
const (
	// mysqlLastSlot reads a mutex's slot. Arguments: mutex.
	mysqlLastSlot = "SELECT at, token FROM %[2]s WHERE mutex = ?"

	// mysqlClaimSlot records a slot unless the recorded one is as late or has a larger
	// token: the first claim inserts the row, a later one updates it. LAST_INSERT_ID
	// answers 1 when it did (set by the insert's values, then by the update's condition,
	// which the token's assignment reads back whether the server assigns left to right
	// or simultaneously). Arguments: mutex, at, token.
	mysqlClaimSlot = "INSERT INTO %[2]s (mutex, at, token) VALUES (?, ?, LAST_INSERT_ID(1) * ?) ON DUPLICATE KEY UPDATE " +
		"at = IF(LAST_INSERT_ID(VALUES(at) > at AND VALUES(token) >= token), VALUES(at), at), " +
		"token = IF(LAST_INSERT_ID() = 1, VALUES(token), token)"

	// pgLastSlot is mysqlLastSlot. Arguments: limit, mutex.
	pgLastSlot = "SELECT at, token FROM %[2]s WHERE " + pgBound + " AND mutex = $2"

	// pgClaimSlot is mysqlClaimSlot: one row affected when it recorded the slot.
	// Arguments: limit, mutex, at, token.
	pgClaimSlot = "INSERT INTO %[2]s AS s (mutex, at, token) SELECT $2::text, $3::bigint, $4::bigint WHERE " + pgBound +
		" ON CONFLICT (mutex) DO UPDATE SET at = EXCLUDED.at, token = EXCLUDED.token " +
		"WHERE s.at < EXCLUDED.at AND s.token <= EXCLUDED.token"
)

// sideStatement renders a statement of side table v (quoted) beside mutex table q; "" when
// there is no room for v.
func sideStatement(stmt, q, v string) string {
	if v == "" {
		return ""
	}
	return fmt.Sprintf(stmt, q, v)
}

// slotContention is the contention of a backend whose slot table Start found: it records
// a Scheduler's slots (backend.SlotRecorder).
type slotContention struct{ *contention }

var _ backend.SlotRecorder = slotContention{}

// LastSlot reads the slot recorded for the mutex; the zero Slot when none is.
func (c slotContention) LastSlot(ctx context.Context) (backend.Slot, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Slot{}, err
	}
	var at int64
	var token uint64
	query, args := c.b.dialect.bound(c.schema, limit(ctx), c.b.sql.lastSlot, c.mutex)
	err := c.b.db.QueryRowContext(ctx, query, args...).Scan(&at, &token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return backend.Slot{}, nil
	case err != nil:
		return backend.Slot{}, c.b.refused(fmt.Errorf("simba/jdbc: read the last slot: %w", err))
	}
	return backend.Slot{At: backend.SlotAt(at), Token: token}, nil
}

// ClaimSlot records s in one statement, unless the recorded slot is as late or has a
// larger token; it reports whether it did. See backend.SlotRecorder.
func (c slotContention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	if err := c.b.usable(ctx); err != nil {
		return false, err
	}
	at, ok := s.Nanos()
	if !ok || s.At.IsZero() {
		return false, simba.InvalidArgument("slot instant", s.At, backend.SlotRange)
	}
	if s.Token > math.MaxInt64 {
		return false, simba.InvalidArgument("slot token", s.Token, "must fit a bigint")
	}
	query, args := c.b.dialect.bound(c.schema, limit(ctx), c.b.sql.claimSlot, c.mutex, at, s.Token)
	res, err := c.b.db.ExecContext(ctx, query, args...)
	var claimed bool
	if err == nil {
		claimed, err = wrote(c.b.dialect, res)
	}
	if err != nil {
		return false, c.b.refused(fmt.Errorf("simba/jdbc: claim a slot: %w", err))
	}
	return claimed, nil
}
