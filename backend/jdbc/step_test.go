package jdbc_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
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

// steppedClock is a database clock the test can step: every connection of a pool made
// with it sets its session's timestamp (which UTC_TIMESTAMP follows) to the real time
// plus the clock's offset, and connections are not reused, so each statement reads the
// clock as it is then.
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
	db.SetMaxIdleConns(0)
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
	at := time.Now().UnixMilli() + s.clock.offset.Load()
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, fmt.Sprintf("SET timestamp = %d.%03d", at/1000, at%1000), nil); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
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
