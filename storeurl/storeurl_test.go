package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// stores are the servers of the tests; storesErr is why they are missing.
var (
	stores    *testserver.Stores
	storesErr error
)

func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithStores(m, createTable, func(s *testserver.Stores, err error) { stores, storesErr = s, err }))
}

// createTable creates simba's table in the SQL stores of s.
func createTable(ctx context.Context, s *testserver.Stores) error { return s.CreateTables(ctx) }

// Every malformed URL, and every malformed option of a scheme, fails at Open with an
// error wrapping simba.ErrInvalidArgument that does not show the password, and dials
// nothing: no listener at the URL's address hears a connection.
func TestOpenInvalid(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var dials atomic.Int64
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	at := l.Addr().String()
	for _, raw := range []string{
		"ftp://" + at,
		"redis://:secret@host:notaport",
		"redis://:secret@" + at + "?no_such_option=1",
		"redis://:secret@" + at + "?dial_timeout=soon",
		"redis://:secret@" + at + "?pool_size=many",
		"redis://:secret@" + at + "/notadb",
		"redis-sentinel://:secret@" + at,
		"redis-sentinel://:secret@" + at + "?master_name=m&read_timeout=soon",
		"mysql://user:secret@" + at,
		"mysql://user:secret@" + at + "/a/b",
		"mysql://user:secret@" + at + "/db?timeout=soon",
		"mysql://user:secret@" + at + "/db?tls=no-such-config",
		"mysql://user:secret@" + at + "/db?interpolateParams=maybe",
		"mysql://user:secret@" + at + "/db?table=bad%60name",
		"postgres://user:secret@" + at,
		"postgres://user:secret@" + at + "/a/b",
		"postgresql://user:secret@/db",
		"postgres://user:secret@" + at + "/db?sslmode=bogus",
		"postgres://user:secret@" + at + "/db?connect_timeout=soon",
		"postgres://user:secret@" + at + "/db?target_session_attrs=bogus",
		"postgres://user:secret@" + at + "/db?default_query_exec_mode=bogus",
		"postgres://user:secret@" + at + "/db?statement_cache_capacity=many",
		"postgres://user:secret@" + at + "/db?table=bad%22name",
		"zk://" + at + "/chroot",
		"zk://" + at + "?session_timeout=soon",
		"zk://" + at + "?session_timeout=500us",  // below a millisecond: was sent as 0
		"zk://" + at + "?session_timeout=1500us", // not whole milliseconds
		"zk://" + at + "?session_timeout=50ms",   // below the minimum
		"zk://" + at + "?session_timeout=1000000h",
		"zk://" + at + "?unknown=1",
		"zk://user:secret@" + at, // credentials it would ignore
		"zk://",
		"::not a url",
	} {
		s, err := storeurl.Open(raw)
		if !assert.ErrorIs(t, err, simba.ErrInvalidArgument, raw) {
			_ = s.Close()
			continue
		}
		assert.NotContains(t, err.Error(), "secret", "the password never shows")
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
	require.NoError(t, l.Close())
	<-accepted
	assert.Zero(t, dials.Load(), "Open dialed")
}

func TestOpenWithoutIO(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:1/2?dial_timeout=1s",
		"rediss://user:pw@127.0.0.1:1",
		"mysql://user:pw@127.0.0.1/db?table=my_locks&timeout=1s",
		"mariadb://user:pw@127.0.0.1:1/db",
		"postgres://user:pw@127.0.0.1:1/db?sslmode=disable&table=app.my_locks",
		"postgresql://user:pw@127.0.0.1:1/db",
	} {
		s, err := storeurl.Open(raw)
		require.NoError(t, err, raw)
		assert.NotContains(t, s.String(), "pw")
		assert.NotNil(t, s.Backend())
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "idempotent")
	}
}

// TestCallsAfterClose: List and Release on a closed Store fail with simba.ErrClosed without
// touching the client, and Close may run while calls are under way (the race detector
// watches the calls it waits for).
func TestCallsAfterClose(t *testing.T) {
	for _, raw := range []string{"redis://127.0.0.1:1/0?dial_timeout=100ms", "mysql://user:pw@127.0.0.1:1/db?timeout=100ms"} {
		s, err := storeurl.Open(raw)
		require.NoError(t, err, raw)
		var calls sync.WaitGroup
		for range 4 {
			calls.Go(func() {
				for range 20 {
					_, _ = s.List(t.Context())
				}
			})
		}
		require.NoError(t, s.Close())
		calls.Wait()
		_, err = s.List(t.Context())
		assert.ErrorIs(t, err, simba.ErrClosed, raw)
		assert.ErrorIs(t, s.Release(t.Context(), "m", simba.Owner{ID: "x"}), simba.ErrClosed, raw)
	}
}

// TestStores lists and force-releases a held mutex on every store.
func TestStores(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s, err := storeurl.Open(raw)
			require.NoError(t, err)
			defer s.Close()
			mutex := "storeurl-" + scheme
			l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID("holder-"+scheme),
				simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
			require.NoError(t, err)
			defer l.Close()
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)

			if b, ok := s.Backend().(*jdbc.Backend); ok {
				_, err := b.Prune(t.Context(), time.Hour) // writes the table's floor row
				require.NoError(t, err)
			}
			names, err := s.List(t.Context())
			require.NoError(t, err)
			assert.Contains(t, names, mutex)
			assert.NotContains(t, names, "", "an SQL table's floor row is no mutex")

			held, err := simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			assert.Equal(t, "holder-"+scheme, held.ID)
			stale := held
			stale.ID = "someone-else"
			require.NoError(t, s.Release(t.Context(), mutex, stale))
			o, err := simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			assert.Equal(t, held.ID, o.ID, "a release of another tenure than the owner's does nothing")

			require.NoError(t, s.Release(t.Context(), mutex, held))
			o, err = simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			assert.True(t, o.IsZero(), "after the forced release: %v", o)
			require.NoError(t, s.Release(t.Context(), mutex, simba.Owner{}), "nothing to release")
			if err := lease.Release(t.Context()); err != nil {
				assert.True(t, errors.Is(err, simba.ErrOwnershipLost) || errors.Is(err, simba.ErrNotOwner), "%v", err)
			}
		})
	}
}

// A server that stops answering (SIGSTOP) kept List and Release waiting past their
// caller's deadline: on Redis until go-redis's 3 s read timeout (a URL-opened client did
// not apply context deadlines to its socket), on ZooKeeper until the connection timed out.
func TestCallsKeepDeadlineWhenServerStalls(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, srv := range map[string]*testserver.Server{"redis": stores.Redis, "zk": stores.ZooKeeper} {
		t.Run(scheme, func(t *testing.T) {
			s, err := storeurl.Open(stores.URLs()[scheme])
			require.NoError(t, err)
			_, err = s.List(t.Context()) // connected, with a session
			require.NoError(t, err)
			require.NoError(t, srv.Pause())
			resumed := false
			defer func() {
				if !resumed {
					_ = srv.Resume()
				}
			}()
			const deadline = 300 * time.Millisecond
			for name, call := range map[string]func(context.Context) error{
				"List": func(ctx context.Context) error { _, err := s.List(ctx); return err },
				"Release": func(ctx context.Context) error {
					return s.Release(ctx, "stalled", simba.Owner{ID: "someone", Token: 1})
				},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				began := time.Now()
				err := call(ctx)
				took := time.Since(began)
				cancel()
				assert.ErrorIs(t, err, context.DeadlineExceeded, name)
				assert.Less(t, took, deadline+500*time.Millisecond, "%s overran its deadline", name)
			}
			require.NoError(t, srv.Resume())
			resumed = true
			require.NoError(t, s.Close(), "Close waits for the calls left in the background")
		})
	}
}

// ExampleOpen opens a backend from a URL, as a configuration file would name it.
func ExampleOpen() {
	s, err := storeurl.Open("redis://127.0.0.1:6379/0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(s)
	// Output: redis://127.0.0.1:6379/0
}

// doneSeen is a context that tells, by closing seen, that a call has asked for its Done
// channel: the call has got past its closed-store check and is waiting.
type doneSeen struct {
	context.Context
	once sync.Once
	seen chan struct{}
}

func (c *doneSeen) Done() <-chan struct{} {
	c.once.Do(func() { close(c.seen) })
	return c.Context.Done()
}

// A call waiting for a ZooKeeper session with a context without deadline (an unreachable
// ensemble) kept Close waiting for ever: the wait heard only the session and the context.
// Close now ends the wait, and the call fails with simba.ErrClosed.
func TestCloseEndsSessionWait(t *testing.T) {
	s, err := storeurl.Open("zk://127.0.0.1:1?session_timeout=2s")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background()) // never ends before the test does
	defer cancel()
	listed := listWaiting(t, s, ctx)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		cancel() // lets the wait, and Close, end
		t.Fatal("Close did not return within 10s while List waited for a session")
	}
	assertEndedByClose(t, listed)
}

// listWaiting starts s.List with ctx and returns, once the call waits (past its check for
// a closed store), the channel its error comes on.
func listWaiting(t *testing.T, s *storeurl.Store, ctx context.Context) <-chan error {
	t.Helper()
	seen := &doneSeen{Context: ctx, seen: make(chan struct{})}
	listed := make(chan error, 1)
	go func() {
		_, err := s.List(seen)
		listed <- err
	}()
	select {
	case <-seen.seen:
	case err := <-listed:
		t.Fatalf("List returned at once: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("List never began to wait")
	}
	return listed
}

// assertEndedByClose checks that the List whose error comes on listed ends, with an
// error matching simba.ErrClosed, within 10s of the Close that ended it.
func assertEndedByClose(t *testing.T, listed <-chan error) {
	t.Helper()
	select {
	case err := <-listed:
		assert.ErrorIs(t, err, simba.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("List did not return within 10s of Close")
	}
}

// A call under way on a stalled server when Close begins ends with the client Close
// closes, and says so: its error matches simba.ErrClosed.
func TestCloseEndsCallUnderWay(t *testing.T) {
	testserver.Need(t, storesErr)
	s, err := storeurl.Open(stores.URLs()["redis"])
	require.NoError(t, err)
	_, err = s.List(t.Context()) // connected
	require.NoError(t, err)
	require.NoError(t, stores.Redis.Pause())
	defer func() { require.NoError(t, stores.Redis.Resume()) }()
	listed := listWaiting(t, s, t.Context())
	require.NoError(t, s.Close())
	assertEndedByClose(t, listed)
}

// A service shares the Store's client: the accessor of its scheme returns the client the
// Store dialed (which works), the others nil.
func TestClients(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s, err := storeurl.Open(raw)
			require.NoError(t, err)
			defer s.Close()
			ctx := t.Context()
			assert.Equal(t, scheme == "redis", s.RedisClient() != nil, "RedisClient")
			assert.Equal(t, scheme == "mysql" || scheme == "postgres", s.DB() != nil, "DB")
			assert.Equal(t, scheme == "zk", s.ZooKeeperConn() != nil, "ZooKeeperConn")
			switch {
			case s.RedisClient() != nil:
				require.NoError(t, s.RedisClient().Ping(ctx).Err())
			case s.DB() != nil:
				require.NoError(t, s.DB().PingContext(ctx))
			default:
				_, err := s.List(ctx) // waits for the session
				require.NoError(t, err)
				_, _, err = s.ZooKeeperConn().Exists("/")
				require.NoError(t, err)
			}
		})
	}
}

// CreateTable creates the table a SQL URL names, on which a Locker then works; on the
// other stores it has nothing to do.
func TestCreateTable(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			sep := "?"
			if strings.Contains(raw, "?") {
				sep = "&"
			}
			if scheme == "mysql" || scheme == "postgres" {
				raw += sep + "table=created_by_storeurl"
			}
			s, err := storeurl.Open(raw)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.CreateTable(t.Context()))
			require.NoError(t, s.CreateTable(t.Context()), "once created, it is left as it is")
			l, err := simba.NewLocker(s.Backend(), "created-"+scheme)
			require.NoError(t, err)
			defer l.Close()
			lease, err := l.Acquire(t.Context())
			require.NoError(t, err)
			require.NoError(t, lease.Release(t.Context()))
			require.NoError(t, s.Close())
			if s.DB() != nil {
				assert.ErrorIs(t, s.CreateTable(t.Context()), simba.ErrClosed)
			}
		})
	}
}

// recorder is a slog.Handler that keeps the messages of the records it handles.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// go-redis writes its pool's failed dials to standard error through its process-wide
// logger, which a Store leaves alone; RedisLogger is what an application sets there to
// have them in slog, or, as the zero value, to drop them.
func TestRedisLogger(t *testing.T) {
	t.Cleanup(logging.Enable) // go-redis's own logger again
	rec := &recorder{}
	goredis.SetLogger(storeurl.RedisLogger{Logger: slog.New(rec)})
	s, err := storeurl.Open("redis://127.0.0.1:1?dial_timeout=100ms")
	require.NoError(t, err)
	defer s.Close()
	_, err = s.List(t.Context())
	require.Error(t, err)
	assert.True(t, slices.ContainsFunc(rec.messages(), func(m string) bool {
		return strings.HasPrefix(m, "WARN ") && strings.Contains(m, "failed to dial")
	}), "%q", rec.messages())

	goredis.SetLogger(storeurl.RedisLogger{}) // drops them
	_, err = s.List(t.Context())
	require.Error(t, err)
}

// Release frees only the tenure it was given: after the owner it names has released and
// acquired again (the same contender ID, a new tenure), releasing the old record leaves
// the new tenure holding. It used to free the mutex of whatever tenure the ID held (Redis
// and SQL release in the contender's name).
func TestReleaseLeavesLaterTenure(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s, err := storeurl.Open(raw)
			require.NoError(t, err)
			defer s.Close()
			mutex, id := "tenures-"+scheme, "same-"+scheme
			l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID(id),
				simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
			require.NoError(t, err)
			defer l.Close()
			first, err := l.Acquire(t.Context())
			require.NoError(t, err)
			old, err := simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			require.Equal(t, id, old.ID)
			require.NoError(t, first.Release(t.Context()))
			second, err := l.Acquire(t.Context())
			require.NoError(t, err)
			if old.Token != 0 {
				require.Greater(t, second.Token(), old.Token, "a new tenure")
			}

			require.NoError(t, s.Release(t.Context(), mutex, old))
			now, err := simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			assert.Equal(t, id, now.ID, "the later tenure still holds")
			if now.Token != 0 {
				assert.Equal(t, second.Token(), now.Token, "the later tenure's token")
			}
			assert.NoError(t, second.Context().Err(), "the lease of the later tenure goes on")
			assert.NoError(t, second.Release(t.Context()), "the later tenure releases as owner")
		})
	}
}
