package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend/jdbc"
)

// Stores is one server of each store simba supports (Redis, MariaDB, PostgreSQL,
// ZooKeeper and, once StartEtcd has run, etcd), for the tests of what takes a store URL
// (storeurl, cmd/simba). The servers start in parallel.
type Stores struct {
	Redis     *Server
	MariaDB   *MariaDB
	Postgres  *Postgres
	ZooKeeper *Server
	Etcd      *Server // nil until StartEtcd: only what registers etcd:// (etcdurl) opens it
	dir       string
}

// StartStores starts the four servers, each in a directory of its own under a new
// temporary directory (short: MariaDB's socket path is limited). On error, what started is
// stopped again.
func StartStores(ctx context.Context) (*Stores, error) {
	dir, err := os.MkdirTemp("", "sst-")
	if err != nil {
		return nil, err
	}
	s := &Stores{dir: dir}
	if s.Redis, err = Redis(filepath.Join(dir, "r")); err == nil {
		if s.MariaDB, err = NewMariaDB(filepath.Join(dir, "m")); err == nil {
			if s.Postgres, err = NewPostgres(filepath.Join(dir, "p")); err == nil {
				s.ZooKeeper, err = ZooKeeper(filepath.Join(dir, "z"), ZooKeeperOptions{})
			}
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	starts := []interface{ Start(context.Context) error }{s.Redis, s.MariaDB, s.Postgres, s.ZooKeeper}
	errs := make(chan error, len(starts))
	for _, srv := range starts {
		go func() { errs <- srv.Start(ctx) }()
	}
	var all []error
	for range starts {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// URLs returns a store URL for each server, by scheme: "redis", "mysql" and "postgres"
// (the database simba, user simba), "zk" and, once started, "etcd".
func (s *Stores) URLs() map[string]string {
	urls := map[string]string{
		"redis":    "redis://" + s.Redis.Addr(),
		"mysql":    fmt.Sprintf("mysql://simba:simba@%s/simba", s.MariaDB.Addr()),
		"postgres": s.Postgres.DSN(),
		"zk":       "zk://" + s.ZooKeeper.Addr(),
	}
	if s.Etcd != nil {
		urls["etcd"] = "etcd://" + s.Etcd.Addr()
	}
	return urls
}

// StartEtcd starts a single-member etcd beside the other servers, for the tests of what
// opens etcd:// URLs.
func (s *Stores) StartEtcd(ctx context.Context) error {
	e, err := Etcd(filepath.Join(s.dir, "e"), EtcdOptions{})
	if err != nil {
		return err
	}
	s.Etcd = e
	return e.Start(ctx)
}

// CreateTables creates simba's table in the database simba of the MariaDB and of the
// PostgreSQL, owned by (PostgreSQL) or open to (MariaDB) the user simba.
func (s *Stores) CreateTables(ctx context.Context) error {
	mysqlDDL, err := jdbc.DDL()
	if err != nil {
		return err
	}
	pgDDL, err := jdbc.DDL(jdbc.WithDialect(jdbc.Postgres))
	if err != nil {
		return err
	}
	if err := s.MariaDB.Exec(ctx, "USE simba;\n"+mysqlDDL); err != nil {
		return err
	}
	return s.Postgres.Exec(ctx, "SET ROLE simba;\n"+pgDDL)
}

// Stop stops the servers that run and removes their directories.
func (s *Stores) Stop() {
	for _, srv := range []*Server{s.Redis, s.ZooKeeper, s.Etcd} {
		if srv != nil && srv.PID() != 0 {
			_ = srv.Stop()
		}
	}
	if s.MariaDB != nil && s.MariaDB.PID() != 0 {
		_ = s.MariaDB.Stop()
	}
	if s.Postgres != nil && s.Postgres.PID() != 0 {
		_ = s.Postgres.Stop()
	}
	_ = os.RemoveAll(s.dir)
}

// RunWithStores is a TestMain for packages whose tests need the four stores: it starts
// them, lets prepare set them up (for example, create simba's SQL table), runs the tests,
// stops the stores and then checks for leaked goroutines. It returns the exit code. The
// stores, or the error that kept them from starting, are handed to set before the tests
// run; tests report that error with Need.
func RunWithStores(m *testing.M, prepare func(context.Context, *Stores) error, set func(*Stores, error)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := StartStores(ctx)
	if err == nil {
		err = prepare(ctx, s)
	}
	cancel()
	set(s, err)
	code := m.Run()
	if s != nil {
		s.Stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
