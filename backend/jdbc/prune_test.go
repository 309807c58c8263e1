package jdbc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// dbNow is the database's clock in epoch milliseconds, as SQL.
const dbNow = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"

// pruneTable creates a table of the test's own, for Prune to prune everything in it
// without touching the other tests' rows, and drops it when the test ends. It returns
// its name.
func pruneTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	name := fmt.Sprintf("prune_%d", names.Add(1))
	rootExec(t, "DROP TABLE IF EXISTS simba."+name)
	require.NoError(t, jdbc.CreateTable(t.Context(), db, jdbc.WithTable(name)))
	t.Cleanup(func() { rootExec(t, "DROP TABLE IF EXISTS simba."+name) })
	return name
}

// TestPrune (issue 15, item 6): Prune deletes the rows that have had no owner for longer
// than the age given (released, or left by an owner whose lease ended), keeps the others,
// and a row it deleted comes back, on first use by any backend, at a version above every
// one it had.
func TestPrune(t *testing.T) {
	db := openDB(t)
	table := pruneTable(t, db)
	prefix := mutexName(t) + "-"
	insert := func(name string, acquired, transition string, owner string, version int64) {
		t.Helper()
		_, err := db.ExecContext(t.Context(), "INSERT INTO "+table+" VALUES (?, "+acquired+", 0, "+transition+", ?, ?)",
			prefix+name, owner, version)
		require.NoError(t, err)
	}
	hour := "3600000"
	insert("released-long-ago", dbNow+" - 2 * "+hour, "0", "", 50)
	insert("abandoned", dbNow+" - 3 * "+hour, dbNow+" - 2 * "+hour, "x", 70)
	insert("jvm-released", "0", "0", "", 5) // JVM Simba's release zeroes every time
	insert("abandoned-lately", dbNow+" - 2000", dbNow+" - 1000", "x", 9)
	insert("exhausted", "0", "0", "", 4294967295) // it can never be acquired again
	b := newBackend(t, jdbc.WithHandOver(false), jdbc.WithTable(table))
	released := leaseOf(t, b, prefix+"released-lately", "a")
	acquire(t, released)
	require.NoError(t, released.Release(t.Context()))
	owned := leaseOf(t, b, prefix+"owned", "a")
	acquire(t, owned)

	n, err := b.Prune(t.Context(), time.Hour)
	require.NoError(t, err)
	var left []string
	for _, r := range readRows(t, db, table, prefix) {
		left = append(left, r.Mutex[len(prefix):])
	}
	assert.ElementsMatch(t, []string{"released-lately", "owned", "abandoned-lately", "exhausted"}, left,
		"an exhausted row would lift every new row's version to the end")
	assert.Equal(t, int64(3), n)

	// A backend that never saw the pruned rows creates them again above their versions.
	for name, version := range map[string]uint64{"abandoned": 70, "released-long-ago": 50} {
		c := leaseOf(t, newBackend(t, jdbc.WithHandOver(false), jdbc.WithTable(table)), prefix+name, "b")
		rec := acquire(t, c)
		require.Equal(t, "b", rec.Owner)
		assert.Greater(t, rec.Token, version, name)
	}

	_, err = b.Prune(t.Context(), -time.Second)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// TestPruneDuringFirstUse (issue 15, item 6): Prune runs over and over while contenders
// use mutexes, each through a backend of its own (none remembers a version), and each use
// waits until the row of the use before has been pruned: every use is a first use, racing
// the pruner. Every acquisition succeeds, and each mutex's tokens strictly increase.
func TestPruneDuringFirstUse(t *testing.T) {
	const mutexes, uses, age = 4, 5, 200 * time.Millisecond
	db := openDB(t)
	table := pruneTable(t, db)
	prefix := mutexName(t) + "-"
	pruner := newBackend(t, jdbc.WithHandOver(false), jdbc.WithTable(table))
	ctx, stop := context.WithCancel(t.Context())
	var pruning sync.WaitGroup
	var pruned int64
	pruning.Go(func() {
		for ctx.Err() == nil {
			n, err := pruner.Prune(ctx, age)
			if err != nil && ctx.Err() == nil {
				t.Errorf("prune: %v", err)
				return
			}
			pruned += n
		}
	})
	backends := make([][]*jdbc.Backend, mutexes)
	for i := range backends {
		for range uses {
			backends[i] = append(backends[i], newBackend(t, jdbc.WithHandOver(false), jdbc.WithTable(table)))
		}
	}
	var users sync.WaitGroup
	for i := range mutexes {
		users.Go(func() {
			mutex := fmt.Sprint(prefix, i)
			var last uint64
			for u := range uses {
				l, err := simba.NewLocker(backends[i][u], mutex, simba.WithTTL(time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				actx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				lease, err := l.Acquire(actx)
				cancel()
				if err != nil {
					t.Errorf("%s use %d: %v", mutex, u, err)
					return
				}
				if lease.Token() <= last {
					t.Errorf("%s use %d: token %d after %d", mutex, u, lease.Token(), last)
				}
				last = lease.Token()
				if err := lease.Release(t.Context()); err != nil {
					t.Errorf("%s use %d: release: %v", mutex, u, err)
				}
				for deadline := time.Now().Add(10 * time.Second); ; {
					if err := db.QueryRowContext(t.Context(), "SELECT 1 FROM "+table+" WHERE mutex = ?", mutex).Scan(new(int)); errors.Is(err, sql.ErrNoRows) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s use %d: the row was not pruned", mutex, u)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	users.Wait()
	stop()
	pruning.Wait()
	t.Logf("%d rows pruned", pruned)
}
