package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// BenchmarkPostgresCycleParts takes an uncontended Locker cycle on a PostgreSQL whose
// commits wait for the disk apart, layer by layer, the layers taking turns cycle by
// cycle, and reports each one's p50 over the unit's (x/update) and the client CPU per
// cycle (x-cpu-µs):
//
//   - update: one autocommitted UPDATE of a one-row table, the unit; async-update: the
//     same without waiting for the WAL (a release's least); select: SELECT 1, a round trip;
//   - statements: the cycle's two statements replayed on a pinned connection through
//     database/sql's rows; statements-raw: through the driver's connection (queryRow), as
//     the backend runs them; release/update is the release's part of it;
//   - minimal: the least two statements on the table that take and give a row (an UPDATE
//     of owner and version, and one that clears them without waiting for the WAL);
//   - contention, contention-deadline: the backend's calls as a Locker makes them (its
//     start, one acquire, the release and the stop), with a context without and with a
//     deadline; locker: Acquire and Release of a Locker.
func BenchmarkPostgresCycleParts(b *testing.B) {
	db, _ := durablePG(b)
	ctx := b.Context()
	require.NoError(b, jdbc.CreateTable(ctx, db, jdbc.WithDialect(jdbc.Postgres)))
	be, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
	require.NoError(b, err)
	b.Cleanup(func() { _ = be.Close() })
	mutex := mutexName(b)
	conn, err := db.Conn(ctx)
	require.NoError(b, err)
	defer conn.Close()
	for _, stmt := range []string{
		"CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL)",
		"INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING",
		"INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version) VALUES ('" + mutex + "-s', 0, 0, 0, '', 0)",
		"INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version) VALUES ('" + mutex + "-m', 0, 0, 0, '', 0)",
	} {
		_, err = conn.ExecContext(ctx, stmt)
		require.NoError(b, err)
	}
	l, err := simba.NewLocker(be, mutex+"-l")
	require.NoError(b, err)
	b.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(ctx) // the table is checked
	require.NoError(b, err)
	require.NoError(b, lease.Release(ctx))
	acquire, release, lock := be.CycleSQL(simba.DefaultTTL, simba.DefaultTransition, mutex+"-s")
	dctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()

	// replay runs the cycle's two statements with queryRow, and times the release into
	// releases if set.
	var rawReleases, minimalReleases []time.Duration
	replay := func(releases *[]time.Duration, queryRow func(query string, args []any, dest ...any) error) error {
		var got, pid int64
		var version, mark, now, found sql.NullInt64
		err := queryRow(acquire, []any{nil, 0, "me", nil, mutex + "-s", nil, lock}, &got, &pid, &version, &mark, &now, &found)
		if err == nil && !version.Valid {
			err = fmt.Errorf("the acquire matched nothing (lock taken: %d)", got)
		}
		if err != nil {
			return err
		}
		t := time.Now()
		err = queryRow(release, []any{nil, mutex + "-s", "me", version.Int64, lock}, new(bool))
		if releases != nil {
			*releases = append(*releases, time.Since(t))
		}
		return err
	}
	parts := []struct {
		name  string
		cycle func() error
	}{
		{"update", func() error {
			_, err := conn.ExecContext(ctx, "UPDATE bench_floor SET v = v + 1 WHERE id = $1", 1)
			return err
		}},
		{"async-update", func() error {
			_, err := conn.ExecContext(ctx, "UPDATE bench_floor SET v = v + 1 "+
				"WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL AND id = $1", 1)
			return err
		}},
		{"select", func() error { return conn.QueryRowContext(ctx, "SELECT 1").Scan(new(int)) }},
		{"statements", func() error {
			return replay(nil, func(query string, args []any, dest ...any) error {
				return conn.QueryRowContext(ctx, query, args...).Scan(dest...)
			})
		}},
		{"statements-raw", func() error {
			return replay(&rawReleases, func(query string, args []any, dest ...any) error {
				return jdbc.QueryRow(ctx, conn, query, args, dest...)
			})
		}},
		{"minimal", func() error {
			var v int64
			err := jdbc.QueryRow(ctx, conn, "UPDATE simba_mutex SET version = version + 1, owner_id = $2 WHERE mutex = $1 RETURNING version",
				[]any{mutex + "-m", "me"}, &v)
			if err != nil {
				return err
			}
			t := time.Now()
			err = jdbc.QueryRow(ctx, conn, "UPDATE simba_mutex SET version = version + 1, owner_id = '' WHERE "+
				"set_config('synchronous_commit', 'off', true) IS NOT NULL AND mutex = $1 AND version = $2 RETURNING true",
				[]any{mutex + "-m", v}, new(bool))
			minimalReleases = append(minimalReleases, time.Since(t))
			return err
		}},
		{"contention", contentionCycle(ctx, be, mutex+"-c")},
		{"contention-deadline", contentionCycle(dctx, be, mutex+"-d")},
		{"locker", func() error {
			lease, err := l.Acquire(ctx)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}},
	}
	// The parts take turns cycle by cycle: timed in blocks of cycles, a slow or fast spell
	// of the disk fell on some parts and not others, and their ratios moved from run to
	// run with it.
	const warm = 50
	took := make([][]time.Duration, len(parts))
	cpu := make([]time.Duration, len(parts))
	for round := range max(b.N, 200) + warm {
		for i, p := range parts {
			began, t := processCPU(), time.Now()
			require.NoError(b, p.cycle(), p.name)
			if round >= warm {
				took[i] = append(took[i], time.Since(t))
				cpu[i] += processCPU() - began
			}
		}
	}
	unit := p50(took[0])
	for i, p := range parts {
		b.ReportMetric(float64(p50(took[i]))/float64(unit), p.name+"/update")
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(len(took[i])), p.name+"-cpu-µs")
	}
	b.ReportMetric(float64(unit.Microseconds()), "update-p50-µs")
	b.ReportMetric(float64(p50(rawReleases))/float64(unit), "release/update")
	b.ReportMetric(float64(p50(minimalReleases))/float64(unit), "minimal-release/update")
}

// contentionCycle returns a cycle of the calls a Locker makes of be for an uncontended
// acquisition of mutex: the contention's start, one acquire, the release and the stop.
func contentionCycle(ctx context.Context, be *jdbc.Backend, mutex string) func() error {
	return func() error {
		c, err := be.StartContend(ctx, backend.Participant{Mutex: mutex, ContenderID: "me", TTL: simba.DefaultTTL,
			Transition: simba.DefaultTransition, Wake: func() {}, Closed: func() {}, WaitsOnly: true})
		if err != nil {
			return err
		}
		lc := c.(backend.LeaseContention)
		rec, err := lc.Acquire(ctx)
		if err == nil && rec.Owner != "me" {
			err = fmt.Errorf("acquire: owner %q", rec.Owner)
		}
		if err == nil {
			err = lc.Release(ctx)
		}
		if serr := lc.StopContend(ctx); err == nil {
			err = serr
		}
		return err
	}
}

// p50 returns the median of d, which it sorts.
func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// TestPostgresCycleStartsNoGoroutine: an uncontended Locker cycle on PostgreSQL, with a
// context that can end as an application's can, starts no goroutine: its two statements
// return rows, and database/sql's rows started one per statement to close them if the
// context ended, whose two wake-ups cost the cycle more client CPU than the Locker.
func TestPostgresCycleStartsNoGoroutine(t *testing.T) {
	l, err := simba.NewLocker(newPGBackend(t), mutexName(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cycle := func() {
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	cycle() // the table's check and the row's creation
	const cycles = 50
	before := goroutinesCreated()
	for range cycles {
		cycle()
	}
	created := goroutinesCreated() - before
	// Fewer than one a cycle (two before): pgx starts a reader of its own when a write
	// takes over 15 ms, which a loaded machine may make happen now and then.
	assert.Less(t, created, uint64(cycles), "goroutines started by %d cycles", cycles)
}

// TestPostgresCycleAllocations (issue 35): the backend's calls for an uncontended cycle (a
// contention's start, its acquire, its release and its stop) allocate 72 objects, most of
// them pgx's for the two statements. The acquire scanned its answer into fifteen
// variables of their own, and each contention made a logger that discards: 86 then.
func TestPostgresCycleAllocations(t *testing.T) {
	b := newPGBackend(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cycle := contentionCycle(ctx, b, mutexName(t))
	allocs := testing.AllocsPerRun(50, func() { require.NoError(t, cycle()) })
	t.Logf("allocations per cycle: %.0f", allocs)
	assert.LessOrEqual(t, allocs, 76.0)
}
