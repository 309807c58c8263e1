package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// BenchmarkMariaDBPreparedCycle replays an uncontended cycle's two statements (the acquire
// that takes the named lock, the release that lets it go) on a pinned connection of a
// MariaDB with performance_schema, in blocks of 50 cycles that take turns: as text
// (interpolateParams) and as server-side prepared statements, prepared once
// (COM_STMT_EXECUTE). It reports each one's p50 cycle, the server's CPU per cycle (from
// /proc) and, for the text, the server's time per statement (performance_schema's digests,
// which count no prepared statement's executions on MariaDB 10.11).
func BenchmarkMariaDBPreparedCycle(b *testing.B) {
	srv := privateServer(b, "--performance-schema=ON")
	ctx := context.Background()
	require.NoError(b, srv.Exec(ctx, "GRANT SELECT ON performance_schema.* TO 'simba'@'127.0.0.1';"))
	textDB := openOn(b, srv)
	prepDB := openOn(b, srv, "interpolateParams=false")
	be, err := jdbc.New(textDB)
	require.NoError(b, err)
	defer be.Close()
	mutex := mutexName(b)
	l, err := simba.NewLocker(be, mutex+"-l")
	require.NoError(b, err)
	lease, err := l.Acquire(ctx)
	require.NoError(b, err)
	require.NoError(b, lease.Release(ctx))
	require.NoError(b, l.Close())
	_, release, lock := be.CycleSQL(simba.DefaultTTL, simba.DefaultTransition, mutex+"-s")
	acquire := jdbc.LockingAcquireSQL(jdbc.MySQL, simba.DefaultTTL, simba.DefaultTTL+simba.DefaultTransition)
	b.Logf("acquire %d bytes, release %d bytes", len(acquire), len(release))
	_, err = textDB.ExecContext(ctx, "INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version) VALUES (?, 0, 0, 0, '', 0)", mutex+"-s")
	require.NoError(b, err)

	textConn, err := textDB.Conn(ctx)
	require.NoError(b, err)
	defer textConn.Close()
	prepConn, err := prepDB.Conn(ctx)
	require.NoError(b, err)
	defer prepConn.Close()
	acqStmt, err := prepConn.PrepareContext(ctx, acquire)
	require.NoError(b, err)
	relStmt, err := prepConn.PrepareContext(ctx, release)
	require.NoError(b, err)

	type execer func(stmt int, args ...any) (sql.Result, error)
	cycle := func(exec execer) error {
		res, err := exec(0, "me", nil, 0, "me", mutex+"-s", 0, "me", nil, nil, nil, lock, lock)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("acquire matched %d rows", n)
		}
		id, _ := res.LastInsertId()
		version := uint64(id)>>32 + 1
		res, err = exec(1, lock, mutex+"-s", "me", version)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("release matched %d rows", n)
		}
		return nil
	}
	parts := []struct {
		name string
		exec execer
	}{
		{"text", func(stmt int, args ...any) (sql.Result, error) {
			return textConn.ExecContext(ctx, []string{acquire, release}[stmt], args...)
		}},
		{"prepared", func(stmt int, args ...any) (sql.Result, error) {
			return []*sql.Stmt{acqStmt, relStmt}[stmt].ExecContext(ctx, args...)
		}},
	}
	digest := func() map[string][2]float64 { // statement kind -> count, seconds
		out := map[string][2]float64{}
		rows, err := prepDB.QueryContext(ctx, "SELECT DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT LIKE 'UPDATE%'")
		require.NoError(b, err)
		defer rows.Close()
		for rows.Next() {
			var text string
			var n, wait float64
			require.NoError(b, rows.Scan(&text, &n, &wait))
			kind := "release"
			if strings.Contains(text, "GET_LOCK") {
				kind = "acquire"
			}
			v := out[kind]
			out[kind] = [2]float64{v[0] + n, v[1] + wait/1e12}
		}
		return out
	}
	const block = 50
	took := make([][]time.Duration, len(parts))
	cpu := make([]time.Duration, len(parts))
	stmtTime := make([]map[string][2]float64, len(parts))
	for i := range stmtTime {
		stmtTime[i] = map[string][2]float64{}
	}
	for round := 0; round < max(b.N/block, 4)+1; round++ {
		for i, p := range parts {
			require.NoError(b, srv.Exec(ctx, "TRUNCATE TABLE performance_schema.events_statements_summary_by_digest;"))
			began := serverCPU(b, srv.PID())
			for range block {
				t := time.Now()
				require.NoError(b, cycle(p.exec), p.name)
				if round > 0 {
					took[i] = append(took[i], time.Since(t))
				}
			}
			if round > 0 {
				cpu[i] += serverCPU(b, srv.PID()) - began
				for k, v := range digest() {
					s := stmtTime[i][k]
					stmtTime[i][k] = [2]float64{s[0] + v[0], s[1] + v[1]}
				}
			}
		}
	}
	for i, p := range parts {
		b.ReportMetric(float64(p50(took[i]).Microseconds()), p.name+"-p50-µs")
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(len(took[i])), p.name+"-server-cpu-µs")
		for k, v := range stmtTime[i] {
			b.ReportMetric(v[1]/v[0]*1e6, p.name+"-"+k+"-server-µs")
		}
	}
}

// serverCPU returns the user and system CPU time of process pid so far, from /proc.
func serverCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(b, err)
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(b, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(b, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ 100
}

// BenchmarkMariaDBLockerServerCPU measures uncontended Locker cycles, each with a deadline
// as a service's calls have, on a MariaDB of its own: the p50 cycle and the server's CPU
// per cycle (from /proc).
func BenchmarkMariaDBLockerServerCPU(b *testing.B) {
	srv := privateServer(b)
	be, err := jdbc.New(openOn(b, srv))
	require.NoError(b, err)
	defer be.Close()
	l, err := simba.NewLocker(be, mutexName(b))
	require.NoError(b, err)
	defer l.Close()
	cycle := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lease, err := l.Acquire(ctx)
		require.NoError(b, err)
		require.NoError(b, lease.Release(ctx))
	}
	for range 50 {
		cycle()
	}
	var cycles []time.Duration
	began := serverCPU(b, srv.PID())
	for b.Loop() {
		t := time.Now()
		cycle()
		cycles = append(cycles, time.Since(t))
	}
	b.ReportMetric(float64((serverCPU(b, srv.PID())-began).Microseconds())/float64(len(cycles)), "server-cpu-µs/op")
	b.ReportMetric(float64(p50(cycles).Microseconds()), "p50-µs")
}
