package chaos

import (
	"context"
	"database/sql"
	"errors"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver of the PostgreSQL kit

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

func init() {
	register(Kit{
		Name:      "postgres",
		Letter:    "P",
		HoldsPoll: true,
		// Each connection is a server process: about 20 ms of the server's CPU to start on
		// an idle machine, and pgx closes a connection whose call timed out, so the next
		// call connects again. On a loaded two-core machine that took longer than the 250
		// ms call timeout again and again (a hand-over 2 s late after a graceful stop).
		Scale: 2,
		// Commits are not flushed: the scenarios crash the server, which loses nothing
		// that reached it (the kernel has it), and the machine is shared.
		Server: func(dir string) (ServerProcess, error) {
			return testserver.NewPostgres(dir, "-c", "fsync=off")
		},
		Backend: func(ctx context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
			db, err := sql.Open("pgx", postgresDSN(cfg.Addr))
			if err != nil {
				return nil, nil, err
			}
			if err := jdbc.CreateTable(ctx, db, jdbcOptions("postgres")...); err != nil {
				_ = db.Close()
				return nil, nil, err
			}
			b, err := jdbc.New(db, jdbcOptions("postgres")...)
			if err != nil {
				_ = db.Close()
				return nil, nil, err
			}
			return b, func() { _ = b.Close(); _ = db.Close() }, nil
		},
		Residue: rowResidue("postgres", postgresOwner),
		Owner:   postgresOwner,
		// The short run (make test) runs the scenarios that exercise what is PostgreSQL's
		// own: the advisory-lock hand-over (2, 7), a silent partition (11), the server's
		// crash (19a) and a row lock that only lock_timeout bounds on the server (20b),
		// and Start's checks (25). make chaos runs every scenario.
		Short: []string{"02_graceful_handover", "07_kill_owner", "11_owner_cut_off", "19_crash_short", "20_row_lock", "25_unreachable_at_start"},
	})
}

// postgresDSN is the DSN of the test role through addr (a contender's proxy); pgx's
// connect timeout is a backstop behind simba's contexts.
func postgresDSN(addr string) string {
	return "postgres://simba:simba@" + addr + "/simba?sslmode=disable&connect_timeout=5"
}

// postgresOwner returns the owner the row of mutex names while its lease lasts.
func postgresOwner(ctx context.Context, addr, mutex string) (string, error) {
	db, err := sql.Open("pgx", postgresDSN(addr))
	if err != nil {
		return "", err
	}
	defer db.Close()
	var owner string
	err = db.QueryRowContext(ctx, "SELECT owner_id FROM simba_mutex WHERE mutex = $1 AND transition_at > "+
		"(floor(extract(epoch FROM statement_timestamp()) * 1000))::bigint", mutex).Scan(&owner)
	switch {
	case err == sql.ErrNoRows:
		return "", nil
	case err != nil && to42P01(err):
		return "", nil // no table yet
	}
	return owner, err
}

// to42P01 reports whether err is PostgreSQL's undefined_table.
func to42P01(err error) bool {
	var e interface{ SQLState() string }
	return errors.As(err, &e) && e.SQLState() == "42P01"
}

// jdbcOptions returns the jdbc options of an SQL store's kit: its dialect.
func jdbcOptions(store string) []jdbc.Option {
	if store == "postgres" {
		return []jdbc.Option{jdbc.WithDialect(jdbc.Postgres)}
	}
	return nil
}
