package jdbc_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// TestPostgresConformance runs the conformance suite on the real PostgreSQL, each backend
// on a pool of its own; afterwards no row still has a live owner and every connection of
// the suite's pools is closed on the server. Its times are doubled: every backend's first
// call opens its pool's first connection, for which PostgreSQL starts a process, and on a
// loaded two-core machine that sometimes takes more than the 250 ms call timeout.
func TestPostgresConformance(t *testing.T) {
	needPostgres(t)
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newPGBackend(t)
	}, tck.WithTimeScale(2))
	db := openPG(t)
	noResidue(t, func() []storedRow { return pgRows(t, db, "simba_mutex", "tck-") }, func() int { return pgConns(t, db) })
}
