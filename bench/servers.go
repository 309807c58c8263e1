package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// zkTick is the tick of the ZooKeeper the benchmark starts: sessions may then last from
// 2 to 20 ticks, which allows zkSession.
const zkTick = 200 * time.Millisecond

// zkSession is the session timeout every ZooKeeper client of the benchmark asks for,
// simba's and zk.Lock's alike. It is the lease of a ZooKeeper owner: what a crashed owner
// costs.
const zkSession = 3 * time.Second

// endpoints says where the stores of a run listen. A holder process gets it from its
// parent, in the environment.
type endpoints struct {
	Redis     string `json:"redis"`     // host:port
	DSN       string `json:"dsn"`       // go-sql-driver DSN of the simba database
	PgDSN     string `json:"pgdsn"`     // pgx DSN of the simba database on PostgreSQL
	ZooKeeper string `json:"zookeeper"` // host:port
	Etcd      string `json:"etcd"`      // host:port of the member's client URL
}

// servers are the stores of one run, started on free loopback ports with private
// directories (or reused, when given on the command line), and stopped at the end.
type servers struct {
	endpoints
	dir     string
	started []*testserver.Server
	// Versions of the servers, as they report them.
	redisVersion, mariaVersion, pgVersion, zkVersion, etcdVersion string
}

// startServers starts what stores need and is not given. reuse holds the endpoints passed
// on the command line; empty fields are started here.
func startServers(ctx context.Context, need map[string]bool, reuse endpoints) (*servers, error) {
	dir, err := os.MkdirTemp("", "sb-")
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	s := &servers{endpoints: reuse, dir: dir}
	ok := false
	defer func() {
		if !ok {
			s.stop()
		}
	}()
	if need[storeRedis] && s.Redis == "" {
		srv, err := testserver.Redis(filepath.Join(dir, "redis"))
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		if err := s.start(ctx, srv); err != nil {
			return nil, err
		}
		s.Redis = srv.Addr()
	}
	if need[storeSQL] && s.DSN == "" {
		m, err := testserver.NewMariaDB(filepath.Join(dir, "my"))
		if err != nil {
			return nil, fmt.Errorf("mariadb: %w", err)
		}
		if err := s.start(ctx, m.Server); err != nil {
			return nil, err
		}
		s.DSN = m.DSN()
	}
	if need[storePostgres] && s.PgDSN == "" {
		// pg_stat_statements counts the statements the figures report per operation.
		p, err := testserver.NewPostgres(filepath.Join(dir, "pg"), "-c", "shared_preload_libraries=pg_stat_statements")
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if err := s.start(ctx, p.Server); err != nil {
			return nil, err
		}
		if err := p.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		s.PgDSN = p.DSN()
	}
	if need[storeZooKeeper] && s.ZooKeeper == "" {
		srv, err := testserver.ZooKeeper(filepath.Join(dir, "zk"), testserver.ZooKeeperOptions{TickTime: zkTick})
		if err != nil {
			return nil, fmt.Errorf("zookeeper: %w", err)
		}
		if err := s.start(ctx, srv); err != nil {
			return nil, err
		}
		s.ZooKeeper = srv.Addr()
	}
	if need[storeEtcd] && s.Etcd == "" {
		srv, err := testserver.Etcd(filepath.Join(dir, "etcd"), testserver.EtcdOptions{})
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		if err := s.start(ctx, srv); err != nil {
			return nil, err
		}
		s.Etcd = srv.Addr()
	}
	if err := s.prepare(ctx, need); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *servers) start(ctx context.Context, srv *testserver.Server) error {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := srv.Start(sctx); err != nil {
		return fmt.Errorf("start %s: %w", srv.Name, err)
	}
	s.started = append(s.started, srv)
	return nil
}

// stop stops the servers this run started, by the PIDs it started, and removes their
// directories.
func (s *servers) stop() {
	for i := len(s.started) - 1; i >= 0; i-- {
		_ = s.started[i].Stop()
	}
	s.started = nil
	_ = os.RemoveAll(s.dir)
}

// prepare creates simba's table, warms the ZooKeeper JVM up and reads the versions.
func (s *servers) prepare(ctx context.Context, need map[string]bool) error {
	if need[storeRedis] {
		c := newRedisClient(s.Redis)
		defer c.Close()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		s.redisVersion = infoField(info, "redis_version")
	}
	if need[storeSQL] {
		db, err := sql.Open("mysql", s.DSN)
		if err != nil {
			return fmt.Errorf("mariadb: %w", err)
		}
		defer db.Close()
		if err := jdbc.CreateTable(ctx, db); err != nil {
			return fmt.Errorf("mariadb: create simba's table: %w", err)
		}
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&s.mariaVersion); err != nil {
			return fmt.Errorf("mariadb: %w", err)
		}
	}
	if need[storePostgres] {
		db, err := sql.Open("pgx", s.PgDSN)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer db.Close()
		if err := jdbc.CreateTable(ctx, db, jdbc.WithDialect(jdbc.Postgres)); err != nil {
			return fmt.Errorf("postgres: create simba's table: %w", err)
		}
		if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&s.pgVersion); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	if need[storeZooKeeper] {
		answer, err := fourLetter(ctx, s.ZooKeeper, "srvr")
		if err != nil {
			return fmt.Errorf("zookeeper: %w", err)
		}
		// "3.8.0-${mvngit.commit.id}, built on ..." in Debian's build: keep the release.
		v := infoField(answer, "Zookeeper version")
		v, _, _ = strings.Cut(v, ",")
		v, _, _ = strings.Cut(v, "-")
		s.zkVersion = strings.TrimSpace(v)
		if err := warmZooKeeper(ctx, s.ZooKeeper, 3000); err != nil {
			return fmt.Errorf("zookeeper warm-up: %w", err)
		}
	}
	if need[storeEtcd] {
		v, err := etcdVersion(ctx, s.Etcd)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		s.etcdVersion = v
	}
	return nil
}

// infoField returns the value of "name:value" in a line-oriented answer (Redis INFO,
// ZooKeeper srvr).
func infoField(text, name string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// newRedisClient returns a go-redis client for addr with what Redis 7.0 and simba need:
// no CLIENT SETINFO or maintenance notifications in the handshake (7.0 does not know
// them), and context deadlines applied to the socket.
func newRedisClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ContextTimeoutEnabled:    true,
	})
}

// zkConnect opens a ZooKeeper connection that asks for zkSession, with go-zookeeper's
// own logging off; events, when not nil, receives the connection's events.
func zkConnect(addr string, events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
	if events == nil {
		return zk.Connect([]string{addr}, zkSession, zk.WithLogger(quiet{}))
	}
	return zk.Connect([]string{addr}, zkSession, zk.WithLogger(quiet{}), zk.WithEventCallback(events))
}

// quiet discards go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// warmZooKeeper runs n create, list, read and delete cycles so that the JVM has compiled
// the request path before anything is timed.
func warmZooKeeper(ctx context.Context, addr string, n int) error {
	conn, _, err := zkConnect(addr, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	const parent = "/bench-warmup"
	if _, err := conn.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := conn.Create(parent+"/_c_x-latch-", []byte("w"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if err != nil {
			return err
		}
		if _, _, err := conn.Children(parent); err != nil {
			return err
		}
		if _, _, _, err := conn.GetW(p); err != nil {
			return err
		}
		if err := conn.Delete(p, -1); err != nil {
			return err
		}
	}
	return nil
}

// fourLetter sends a ZooKeeper four-letter command and returns the answer.
func fourLetter(ctx context.Context, addr, cmd string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// zkWatches returns the paths that a session watches, from the wchc command.
func zkWatches(ctx context.Context, addr string, session int64) ([]string, error) {
	answer, err := fourLetter(ctx, addr, "wchc")
	if err != nil {
		return nil, err
	}
	var out []string
	mine := false
	want := fmt.Sprintf("0x%x", session)
	for _, line := range strings.Split(answer, "\n") {
		if !strings.HasPrefix(line, "\t") {
			mine = strings.TrimSpace(line) == want
			continue
		}
		if mine {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out, nil
}
