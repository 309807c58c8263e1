package jdbc_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/tck"
)

// TestPostgresConformance runs the conformance suite on the real PostgreSQL, each backend
// on a pool of its own; afterwards no row still has a live owner and every connection of
// the suite's pools is closed on the server. Each pool connects before the suite uses it,
// as an application's pool would have: PostgreSQL starts a process for every connection
// (about 20 ms of the server's CPU on an idle machine, against 1 ms for MariaDB), and on
// a loaded two-core machine a connection sometimes takes more than the suite's 250 ms
// call timeout (TestPostgresStartFailsFast checks Start on a cold pool). pgx closes a
// connection whose call timed out, so the next call connects again: the suite's times are
// doubled here, or one slow connection leads to the next.
func TestPostgresConformance(t *testing.T) {
	needPostgres(t)
	tck.Run(t, func(t *testing.T) simba.Backend {
		db := openPG(t)
		require.NoError(t, db.PingContext(t.Context()))
		b, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, tck.WithTimeScale(2))
	db := openPG(t)
	noResidue(t, func() []storedRow { return pgRows(t, db, "simba_mutex", "tck-") }, func() int { return pgConns(t, db) })
}
