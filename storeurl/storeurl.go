// Package storeurl opens a simba.Backend from one URL, with the client it dials for it,
// for tools and configuration files that name a store by a string (cmd/simba does). It
// also does what a store's administrator asks of it: list the mutexes the store holds
// records for, release a mutex whatever its owner, list the holders of semaphores and
// read-write locks and release one of them (Holders, ReleaseHolder), and create the SQL
// tables.
//
// The URL schemes:
//
//	redis://[user:password@]host:port[/db][?option=value...]
//	rediss://...                                   (TLS)
//	redis-sentinel://[user:password@]sentinel:port[/db]?master_name=name[&addr=sentinel2:port...]
//	mysql://user:password@host:port/database[?table=simba_mutex&param=value...]
//	mariadb://...                                  (the same as mysql://)
//	postgres://user:password@host:port/database[?table=simba_mutex&param=value...]
//	postgresql://...                               (the same as postgres://)
//	zk://host:port[,host:port...][?session_timeout=10s]
//	etcd://host:port[,host:port...][/prefix][?option=value...]   (registered by etcdurl)
//
// Redis URLs take go-redis's options as query parameters (redis.ParseURL); a
// redis-sentinel URL is go-redis's failover URL (redis.ParseFailoverURL) with the
// sentinels' credentials in the user info and the master's in the "username" and
// "password" parameters. The client applies context deadlines to its sockets
// (go-redis's ContextTimeoutEnabled), so that a call returns by its context's deadline.
// A mysql URL becomes a go-sql-driver DSN over TCP with interpolateParams=true (one round
// trip per statement) unless the URL says otherwise; "table" names simba's table. A
// postgres URL is pgx's connection URL (its parameters, sslmode for one, as pgx takes
// them), opened through pgx's database/sql driver with the Postgres dialect; "table" names
// simba's table, "schema.table" a schema's. zk URLs list the ensemble; session_timeout is
// a whole number of milliseconds from 100ms (the server grants at least 2 × its tickTime,
// 4 s by default); a chroot path and credentials are not supported.
//
// Other schemes are opened by the package that registers them (Register), so that this
// module does not depend on their clients: etcd:// by
// github.com/simba-go/simba/backend/etcd/etcdurl, once its Register has been called.
//
// Open parses every parameter as the client would (pgx's and go-sql-driver's parsers
// included), so that a malformed one fails there, not at the first connection.
//
// go-redis writes some failures of its own (a pool's failed dials, a sentinel's change of
// master) to standard error through a logger global to the process (redis.SetLogger),
// outside any slog.Logger. It has no logger per client, and a library must not replace the
// process's: a Store leaves it as the application set it. An application that wants those
// lines in slog sets RedisLogger once at start-up; the zero RedisLogger drops them:
//
//	goredis.SetLogger(storeurl.RedisLogger{Logger: logger})
//
// Unlike simba's backends, which never dial and never close a client they are given,
// a Store dials its client itself and owns it: Close closes the backend and the client.
//
// List, Release, Holders, ReleaseHolder and CreateTable return by their context's deadline
// whatever the server does; a call the server has not answered by then goes on in the
// background until the server answers, the client gives up, or Close closes the client,
// and Close waits for it. A call that Close ends (one waiting for a ZooKeeper session
// among them), and every call after Close, fails with an error matching simba.ErrClosed.
package storeurl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/await"
)

// Store is a backend opened from a URL, with the client it dialed. It is safe for
// concurrent use.
type Store struct {
	url     string // the URL without its password, for messages
	backend simba.Backend
	closers []func() error // the backend's first, then the client's

	list        func(ctx context.Context) ([]string, error)
	release     func(ctx context.Context, mutex string, o simba.Owner) error
	ready       func(ctx context.Context) error // nil, or waits for what List and Release need (a ZooKeeper session)
	createTable func(ctx context.Context) error // nil but on SQL
	holds       holds                           // Holders and ReleaseHolder; zero where the store lists none

	// The client, by scheme.
	redis  goredis.UniversalClient
	db     *sql.DB
	zkConn *zk.Conn
	client any // a registered scheme's

	mu      sync.Mutex
	closed  bool
	closing chan struct{}  // closed when Close begins: ends what waits without the client (a session wait)
	calls   sync.WaitGroup // List and Release calls, which may outlive their caller's deadline; joined by Close
}

// Open returns the store the URL names. It dials nothing before the first store call
// (a ZooKeeper connection starts establishing its session in the background). Errors
// for a malformed URL wrap simba.ErrInvalidArgument and never show the password.
func Open(rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, simba.InvalidArgument("store URL", redact(rawURL), "must be a URL")
	}
	s := &Store{url: u.Redacted(), closing: make(chan struct{})}
	switch u.Scheme {
	case "redis", "rediss":
		opts, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, s.invalid(err)
		}
		opts.ContextTimeoutEnabled = true
		err = s.openRedis(goredis.NewClient(opts))
		return s.opened(err)
	case "redis-sentinel", "rediss-sentinel":
		v := *u
		v.Scheme = strings.TrimSuffix(u.Scheme, "-sentinel")
		opts, err := goredis.ParseFailoverURL(v.String())
		if err != nil {
			return nil, s.invalid(err)
		}
		if opts.MasterName == "" {
			return nil, simba.InvalidArgument("store URL", s.url, "a redis-sentinel URL needs master_name")
		}
		opts.ContextTimeoutEnabled = true
		return s.opened(s.openRedis(goredis.NewFailoverClient(opts)))
	case "mysql", "mariadb":
		cfg, table, err := mysqlConfig(u)
		if err != nil {
			return nil, s.invalid(err)
		}
		db, err := mysqlDB(cfg)
		if err != nil {
			return nil, s.invalid(err)
		}
		return s.opened(s.openSQL(db, table, mysqlSQL))
	case "postgres", "postgresql":
		cfg, table, err := postgresConfig(u)
		if err != nil {
			return nil, s.invalid(err)
		}
		return s.opened(s.openSQL(stdlib.OpenDB(*cfg), table, postgresSQL, jdbc.WithDialect(jdbc.Postgres)))
	case "zk", "zookeeper":
		servers, timeout, err := zkServers(u)
		if err != nil {
			return nil, s.invalid(err)
		}
		return s.opened(s.openZooKeeper(servers, timeout))
	}
	if open, ok := registered(u.Scheme); ok {
		return s.opened(s.openRegistered(open, u))
	}
	return nil, simba.InvalidArgument("store URL scheme", u.Scheme,
		"must be redis, rediss, redis-sentinel, mysql, mariadb, postgres, zk or a registered scheme (etcd: see etcdurl.Register)")
}

// opened returns s, or closes what was opened and returns err.
func (s *Store) opened(err error) (*Store, error) {
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	if r, ok := s.backend.(ownerReleaser); ok {
		s.release = r.ReleaseOwner
	}
	return s, nil
}

// ownerReleaser is a backend that releases a mutex in the name of the tenure a lookup
// found, only while that tenure holds it.
type ownerReleaser interface {
	ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error
}

func (s *Store) invalid(err error) error {
	return simba.InvalidArgument("store URL", s.url, strings.ReplaceAll(err.Error(), "\n", "; "))
}

// Backend returns the backend, for services, Lockers, Lookup and the like.
func (s *Store) Backend() simba.Backend { return s.backend }

// RedisClient returns the client of a redis, rediss or redis-sentinel URL, nil for other
// schemes, for a service that shares it. The Store owns it: do not close it.
func (s *Store) RedisClient() goredis.UniversalClient { return s.redis }

// DB returns the pool of a mysql or postgres URL, nil for other schemes, for a service
// that shares it or sizes it (backend/jdbc says what the backend holds of it). The Store
// owns it: do not close it.
func (s *Store) DB() *sql.DB { return s.db }

// ZooKeeperConn returns the connection of a zk URL, nil for other schemes, for a service
// that shares its session (the nodes it creates live as long as the backend's session).
// The Store owns it, and its backend reads its events: do not close it.
func (s *Store) ZooKeeperConn() *zk.Conn { return s.zkConn }

// CreateTable creates simba's table that a mysql or postgres URL names if it is missing,
// and checks it as the backend's Start does (jdbc.CreateTable): for an application that
// does not run migrations of its own. On other stores, which need nothing created, it does
// nothing.
func (s *Store) CreateTable(ctx context.Context) error {
	if s.createTable == nil {
		return nil
	}
	if err := s.bounded(ctx, func() error { return s.createTable(ctx) }); err != nil {
		return fmt.Errorf("storeurl: create table on %s: %w", s.url, err)
	}
	return nil
}

// String returns the URL without its password.
func (s *Store) String() string { return s.url }

// Close closes the backend and then the client the store dialed. Stop the services that
// use the backend first. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	closers := s.closers
	if !s.closed {
		close(s.closing)
	}
	s.closers, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	s.calls.Wait() // closing the client has ended the calls still waiting for the server
	return errors.Join(errs...)
}

// bounded runs f, a call of the store's client, once the store is ready, and returns its
// error, or ctx's error when ctx ends first: f then goes on in the background, and Close
// waits for it. On a closed store, or one closed under the call, it fails with an error
// matching simba.ErrClosed.
func (s *Store) bounded(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return simba.ErrClosed
	}
	s.calls.Go(func() { // under s.mu: never after Close has begun to wait
		if s.ready != nil {
			if err := s.ready(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- s.closedUnder(f())
	})
	s.mu.Unlock()
	if err, ok := await.Answer(ctx, done); ok {
		return err // a client that honours ctx says what it was waiting for
	}
	return fmt.Errorf("no answer from the server: %w", ctx.Err())
}

// closedUnder returns err, marked with simba.ErrClosed when Close has begun: the client
// closed under the call is why it failed.
func (s *Store) closedUnder(err error) error {
	if err == nil || errors.Is(err, simba.ErrClosed) {
		return err
	}
	select {
	case <-s.closing:
		return fmt.Errorf("%w: %w", simba.ErrClosed, err)
	default:
		return err
	}
}

// List returns the names of the mutexes the store holds records for, sorted: on Redis
// those with an owner (an owner key simba:{name}), in SQL every row of the table, in
// ZooKeeper every child of /simba (a mutex whose contenders have all gone may stay listed
// until ZooKeeper reaps its container node), and for a registered scheme what its Opener's
// List returns (etcd: the mutexes that have contenders' keys).
func (s *Store) List(ctx context.Context) ([]string, error) {
	var names []string
	err := s.bounded(ctx, func() (err error) {
		names, err = s.list(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storeurl: list %s: %w", s.url, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Release releases mutex on the store in the name of its owner o, as simba.Lookup found it,
// whatever that owner is doing: an administrator's tool for an owner that is stuck. It
// does nothing when o is the zero Owner, or when o no longer owns the mutex (another
// tenure has begun since the lookup). It does not stop the owner: the owner goes on
// believing until its next renewal tells it otherwise, up to a TTL later, while another
// contender may acquire at once. Only a fencing token protects the resource then: the
// next owner's token is greater, and a resource that checks tokens refuses the old
// owner's writes; one that does not may see both write.
//
// A backend's ReleaseOwner does the release where the backend has one (etcd's deletes the
// owner's key if its create revision is still o's token). Without it: on Redis and SQL the
// release is the owner's own release, made in its name, which frees the mutex if o's
// contender ID owns it, even in a tenure begun after the lookup; on ZooKeeper it deletes
// the owner's node if it is still the node of o's tenure.
func (s *Store) Release(ctx context.Context, mutex string, o simba.Owner) error {
	if o.IsZero() {
		return nil
	}
	if err := simba.ValidateMutex(mutex); err != nil {
		return err
	}
	if err := s.bounded(ctx, func() error { return s.release(ctx, mutex, o) }); err != nil {
		return fmt.Errorf("storeurl: release %q on %s: %w", mutex, s.url, err)
	}
	return nil
}

// releaseAs releases mutex on a lease store in the name of owner o: through a contention
// of o's ID, whose Release frees the mutex only if o owns it. Redis's release checks the
// owner on the server; a SQL contention releases only what it knows it owns, so with
// claim it first makes an acquire call in o's name, which renews o's tenure if o still
// owns the mutex (and takes it if it is free: released at once, the same outcome).
func (s *Store) releaseAs(ctx context.Context, mutex string, o simba.Owner, claim bool) error {
	c, err := s.backend.StartContend(ctx, backend.Participant{
		Mutex: mutex, ContenderID: o.ID, TTL: simba.DefaultTTL, Transition: simba.DefaultTransition,
		Logger: discard, Wake: func() {}, Report: func(backend.Record, time.Time) {}, Grant: func(backend.Record, time.Time) {},
	})
	if err != nil {
		return err
	}
	lc, ok := c.(backend.LeaseContention)
	if !ok {
		_ = c.StopContend(ctx)
		return errors.New("not a lease store")
	}
	if claim {
		rec, err := lc.Acquire(ctx)
		if err == nil && rec.Owner != o.ID {
			return c.StopContend(ctx) // owned by another tenure meanwhile: not the one looked up
		}
		if err != nil {
			return errors.Join(err, lc.Release(ctx), c.StopContend(context.WithoutCancel(ctx)))
		}
	}
	err = lc.Release(ctx)
	return errors.Join(err, c.StopContend(context.WithoutCancel(ctx)))
}

// openRedis opens the Redis backend on client.
func (s *Store) openRedis(client goredis.UniversalClient) error {
	s.redis = client
	s.closers = append(s.closers, client.Close)
	b, err := redis.New(client)
	if err != nil {
		return err
	}
	s.backend = b
	s.closers = append([]func() error{b.Close}, s.closers...)
	s.list = func(ctx context.Context) ([]string, error) {
		var names []string
		iter := client.Scan(ctx, 0, "simba:{*}", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			if name, ok := strings.CutPrefix(key, "simba:{"); ok && strings.HasSuffix(name, "}") {
				names = append(names, strings.TrimSuffix(name, "}"))
			}
		}
		return names, iter.Err()
	}
	s.release = func(ctx context.Context, mutex string, o simba.Owner) error {
		return s.releaseAs(ctx, mutex, o, false)
	}
	s.holds = redisHolds(client, b)
	return nil
}

// sqlDialect is what the statements of a Store tell apart in the SQL of a server.
type sqlDialect struct {
	quote   func(table string) string
	now     string // the database's clock in epoch ms, as backend/jdbc reads it
	dollars bool   // placeholders $1, $2, ... rather than ?
}

var (
	mysqlSQL    = sqlDialect{quote: quoteMySQL, now: "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"}
	postgresSQL = sqlDialect{quote: quotePostgres, now: "(floor(extract(epoch FROM statement_timestamp()) * 1000))::bigint", dollars: true}
)

// openSQL opens the SQL backend on db, a pool of its own, on the table that d quotes for
// the statements of List and Holders.
func (s *Store) openSQL(db *sql.DB, table string, d sqlDialect, opts ...jdbc.Option) error {
	quote := d.quote
	s.db = db
	s.closers = append(s.closers, db.Close)
	opts = append(opts, jdbc.WithTable(table))
	b, err := jdbc.New(db, opts...)
	if err != nil {
		return err
	}
	s.createTable = func(ctx context.Context) error { return jdbc.CreateTable(ctx, db, opts...) }
	s.backend = b
	s.closers = append([]func() error{b.Close}, s.closers...)
	// The row whose mutex is '' is the table's floor (see backend/jdbc), not a mutex.
	query := "SELECT mutex FROM " + quote(table) + " WHERE mutex <> ''" // table validated by jdbc.New
	s.list = func(ctx context.Context) ([]string, error) {
		rows, err := db.QueryContext(ctx, query)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return nil, err
			}
			names = append(names, name)
		}
		return names, rows.Err()
	}
	s.release = func(ctx context.Context, mutex string, o simba.Owner) error {
		return s.releaseAs(ctx, mutex, o, true)
	}
	s.holds = sqlHolds(db, quote(table+"_hold"), d.now, d.dollars) // the hold table's name: jdbc.HoldDDL's
	return nil
}

// quoteMySQL quotes "table" or "schema.table" for MySQL.
func quoteMySQL(t string) string { return quoteParts(t, "`") }

// quotePostgres quotes "table" or "schema.table" for PostgreSQL.
func quotePostgres(t string) string { return quoteParts(t, `"`) }

// quoteParts quotes each dot-separated part of t with q (jdbc.New has checked that the
// parts hold no quote).
func quoteParts(t, q string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// takeTable removes the table parameter from an SQL URL's query and returns the table it
// names, jdbc.DefaultTable without one.
func takeTable(q url.Values) string {
	t := q.Get("table")
	q.Del("table")
	if t == "" {
		return jdbc.DefaultTable
	}
	return t
}

// postgresConfig takes the table name out of a postgres:// URL, checks that the rest names
// one database, and parses it as pgx does (without connecting), so that every malformed
// parameter is found here rather than at the first connection.
func postgresConfig(u *url.URL) (cfg *pgx.ConnConfig, table string, err error) {
	q := u.Query()
	table = takeTable(q)
	if db := strings.TrimPrefix(u.Path, "/"); db == "" || strings.Contains(db, "/") {
		return nil, "", errors.New("the path must name one database")
	}
	if u.Host == "" {
		return nil, "", errors.New("the URL must name a host")
	}
	c := *u
	c.RawQuery = q.Encode()
	cfg, err = pgx.ParseConfig(c.String())
	if err != nil {
		// pgx's message repeats the URL (without its password) before what is wrong with it.
		msg := err.Error()
		if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			if _, why, ok := strings.Cut(rest, "`: "); ok {
				msg = why
			}
		}
		return nil, "", errors.New(msg)
	}
	return cfg, table, nil
}

// mysqlDB returns a pool on cfg; it connects nothing yet.
func mysqlDB(cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// mysqlConfig turns a mysql:// URL into a go-sql-driver configuration, checked as the
// driver checks a DSN, and the table name.
func mysqlConfig(u *url.URL) (cfg *mysql.Config, table string, err error) {
	q := u.Query()
	table = takeTable(q)
	if !q.Has("interpolateParams") {
		q.Set("interpolateParams", "true")
	}
	cfg = mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return nil, "", errors.New("the path must name one database")
	}
	// The driver parses its parameters from a DSN only: format one without them, append
	// them, and parse it back.
	dsn := cfg.FormatDSN()
	if len(q) > 0 {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + q.Encode()
	}
	cfg, err = mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	return cfg, table, nil
}

// openZooKeeper opens the ZooKeeper backend on a connection to servers.
func (s *Store) openZooKeeper(servers []string, timeout time.Duration) error {
	var conn *zk.Conn
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		c, ch, err := zk.Connect(servers, timeout, zk.WithEventCallback(events), zk.WithLogger(silent{}), zk.WithLogInfo(false),
			zk.WithDialer(zookeeper.Dialer(timeout/2)))
		conn = c
		return c, ch, err
	})
	if err != nil {
		return err
	}
	s.backend, s.zkConn = b, conn
	s.closers = append(s.closers, b.Close) // closes the connection too
	s.ready = func(ctx context.Context) error { return waitSession(ctx, conn, s.closing) }
	s.list = func(ctx context.Context) ([]string, error) {
		names, _, err := conn.Children("/simba")
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return names, err
	}
	s.release = func(ctx context.Context, mutex string, o simba.Owner) error {
		return deleteOwnerNode(ctx, conn, mutex, o)
	}
	s.holds = zkHolds(conn)
	return nil
}

// waitSession waits until conn has a ZooKeeper session, ctx ends, or closing is closed
// (the store's Close has begun: the session will never come).
func waitSession(ctx context.Context, conn *zk.Conn, closing <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no zookeeper session: %w", ctx.Err())
		case <-closing:
			return fmt.Errorf("no zookeeper session: %w", simba.ErrClosed)
		case <-tick.C:
		}
	}
	return nil
}

// deleteOwnerNode deletes the node of the owner of mutex, the one with the lowest
// sequence number (as in Curator's LeaderLatch), if it still carries o's ID.
func deleteOwnerNode(ctx context.Context, conn *zk.Conn, mutex string, o simba.Owner) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	parent := "/simba/" + mutex
	children, _, err := conn.Children(parent)
	if err != nil {
		return err
	}
	owner, ok := lowestLatch(children)
	if !ok {
		return nil
	}
	data, stat, err := conn.Get(parent + "/" + owner)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // gone meanwhile
	case err != nil:
		return err
	case string(data) != o.ID || (o.Token != 0 && uint64(stat.Czxid) != o.Token):
		return nil // another tenure meanwhile: not the one looked up
	}
	if err := conn.Delete(parent+"/"+owner, stat.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// lowestLatch returns the latch node with the lowest sequence number: the 10 digits after
// "latch-" that end its name.
func lowestLatch(children []string) (string, bool) {
	best, bestSeq := "", ""
	for _, name := range children {
		seq, ok := sequenceAfter(name, "latch-")
		if !ok {
			continue
		}
		if best == "" || seq < bestSeq {
			best, bestSeq = name, seq
		}
	}
	return best, best != ""
}

// Bounds of a zk URL's session_timeout. ZooKeeper takes whole milliseconds in an int32,
// and the server clamps what it grants to [2, 20] × its tickTime (4 s to 40 s by
// default). go-zookeeper gives its first handshake 10 × 2/3 of the requested timeout to
// answer: below 100 ms that is under 667 ms, which a loaded host or a remote ensemble
// misses, and the store never gets a session.
const (
	minSessionTimeout = 100 * time.Millisecond
	maxSessionTimeout = math.MaxInt32 * time.Millisecond
)

// zkServers reads the ensemble and the session timeout from a zk:// URL.
func zkServers(u *url.URL) ([]string, time.Duration, error) {
	if u.Path != "" && u.Path != "/" {
		return nil, 0, errors.New("a chroot path is not supported")
	}
	if u.User != nil {
		return nil, 0, errors.New("a zk URL takes no user or password (ZooKeeper authentication is not supported)")
	}
	timeout := 10 * time.Second
	q := u.Query()
	if q.Has("session_timeout") {
		v := q.Get("session_timeout")
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return nil, 0, fmt.Errorf("session_timeout %q must be a duration such as 10s", v)
		case d%time.Millisecond != 0:
			return nil, 0, fmt.Errorf("session_timeout %s must be a whole number of milliseconds (ZooKeeper's unit)", d)
		case d < minSessionTimeout || d > maxSessionTimeout:
			return nil, 0, fmt.Errorf("session_timeout %s must be from %s to %s", d, minSessionTimeout, maxSessionTimeout)
		}
		timeout = d
		q.Del("session_timeout")
	}
	if len(q) > 0 {
		return nil, 0, fmt.Errorf("unknown parameters %q", q.Encode())
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, "2181"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, 0, fmt.Errorf("server %q: the port must be a number from 1 to 65535", h)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	if len(servers) == 0 {
		return nil, 0, errors.New("no server")
	}
	return servers, timeout, nil
}

// redact removes the password from a URL that does not parse, as far as it can tell.
func redact(raw string) string {
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		if scheme := strings.Index(raw, "://"); scheme >= 0 && scheme < at {
			return raw[:scheme+3] + "xxxxx" + raw[at:]
		}
	}
	return raw
}

// RedisLogger writes go-redis's own lines to Logger at level Warn (they report failures
// the client retries or returns), or drops them when Logger is nil. Set it with
// goredis.SetLogger, which applies to every go-redis client of the process.
type RedisLogger struct {
	Logger *slog.Logger
}

// Printf logs one line of go-redis's.
func (l RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.Logger != nil {
		l.Logger.Log(ctx, slog.LevelWarn, fmt.Sprintf(format, v...))
	}
}

// discard is the logger of the contentions a Store opens itself.
var discard = slog.New(slog.DiscardHandler)

// silent is a zk.Logger that discards: a library writes to the application's output only
// when asked to.
type silent struct{}

func (silent) Printf(string, ...any) {}
