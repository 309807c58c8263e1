package jdbc_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend/jdbc"
)

// steppedClock is a database clock the test can step: every statement on a pool made
// with it first sets its session's timestamp (which UTC_TIMESTAMP follows) to the real
// time plus the clock's offset, so each statement reads the clock as it is then. (Set
// once per connection, the timestamp stayed frozen through a transaction's statements: a
// loaded CI run saw it fall 57 ms behind, reported as a step back.)
type steppedClock struct {
	offset atomic.Int64 // ms
}

func (c *steppedClock) step(d time.Duration) { c.offset.Add(d.Milliseconds()) }

// pool returns a pool on the shared server whose sessions read the clock c.
func (c *steppedClock) pool(t *testing.T) *sql.DB {
	t.Helper()
	needServer(t)
	cfg, err := mysql.ParseDSN(server.DSN())
	require.NoError(t, err)
	base, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(&steppedConnector{Connector: base, clock: c})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

type steppedConnector struct {
	driver.Connector
	clock *steppedClock
}

func (s *steppedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := s.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &steppedConn{conn: conn, clock: s.clock}, nil
}

// steppedConn is a connection of the MariaDB driver whose statements run after the
// session's timestamp is set: every one goes through ExecContext or QueryContext, which
// database/sql prefers (the DSN interpolates arguments), and begins no prepared
// statement.
type steppedConn struct {
	conn  driver.Conn
	clock *steppedClock
}

func (c *steppedConn) set(ctx context.Context) error {
	at := time.Now().UnixMilli() + c.clock.offset.Load()
	_, err := c.conn.(driver.ExecerContext).ExecContext(ctx, fmt.Sprintf("SET timestamp = %d.%03d", at/1000, at%1000), nil)
	return err
}

func (c *steppedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.set(ctx); err != nil {
		return nil, err
	}
	return c.conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *steppedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.set(ctx); err != nil {
		return nil, err
	}
	return c.conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *steppedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *steppedConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("steppedConn: prepared statements would read the clock unset")
}

func (c *steppedConn) Begin() (driver.Tx, error) { return nil, errors.New("steppedConn: use BeginTx") }

func (c *steppedConn) Close() error { return c.conn.Close() }

func (c *steppedConn) ResetSession(ctx context.Context) error {
	return c.conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *steppedConn) IsValid() bool { return c.conn.(driver.Validator).IsValid() }

func (c *steppedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// TestClockStepForward (issue 15, item 4): the database's clock steps forward by less
// than the owner's lease but more than the margin, so the lease on the store is shorter
// than the owner believes. The owner's next answer shows the step: the owner gives the
// mutex up (no owner in the answer, the row released), the step is reported, and its next
// acquisition is a new tenure.
func TestClockStepForward(t *testing.T) {
	var clock steppedClock
	mutex := mutexName(t)
	b, err := jdbc.New(clock.pool(t), jdbc.WithHandOver(false))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	var logs records
	a := leaseOf(t, b, mutex, "a", slog.New(&logs)) // ttl 2 s, transition 1 s
	first := acquire(t, a)
	require.Equal(t, "a", first.Owner)
	require.Equal(t, first.Token, acquire(t, a).Token, "a renewal, no step")

	clock.step(1500 * time.Millisecond)
	rec := acquire(t, a)
	assert.Empty(t, rec.Owner, "the owner gives the mutex up at once")
	assert.Equal(t, uint64(1), b.ClockSteps())
	errs := logs.at(slog.LevelError)
	require.Len(t, errs, 1)
	assert.InDelta(t, 1500, errs[0]["step_ms"], 300)
	assert.Empty(t, readRow(t, openDB(t), mutex).Owner, "released on the store")

	again := acquire(t, a)
	assert.Equal(t, "a", again.Owner)
	assert.Greater(t, again.Token, first.Token, "a new tenure")
}

// TestClockStepBack (issue 15, item 4): the database's clock steps back 30 s during two
// tenures. That is safe for an owner (its lease on the store got longer): the step is
// reported and the tenure goes on. An owner that vanishes before it renews leaves a row
// that looks held for 30 s more than it was written for; a contender that saw the row
// before takes over once the row has not changed for as long as its lease (ttl +
// transition, 3 s here) by its own clock, not 30 s later.
func TestClockStepBack(t *testing.T) {
	var clock steppedClock
	b, err := jdbc.New(clock.pool(t), jdbc.WithHandOver(false))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	renewing, vanishing := mutexName(t), mutexName(t)
	a := leaseOf(t, b, renewing, "a")
	first := acquire(t, a)
	require.Equal(t, "a", first.Owner)
	require.Equal(t, "v", acquire(t, leaseOf(t, b, vanishing, "v")).Owner)
	waiter := leaseOf(t, b, vanishing, "w")
	require.Equal(t, "v", acquire(t, waiter).Owner)

	clock.step(-30 * time.Second)
	rec := acquire(t, a)
	assert.Equal(t, "a", rec.Owner, "a step back is safe: the tenure goes on")
	assert.Equal(t, first.Token, rec.Token)
	assert.Equal(t, uint64(1), b.ClockSteps(), "and reported")

	// v vanished; w polls as the service would: when the answer's transition window
	// ends, plus a little.
	began := time.Now()
	for {
		rec := acquire(t, waiter)
		if rec.Owner == "w" {
			break
		}
		require.Equal(t, "v", rec.Owner)
		require.Less(t, time.Since(began), 10*time.Second, "w has not taken over; the row said %v more", rec.Transition)
		time.Sleep(max(rec.Transition, 0) + 50*time.Millisecond)
	}
	t.Logf("w took over %v after the step", time.Since(began))
	assert.Less(t, time.Since(began), 10*time.Second)
	assert.Equal(t, uint64(2), b.ClockSteps(), "w saw the step too")
}
