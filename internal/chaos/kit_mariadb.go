package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	_ "github.com/go-sql-driver/mysql" // the database/sql driver of the MariaDB kit

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

func init() {
	register(Kit{
		Name:      "mariadb",
		Letter:    "M",
		HoldsPoll: true,
		// A commit's log is written, not flushed, as PostgreSQL's kit runs: a crash of the
		// server loses nothing that reached it (the kernel has it), and the machine is
		// shared.
		Server: func(dir string) (ServerProcess, error) {
			return testserver.NewMariaDB(dir, "--innodb-flush-log-at-trx-commit=2")
		},
		Backend: func(ctx context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
			db, err := sql.Open("mysql", mariadbDSN(cfg.Addr))
			if err != nil {
				return nil, nil, err
			}
			if err := jdbc.CreateTable(ctx, db); err != nil {
				_ = db.Close()
				return nil, nil, err
			}
			b, err := jdbc.New(db)
			if err != nil {
				_ = db.Close()
				return nil, nil, err
			}
			return b, func() { _ = b.Close(); _ = db.Close() }, nil
		},
		Residue: rowResidue("mariadb", mariadbOwner),
		Owner:   mariadbOwner,
	})
}

// mariadbDSN is the DSN of the test user through addr (a contender's proxy); the driver's
// own timeouts are a backstop behind simba's contexts.
func mariadbDSN(addr string) string {
	return "simba:simba@tcp(" + addr + ")/simba?interpolateParams=true&timeout=5s&readTimeout=10s&writeTimeout=10s"
}

// rowResidue returns the Residue of an SQL kit, whose owner function reads the row: a row
// that still names an owner whose lease has not lapsed.
func rowResidue(store string, owner func(ctx context.Context, addr, mutex string) (string, error)) func(ctx context.Context, addr, mutex string, excused []string) error {
	return func(ctx context.Context, addr, mutex string, excused []string) error {
		o, err := owner(ctx, addr, mutex)
		if err != nil || o == "" || slices.Contains(excused, o) { // an excused owner's lease lapses by itself
			return err
		}
		return fmt.Errorf("%s: the row of %q still names %q", store, mutex, o)
	}
}

// mariadbOwner returns the owner the row of mutex names while its lease lasts.
func mariadbOwner(ctx context.Context, addr, mutex string) (string, error) {
	db, err := sql.Open("mysql", mariadbDSN(addr))
	if err != nil {
		return "", err
	}
	defer db.Close()
	var owner string
	err = db.QueryRowContext(ctx, "SELECT owner_id FROM simba_mutex WHERE mutex = ? AND transition_at > "+
		"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)", mutex).Scan(&owner)
	switch {
	case err == sql.ErrNoRows:
		return "", nil
	case err != nil && strings.Contains(err.Error(), "doesn't exist"):
		return "", nil
	}
	return owner, err
}
