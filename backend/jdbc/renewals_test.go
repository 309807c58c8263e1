package jdbc_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// An owner without a value clears its ID's value row once, at its tenure's beginning, and
// its renewals then clear nothing, however many pairs the backend has cleared since: it
// remembered 4,096 and then forgot them all, so that with 10,000 mutexes held every
// renewal went with a DELETE.
func TestRenewalsClearValueOnce(t *testing.T) {
	needServer(t)
	var s statements
	b, err := jdbc.New(countedDB(t, "mysql", server.DSN(), &s))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	const ttl = 2 * time.Second
	l, err := simba.NewLocker(b, mutexName(t), simba.WithTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(t.Context()) })
	b.RememberClearings(jdbc.MaxCleared) // other tenures'
	s.take()
	require.Eventually(t, func() bool { return s.count("acquire")+s.count("renew many") >= 2 }, time.Minute, 10*time.Millisecond,
		"two renewals")
	counts := s.take()
	require.NoError(t, lease.Context().Err())
	assert.Zero(t, counts["delete"], "value rows cleared by renewals: %v", counts)
}

// count returns how many statements of kind s has counted so far.
func (s *statements) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// heldStore is a store the held-mutex tests run on: a backend's pool on it, and what the
// server counts.
type heldStore struct {
	name     string
	open     func(t *testing.T, s *statements) (*sql.DB, []jdbc.Option)
	updates  func(t *testing.T) int64                            // UPDATE statements the server has run
	versions func(t *testing.T, db *sql.DB, prefix string) int64 // the sum of the versions of the rows whose mutex begins with prefix
	takeOver string                                              // hands a mutex's row to contender y, as a takeover would
}

var heldStores = []heldStore{
	{
		name: "MariaDB",
		open: func(t *testing.T, s *statements) (*sql.DB, []jdbc.Option) {
			needServer(t)
			return countedDB(t, "mysql", server.DSN(), s), nil
		},
		updates:  func(t *testing.T) int64 { return globalStatus(t, openDB(t), "Com_update") },
		takeOver: "UPDATE simba_mutex SET owner_id = 'y', version = version + 1 WHERE mutex = ?",
		versions: func(t *testing.T, db *sql.DB, prefix string) int64 {
			return sumVersions(t, db, "SELECT COALESCE(SUM(version), 0) FROM simba_mutex WHERE LEFT(mutex, CHAR_LENGTH(?)) = ?", prefix, prefix)
		},
	},
	{
		name: "PostgreSQL",
		open: func(t *testing.T, s *statements) (*sql.DB, []jdbc.Option) {
			needPostgres(t)
			return countedDB(t, "pgx", pgServer.DSN(), s), []jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}
		},
		updates: func(t *testing.T) int64 {
			var n int64
			require.NoError(t, openPG(t).QueryRowContext(t.Context(),
				"SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements WHERE query LIKE 'UPDATE %simba_mutex%'").Scan(&n))
			return n
		},
		takeOver: "UPDATE simba_mutex SET owner_id = 'y', version = version + 1 WHERE mutex = $1",
		versions: func(t *testing.T, db *sql.DB, prefix string) int64 {
			return sumVersions(t, db, "SELECT COALESCE(SUM(version), 0) FROM simba_mutex WHERE left(mutex, length($1)) = $1", prefix)
		},
	},
}

func sumVersions(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRowContext(t.Context(), query, args...).Scan(&n))
	return n
}

// holdMany has n Lockers on b acquire a mutex each, named prefix and a number, and returns
// their leases, released when t ends.
func holdMany(t *testing.T, b *jdbc.Backend, prefix string, n int, opts ...simba.LockerOption) []*simba.Lease {
	t.Helper()
	leases := make([]*simba.Lease, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() {
			l, err := simba.NewLocker(b, fmt.Sprintf("%s%d", prefix, i), opts...)
			if !assert.NoError(t, err) {
				return
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			leases[i], err = l.Acquire(ctx)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range leases {
			if l != nil {
				_ = l.Release(context.Background())
			}
		}
	})
	require.False(t, t.Failed())
	return leases
}

// Mutexes held by one process renew together: the server runs at most 1.1 UPDATEs per
// renewal period for each connection of the backend's pool (issue 35's goal), not one per
// mutex, and every owner keeps its lease. A renewal period is counted by the renewals
// themselves: each raises its row's version by one.
func TestHeldMutexesRenewInBatches(t *testing.T) {
	for _, st := range heldStores {
		t.Run(st.name, func(t *testing.T) {
			var s statements
			db, opts := st.open(t, &s)
			db.SetMaxOpenConns(10)
			b, err := jdbc.New(db, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			const n = 200
			prefix := mutexName(t) + "-"
			// A TTL of 6 s bounds each renewal at 1.5 s: a loaded CI machine stalled a
			// PostgreSQL renewal of 200 rows past 750 ms, and an owner lost its lease.
			leases := holdMany(t, b, prefix, n, simba.WithTTL(6*time.Second))
			reach := func(v int64) {
				t.Helper()
				require.Eventually(t, func() bool { return st.versions(t, db, prefix) >= v }, time.Minute, 20*time.Millisecond)
			}
			// Every owner renews once first: from then on, it renews on simba's grid.
			reach(st.versions(t, db, prefix) + n)
			v0, u0 := st.versions(t, db, prefix), st.updates(t)
			reach(v0 + 3*n)
			v1, u1 := st.versions(t, db, prefix), st.updates(t)
			periods := float64(v1-v0) / n
			perPeriod := float64(u1-u0) / periods
			conns := db.Stats().OpenConnections
			t.Logf("%d held mutexes: %.1f UPDATEs per renewal period on %d connections", n, perPeriod, conns)
			assert.LessOrEqual(t, perPeriod, 1.1*float64(conns))
			for i, l := range leases {
				assert.NoError(t, context.Cause(l.Context()), "lease %d", i)
			}
		})
	}
}

// Renewals that share a statement each get their own answer: of three held mutexes renewed
// together, the one taken over meanwhile answers its new owner, and the other two are
// renewed in the tenures they had. Renewals go in one statement when they come within
// milliseconds of each other; a round in which they did not is made again.
func TestRenewManyAnswersEachMutex(t *testing.T) {
	for _, st := range heldStores {
		t.Run(st.name, func(t *testing.T) {
			var s statements
			db, opts := st.open(t, &s)
			b, err := jdbc.New(db, append(opts, jdbc.WithHandOver(false))...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			for round := 0; ; round++ {
				require.Less(t, round, 10, "the three renewals never went in one statement")
				if renewTogether(t, b, db, st.takeOver, &s) {
					return
				}
			}
		})
	}
}

// renewTogether holds three mutexes with contender x, hands the second to y behind its
// back, renews the three at once and checks each answer. It reports whether the three
// went in one statement.
func renewTogether(t *testing.T, b *jdbc.Backend, db *sql.DB, takeOver string, s *statements) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var (
		cs      [3]backend.LeaseContention
		tokens  [3]uint64
		mutexes [3]string
	)
	for i := range cs {
		mutexes[i] = mutexName(t)
		c, err := b.StartContend(ctx, backend.Participant{Mutex: mutexes[i], ContenderID: "x", TTL: 10 * time.Second,
			Transition: 6 * time.Second, Wake: func() {}})
		require.NoError(t, err)
		cs[i] = c.(backend.LeaseContention)
		t.Cleanup(func() {
			_ = cs[i].Release(context.Background())
			_ = cs[i].StopContend(context.Background())
		})
		rec, err := cs[i].Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, "x", rec.Owner)
		tokens[i] = rec.Token
	}
	_, err := db.ExecContext(ctx, takeOver, mutexes[1])
	require.NoError(t, err)
	s.take()
	var (
		recs [3]backend.Record
		errs [3]error
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for i, c := range cs {
		wg.Go(func() {
			<-start
			recs[i], errs[i] = c.Acquire(ctx)
		})
	}
	close(start)
	wg.Wait()
	counts := s.take()
	for i := range cs {
		require.NoError(t, errs[i], "renewal %d", i)
	}
	assert.Equal(t, "x", recs[0].Owner, "the first mutex is still x's")
	assert.Equal(t, tokens[0], recs[0].Token, "in the tenure it had")
	assert.Equal(t, "y", recs[1].Owner, "the second was taken over")
	assert.Equal(t, "x", recs[2].Owner, "the third is still x's")
	assert.Equal(t, tokens[2], recs[2].Token, "in the tenure it had")
	t.Logf("statements: %v", counts)
	return counts["renew many"] == 1
}

// TestRenewManyPlanIgnoresReleasedRows: PostgreSQL's statistics of a table whose rows were
// all released when it was last analyzed say that no row's transition ends after now.
// The batch's statement must not plan on that (a nested loop that reads the batch's JSON
// again for every row of the table: 2.7 s for 2,000 renewals of 10,000 held mutexes, past
// the renewals' deadline, in the bench's held-mutex run).
func TestRenewManyPlanIgnoresReleasedRows(t *testing.T) {
	db := openPG(t)
	ctx := t.Context()
	insert := planTable(t, db, jdbc.Postgres, "SELECT 'm' || g, 1, 1, %s, 'o' || g, 1 FROM generate_series(%d, %d) g")
	insert(100000, 100500, "0") // released
	_, err := db.ExecContext(ctx, "ANALYZE "+planTableName)
	require.NoError(t, err)
	insert(0, 10000, "(extract(epoch FROM now()) * 1000)::bigint + 600000") // held for ten minutes
	plan, err := jdbc.ExplainRenewMany(ctx, db, planTableName, 10*time.Second, planBatch())
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	require.Contains(t, text, "rows=2000 loops=1)", "every row renewed, in one statement:\n%s", text)
	for _, line := range plan {
		if strings.Contains(line, "json_to_recordset") {
			assert.Contains(t, line, "loops=1)", "the batch's rows read once:\n%s", text)
		}
	}
}

// TestRenewManyPlanMariaDB: MariaDB's batch statement reads, and so locks, only the rows
// it names, also when the batch names a large share of the table's rows (here 2,000 of
// 10,500): with the mutexes in an IN list, MariaDB 10.11 read the whole key instead,
// locking every row of the table while the statement ran.
func TestRenewManyPlanMariaDB(t *testing.T) {
	db := openDB(t)
	ctx := t.Context()
	insert := planTable(t, db, jdbc.MySQL, "SELECT CONCAT('m', seq), 1, 1, %s, CONCAT('o', seq), 1 FROM seq_%d_to_%d")
	insert(100000, 100500, "0")                                   // released
	insert(0, 10000, "UNIX_TIMESTAMP(NOW(3)) * 1000 + 600000")    // held for ten minutes
	for _, analyze := range []string{"", " PERSISTENT FOR ALL"} { // the server's statistics, then also its own
		_, err := db.ExecContext(ctx, "ANALYZE TABLE "+planTableName+analyze)
		require.NoError(t, err)
		text, err := jdbc.AnalyzeRenewManyMariaDB(ctx, db, planTableName, 10*time.Second, planBatch())
		require.NoError(t, err)
		var plan any
		require.NoError(t, json.Unmarshal([]byte(text), &plan), text)
		read := planEntry(plan, planTableName)
		require.NotNil(t, read, "the table in the plan:\n%s", text)
		assert.Equal(t, "eq_ref", read["access_type"], "each row found by the key%s:\n%s", analyze, text)
		assert.Equal(t, 2000.0, read["r_loops"], "once per row of the batch%s:\n%s", analyze, text)
		assert.Equal(t, 100.0, read["r_filtered"], "every row renewed%s:\n%s", analyze, text)
		_, err = db.ExecContext(ctx, "UPDATE "+planTableName+" SET version = 1")
		require.NoError(t, err)
	}
}

// planTableName is the mutex table of the plan tests.
const planTableName = "renew_plan"

// planTable makes the plan tests' mutex table, empty, on db of dialect d, and returns a
// function that inserts the rows m<from> to m<to-1>, owned by o<n> at version 1, their
// transitions ending at transitionAt. rows is the SELECT that makes them, with the
// places of transitionAt, from and to-1.
func planTable(t *testing.T, db *sql.DB, d jdbc.Dialect, rows string) func(from, to int, transitionAt string) {
	ctx := t.Context()
	_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+planTableName)
	require.NoError(t, err)
	require.NoError(t, jdbc.CreateTable(ctx, db, jdbc.WithDialect(d), jdbc.WithTable(planTableName)))
	return func(from, to int, transitionAt string) {
		_, err := db.ExecContext(ctx, "INSERT INTO "+planTableName+" (mutex, acquired_at, ttl_at, transition_at, owner_id, version) "+
			fmt.Sprintf(rows, transitionAt, from, to-1))
		require.NoError(t, err)
	}
}

// planBatch is the plan tests' batch: 2,000 of the rows planTable inserts, every fifth.
func planBatch() []jdbc.RenewRow {
	var rows []jdbc.RenewRow
	for i := range 2000 {
		rows = append(rows, jdbc.RenewRow{Mutex: fmt.Sprint("m", i*5), Owner: fmt.Sprint("o", i*5), Version: 1})
	}
	return rows
}

// planEntry finds the entry of table in plan, a MariaDB ANALYZE FORMAT=JSON answer.
func planEntry(plan any, table string) map[string]any {
	switch v := plan.(type) {
	case map[string]any:
		if v["table_name"] == table {
			return v
		}
		for _, x := range v {
			if t := planEntry(x, table); t != nil {
				return t
			}
		}
	case []any:
		for _, x := range v {
			if t := planEntry(x, table); t != nil {
				return t
			}
		}
	}
	return nil
}
