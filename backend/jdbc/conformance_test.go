package jdbc_test

import (
	"database/sql"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/tck"
)

// TestConformance runs the conformance suite on the real MariaDB. Every backend the suite
// asks for has a pool of its own, as if each contender ran in a process of its own.
func TestConformance(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newBackend(t)
	}, mariadbScale)

	db := openDB(t)
	noResidue(t, func() []storedRow { return readRows(t, db, "simba_mutex", "tck-") }, func() int { return openConns(t, db) })
}

// noResidue checks that nothing is left owning a row once the suite's leases have lapsed
// (owners that vanished on purpose could not release theirs), and that the server has no
// connection of the suite's pools left.
func noResidue(t *testing.T, rows func() []storedRow, conns func() int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, r := range rows() {
			if r.Owner != "" && r.Live {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "a tck row still has a live owner")
	require.Eventually(t, func() bool { return conns() == 0 }, 10*time.Second, 50*time.Millisecond,
		"connections of the suite's pools still open on the server")
}

// TestConformanceInADaylightSavingZone runs the conformance suite with the sessions in a
// time zone with daylight saving time: the statements that read the clock are those that
// work out JVM Simba's clock in a fold (see doc.go, Clock).
func TestConformanceInADaylightSavingZone(t *testing.T) {
	loadBerlin(t)
	tck.Run(t, func(t *testing.T) simba.Backend {
		b, err := jdbc.New(openDB(t, "time_zone="+url.QueryEscape("'Europe/Berlin'")))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, mariadbScale)
}

// mariadbScale doubles the suite's times on MariaDB, as on PostgreSQL: a semaphore's or
// read-write lock's release waits for the row locks of a decision under way, a DELETE
// queued behind deciders' transactions. On a loaded CI machine such releases timed out
// at the suite's 250ms call timeout, and again at 375ms (1.5 times) and at 500ms while
// the test server still flushed every commit to the disk (see needServer).
var mariadbScale = tck.WithTimeScale(2)

// openConns returns how many connections the server has for the simba user besides db's.
func openConns(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(),
		"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'simba' AND ID <> CONNECTION_ID()").Scan(&n))
	return n
}
