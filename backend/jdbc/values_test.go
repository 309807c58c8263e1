package jdbc_test

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// dialectStore is one of the servers the package's tests run on, as a test needs it.
type dialectStore struct {
	name    string
	backend func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend
	db      func(t testing.TB, params ...string) *sql.DB
	dialect jdbc.Dialect
}

// eachCounted runs f on MariaDB and on PostgreSQL, each in a subtest, with a backend whose
// pool counts its statements in s, and open, which opens another backend on the same
// server whose pool counts them in the statements it is given.
func eachCounted(t *testing.T, f func(t *testing.T, b *jdbc.Backend, s *statements, open func(*statements) *jdbc.Backend)) {
	for _, tc := range []struct {
		name, driver string
		dsn          func(t *testing.T) string
		opts         []jdbc.Option
	}{
		{name: "mariadb", driver: "mysql", dsn: func(t *testing.T) string { needServer(t); return server.DSN("interpolateParams=true") }},
		{name: "postgres", driver: "pgx", dsn: func(t *testing.T) string { needPostgres(t); return pgServer.DSN() },
			opts: []jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(s *statements) *jdbc.Backend {
				b, err := jdbc.New(countedDB(t, tc.driver, tc.dsn(t), s), tc.opts...)
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				return b
			}
			var s statements
			f(t, open(&s), &s, open)
		})
	}
}

// eachStore runs f on MariaDB and on PostgreSQL, each in a subtest.
func eachStore(t *testing.T, f func(t *testing.T, s dialectStore)) {
	t.Run("mariadb", func(t *testing.T) {
		f(t, dialectStore{name: "mariadb", backend: newBackend, db: openDB, dialect: jdbc.MySQL})
	})
	t.Run("postgres", func(t *testing.T) {
		f(t, dialectStore{name: "postgres", backend: newPGBackend, db: openPG, dialect: jdbc.Postgres})
	})
}

// lookupValue returns the owner and value that simba.Lookup finds for mutex on b.
func lookupValue(t *testing.T, b *jdbc.Backend, mutex string) (string, string) {
	t.Helper()
	o, err := simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	return o.ID, o.Value
}

// versionOf returns the version of mutex's row in the mutex table.
func versionOf(t *testing.T, db *sql.DB, s dialectStore, mutex string) uint64 {
	t.Helper()
	return columnOf[uint64](t, db, s, mutex, "version")
}

// columnOf returns column of mutex's row in the mutex table.
func columnOf[T any](t *testing.T, db *sql.DB, s dialectStore, mutex, column string) T {
	t.Helper()
	q := "SELECT " + column + " FROM simba_mutex WHERE mutex = ?"
	if s.dialect == jdbc.Postgres {
		q = "SELECT " + column + " FROM simba_mutex WHERE mutex = $1"
	}
	var v T
	require.NoError(t, db.QueryRowContext(t.Context(), q, mutex).Scan(&v))
	return v
}

// renewedTwice waits until mutex's row has moved on by two versions from the one it has
// now: its owner renewed twice.
func renewedTwice(t *testing.T, db *sql.DB, s dialectStore, mutex string) {
	t.Helper()
	from := versionOf(t, db, s, mutex)
	require.Eventually(t, func() bool { return versionOf(t, db, s, mutex) >= from+2 }, 20*time.Second, 20*time.Millisecond,
		"the owner did not renew")
}

// renewing returns the Locker options of tests that wait for an owner's renewals and
// check what they write, not how fast they are: a renewal every 1.5 s, with 1.5 s to get
// through before the tenure ends (twice the call timeout, ttl/4). In CI a renewal on
// PostgreSQL timed out at a 500 ms call timeout (ttl 2 s), then again within the ttl/3
// left, and the tenure ended.
func renewing() []simba.LockerOption {
	return []simba.LockerOption{simba.WithTTL(3 * time.Second), simba.WithTransition(time.Second),
		simba.WithRenewalLead(1500 * time.Millisecond)}
}

// TestOwnerValueLastsItsTenure: a contender's value comes back with its lease and with
// every lookup through its renewals; a later tenure of another contender without a value,
// and one of the same ID without a value (a process restarted without it), shows none,
// before and after its renewals.
func TestOwnerValueLastsItsTenure(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		b, db := s.backend(t), s.db(t)
		mutex := mutexName(t)
		opts := renewing()
		locker := func(id, value string, b *jdbc.Backend) *simba.Locker {
			o := append([]simba.LockerOption{simba.WithContenderID(id)}, opts...)
			if value != "" {
				o = append(o, simba.WithOwnerValue(value))
			}
			l, err := simba.NewLocker(b, mutex, o...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return l
		}

		a := locker("a", "10.0.0.7:8080", b)
		lease, err := a.Acquire(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.7:8080", lease.Owner().Value, "the lease")
		owner, value := lookupValue(t, b, mutex)
		assert.Equal(t, [2]string{"a", "10.0.0.7:8080"}, [2]string{owner, value}, "a lookup in the tenure's first write")
		renewedTwice(t, db, s, mutex)
		owner, value = lookupValue(t, b, mutex)
		assert.Equal(t, [2]string{"a", "10.0.0.7:8080"}, [2]string{owner, value}, "a lookup after renewals")
		require.NoError(t, lease.Release(t.Context()))

		for _, id := range []string{"c", "a"} {
			// A backend of its own: another process, which has not seen the value.
			l := locker(id, "", s.backend(t))
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)
			assert.Empty(t, lease.Owner().Value, "%s's lease", id)
			owner, value := lookupValue(t, b, mutex)
			assert.Equal(t, [2]string{id, ""}, [2]string{owner, value}, "a lookup in %s's tenure's first write", id)
			renewedTwice(t, db, s, mutex)
			owner, value = lookupValue(t, b, mutex)
			assert.Equal(t, [2]string{id, ""}, [2]string{owner, value}, "a lookup after %s's renewals", id)
			require.NoError(t, lease.Release(t.Context()))
		}
	})
}

// TestOwnerValueOfAnEarlierLifecycle: a contender whose earlier lifecycle (a process that
// stopped without releasing) still owns the row takes that tenure over with a renewal; its
// own value is answered from then on, never the earlier lifecycle's.
func TestOwnerValueOfAnEarlierLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		start := func(value string) backend.LeaseContention {
			b := s.backend(t, jdbc.WithHandOver(false))
			c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "a", Value: value,
				TTL: 10 * time.Second, Transition: 5 * time.Second, Wake: func() {}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.StopContend(context.Background()) })
			return c.(backend.LeaseContention)
		}
		first, err := start("first").Acquire(t.Context())
		require.NoError(t, err)
		require.Equal(t, "first", first.Value)
		// The first lifecycle ends without a release; the second takes its tenure over.
		second := start("second")
		rec, err := second.Acquire(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "a", rec.Owner)
		assert.Greater(t, rec.Token, first.Token, "the takeover begins a tenure of its own")
		assert.Equal(t, "second", rec.Value)
		owner, value := lookupValue(t, s.backend(t), mutex)
		assert.Equal(t, [2]string{"a", "second"}, [2]string{owner, value})
		require.NoError(t, second.Release(t.Context()))
	})
}

// TestOwnerValueWithoutTheValueTable: on a mutex table without the value table beside it,
// a contender with a value is refused at its start, saying how to create the table, and
// one without a value contends as before.
func TestOwnerValueWithoutTheValueTable(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		ddl, err := jdbc.DDL(jdbc.WithTable("novalues"), jdbc.WithDialect(s.dialect))
		require.NoError(t, err)
		_, err = s.db(t).ExecContext(t.Context(), ddl)
		require.NoError(t, err)
		b := s.backend(t, jdbc.WithTable("novalues"))
		mutex := mutexName(t)
		l, err := simba.NewLocker(b, mutex, simba.WithOwnerValue("v"))
		require.NoError(t, err, "the backend keeps values: construction takes one")
		t.Cleanup(func() { _ = l.Close() })
		_, err = l.Acquire(t.Context())
		require.ErrorIs(t, err, simba.ErrRefused)
		assert.ErrorContains(t, err, "novalues_value")
		assert.ErrorContains(t, err, "CREATE TABLE IF NOT EXISTS")

		plain, err := simba.NewLocker(b, mutex)
		require.NoError(t, err)
		t.Cleanup(func() { _ = plain.Close() })
		lease, err := plain.Acquire(t.Context())
		require.NoError(t, err)
		assert.Empty(t, lease.Owner().Value)
		require.NoError(t, lease.Release(t.Context()))
	})
}

// TestOwnerValueStatements: a contender with a value pays one statement per tenure for it
// (the value's write), none per renewal; one without pays nothing, but for one clearing
// of a value of its ID in its first tenure, once per backend and mutex.
func TestOwnerValueStatements(t *testing.T) {
	const cycles = 20
	eachCounted(t, func(t *testing.T, b *jdbc.Backend, s *statements, open func(*statements) *jdbc.Backend) {
		other := open(new(statements))
		plain := cycleStatements(t, b, s, cycles)
		valued := cycleStatements(t, b, s, cycles, simba.WithOwnerValue("v"))
		t.Logf("per cycle without a value: %s; with one: %s", perUnit(plain, cycles), perUnit(valued, cycles))
		assert.Equal(t, 2*cycles, total(plain), "statements of %d cycles without a value", cycles)
		assert.Equal(t, 3*cycles, total(valued), "statements of %d cycles with a value", cycles)
		assert.Equal(t, cycles, valued["insert"], "the value's writes")

		// Renewals: none writes the value again; without a value, the first tenure
		// clears a value of the ID, once per backend and mutex.
		for _, value := range []string{"v", ""} {
			opts := renewing()
			if value != "" {
				opts = append(opts, simba.WithOwnerValue(value))
			}
			mutex := mutexName(t)
			// The row's first use, which creates it, through another process.
			first, err := simba.NewLocker(other, mutex)
			require.NoError(t, err)
			lease, err := first.Acquire(t.Context())
			require.NoError(t, err)
			require.NoError(t, lease.Release(t.Context()))
			require.NoError(t, first.Close())
			l, err := simba.NewLocker(b, mutex, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			s.take()
			for range 2 {
				lease, err := l.Acquire(t.Context())
				require.NoError(t, err)
				awaitRenewals(t, s, lease, 2)
				require.NoError(t, lease.Release(t.Context()))
			}
			counts := s.take()
			deletes := counts["delete"]
			t.Logf("two tenures with renewals, value %q: %s", value, perUnit(counts, 1))
			assert.Greater(t, counts["acquire"]+counts["acquire+lock"]+counts["renew many"], 4, "renewals")
			if value != "" {
				assert.Equal(t, 2, counts["insert"], "writes of the value: one per tenure")
				assert.Zero(t, deletes, "clearings")
			} else {
				assert.Zero(t, counts["insert"], "writes of a value")
				assert.Equal(t, 1, deletes, "clearings: one per backend and mutex")
			}
		}
	})
}

// TestStartLooksForTheSideTablesInOneStatement: where CreateTable made every side table
// (values, slots, waits), Start finds them all with one statement, on both dialects.
func TestStartLooksForTheSideTablesInOneStatement(t *testing.T) {
	eachCounted(t, func(t *testing.T, b *jdbc.Backend, s *statements, _ func(*statements) *jdbc.Backend) {
		c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutexName(t), ContenderID: "a", TTL: time.Second,
			Transition: time.Second, Wake: func() {}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.StopContend(context.Background()) })
		_, slots := c.(backend.SlotRecorder)
		_, handOffs := c.(backend.HandOffer)
		assert.True(t, slots && handOffs, "the contention records slots and hands off")
		looks := 0
		for kind, n := range s.take() {
			if strings.Contains(kind, "COUNT(*) FROM (SELECT") {
				looks += n
			}
		}
		assert.Equal(t, 1, looks, "statements that look for side tables")
	})
}

// TestOwnerValueFromTheTenuresFirstRead: a contender with a value takes the mutex again
// and again while another process reads it; every read that names the contender shows its
// value: the value is written ahead of the acquisition that begins the tenure, not after.
func TestOwnerValueFromTheTenuresFirstRead(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		l, err := simba.NewLocker(s.backend(t), mutex, simba.WithContenderID("a"), simba.WithOwnerValue("v"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		reader := s.backend(t)
		ctx, cancel := context.WithCancel(t.Context())
		var named, without atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				o, err := simba.Lookup(ctx, reader, mutex)
				if err != nil || o.ID != "a" {
					continue
				}
				named.Add(1)
				if o.Value != "v" {
					without.Add(1)
				}
			}
		}()
		// 100 tenures at least, and on until a read named the contender: on a loaded
		// machine the reader's first lookup, which checks the tables, outlasted 100.
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; (i < 100 || named.Load() == 0) && time.Now().Before(deadline); i++ {
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)
			require.NoError(t, lease.Release(t.Context()))
		}
		cancel()
		<-done
		t.Logf("%d reads named the contender", named.Load())
		assert.Positive(t, named.Load(), "reads that named the contender")
		assert.Zero(t, without.Load(), "reads that named the contender without its value, of %d", named.Load())
	})
}

// awaitRenewals waits until the store has seen n more renewal statements, failing the test
// if lease ends first or they take over 30s.
func awaitRenewals(t *testing.T, s *statements, lease *simba.Lease, n int) {
	t.Helper()
	renewals := func() int { return s.count("acquire") + s.count("renew many") }
	want := renewals() + n
	deadline := time.After(30 * time.Second)
	for renewals() < want {
		select {
		case <-lease.Done():
			t.Fatal("the lease ended")
		case <-deadline:
			t.Fatalf("%d renewals within 30s, want %d", renewals()-want+n, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
