package zookeeper_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/internal/zkdial"
)

// The rows of the package documentation's table of refusals and outages, each on a real
// server: a refusal ends StartContend at once with an error matching simba.ErrRefused, and
// later operations report it the same way; an outage never matches it.

// startWithin is how long a start may take before the test calls it a hang: a refusal
// must end it well before; an outage must not.
const startWithin = 30 * time.Second

// errorLog is a slog handler that passes the err attribute of every record at Error level
// to a channel, dropping what does not fit.
type errorLog chan error

func (l errorLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelError }

func (l errorLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			select {
			case l <- err:
			default:
			}
		}
		return true
	})
	return nil
}

func (l errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l errorLog) WithGroup(string) slog.Handler      { return l }

// contender returns the participant of contender id on mutex, logging to log.
func contender(mutex, id string, log *slog.Logger) backend.Participant {
	return backend.Participant{Mutex: mutex, ContenderID: id, TTL: time.Second, Logger: log,
		Wake: func() {}, Report: func(backend.Record, time.Time) {}}
}

// startRefused starts p's contention on b and checks that it fails at once, matching
// simba.ErrRefused and not the context's error.
func startRefused(t *testing.T, b simba.Backend, p backend.Participant) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startWithin)
	defer cancel()
	c, err := b.StartContend(ctx, p)
	if c != nil {
		_ = c.StopContend(t.Context())
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, simba.ErrRefused)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the start waited for its context instead of ending at once")
	return err
}

// authServer starts a ZooKeeper of the test's own that requires every session to
// authenticate with the digest scheme (enforce.auth.enabled), stopped when the test ends.
// testserver has no option for it; the JVM takes the system properties from
// JAVA_TOOL_OPTIONS.
func authServer(t *testing.T) *testserver.Server {
	t.Helper()
	needServer(t)
	t.Setenv("JAVA_TOOL_OPTIONS", "-Dzookeeper.enforce.auth.enabled=true -Dzookeeper.enforce.auth.schemes=digest")
	srv, err := testserver.ZooKeeper(t.TempDir(), testserver.ZooKeeperOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// authConnect returns a Connect for srv whose connection authenticates with scheme and
// auth (not at all when scheme is empty) before it is handed over.
func authConnect(srv *testserver.Server, scheme, auth string) zookeeper.Connect {
	return func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		conn, ch, err := zk.Connect([]string{srv.Addr()}, sessionTimeout,
			zk.WithEventCallback(events), zk.WithDialer(zkdial.Dial), zk.WithLogger(quiet{}))
		if err != nil || scheme == "" {
			return conn, ch, err
		}
		if err := conn.AddAuth(scheme, []byte(auth)); err != nil {
			conn.Close()
			return nil, nil, err
		}
		return conn, ch, nil
	}
}

// authBackend returns a backend on srv that authenticates with the digest credentials
// auth ("user:password"; none when empty), closed when the test ends.
func authBackend(t *testing.T, srv *testserver.Server, auth string) *zookeeper.Backend {
	t.Helper()
	scheme := "digest"
	if auth == "" {
		scheme = ""
	}
	b, err := zookeeper.New(authConnect(srv, scheme, auth), zookeeper.WithLogger(testLogger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// A server that requires authentication, and /simba with an ACL that lets the user "app"
// create under it only with its own password.
func TestRefusedByAuthentication(t *testing.T) {
	srv := authServer(t)
	conn, _, err := zk.Connect([]string{srv.Addr()}, sessionTimeout, zk.WithDialer(zkdial.Dial), zk.WithLogger(quiet{}))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	require.NoError(t, conn.AddAuth("digest", []byte("admin:secret")))
	acl := append(zk.DigestACL(zk.PermAll, "admin", "secret"), zk.DigestACL(zk.PermAll, "app", "right")...)
	acl = append(acl, zk.WorldACL(zk.PermRead)...)
	_, err = conn.Create("/simba", nil, 0, acl)
	require.NoError(t, err)

	t.Run("wrong digest password", func(t *testing.T) {
		// ZooKeeper takes any digest credentials (they only name an identity): the wrong
		// password shows as the ACL's NoAuth on the first create.
		err := startRefused(t, authBackend(t, srv, "app:wrong"), contender(mutexName(t), "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrNoAuth)
		t.Log(err)
	})
	t.Run("no credentials", func(t *testing.T) {
		// The server answers every request with SESSIONCLOSEDREQUIRESASLAUTH and drops
		// the connection; go-zookeeper dials again, resumes the session, and so on.
		err := startRefused(t, authBackend(t, srv, ""), contender(mutexName(t), "a", testLogger(t)))
		t.Log(err)
	})
	t.Run("right credentials", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), startWithin)
		defer cancel()
		c, err := authBackend(t, srv, "app:right").StartContend(ctx, contender(mutexName(t), "a", testLogger(t)))
		require.NoError(t, err)
		require.NoError(t, c.StopContend(t.Context()))
	})
}

// A Connect whose AddAuth the server refuses (a scheme it does not know): New fails with
// the refusal.
func TestRefusedAuthScheme(t *testing.T) {
	needServer(t)
	_, err := zookeeper.New(authConnect(server, "no-such-scheme", "x"))
	require.Error(t, err)
	assert.ErrorIs(t, err, zk.ErrAuthFailed)
	assert.ErrorIs(t, err, simba.ErrRefused)
}

// createMutexNode makes /simba/<mutex> an ephemeral node of admin's session, with acl.
func createMutexNode(t *testing.T, admin *zk.Conn, mutex string, acl []zk.ACL) {
	t.Helper()
	for range 10 {
		if _, err := admin.CreateContainer("/simba", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
			require.ErrorIs(t, err, zk.ErrNodeExists)
		}
		_, err := admin.Create("/simba/"+mutex, nil, zk.FlagEphemeral, acl)
		if !errors.Is(err, zk.ErrNoNode) { // the server reaped /simba, empty, meanwhile
			require.NoError(t, err)
			return
		}
	}
	t.Fatal("/simba keeps disappearing")
}

// Requests the server refuses whatever the number of retries: the backend's ACL option,
// the node layout, the mutex name.
func TestRefusedRequests(t *testing.T) {
	t.Run("an ACL that names no identity", func(t *testing.T) {
		// zk.AuthACL names the identities the session authenticated with: none here.
		b := newBackend(t, zookeeper.WithACL(zk.AuthACL(zk.PermAll)))
		err := startRefused(t, b, contender(mutexName(t), "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrInvalidACL)
	})
	t.Run("an ephemeral mutex node", func(t *testing.T) {
		// Another client made /simba/<mutex> an ephemeral node, which can have no children.
		mutex := mutexName(t)
		createMutexNode(t, adminConn(t), mutex, zk.WorldACL(zk.PermAll))
		err := startRefused(t, newBackend(t), contender(mutex, "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrNoChildrenForEphemerals)
	})
	t.Run("a name the server refuses", func(t *testing.T) {
		// ValidateMutex refuses it first; go-zookeeper's own path check lets U+E000 pass.
		err := startRefused(t, newBackend(t), contender("private-\ue000", "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrBadArguments)
	})
	t.Run("a name go-zookeeper refuses", func(t *testing.T) {
		err := startRefused(t, newBackend(t, perNode), contender("nul-\x00", "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrInvalidPath)
		// The queue watch's requests are not go-zookeeper's: the server checks the path.
		err = startRefused(t, newBackend(t), contender("nul-\x00", "a", testLogger(t)))
		assert.ErrorIs(t, err, zk.ErrBadArguments)
	})
}

// An ACL set on the mutex node while a contention runs: the contention's next look is
// refused and logged at Error level, and so are OthersWaiting and StopContend. Watching
// per node: with the queue watch, a look makes no request the ACL could refuse.
func TestRefusedWhileContending(t *testing.T) {
	mutex := mutexName(t)
	parent := "/simba/" + mutex
	admin := adminConn(t)
	require.NoError(t, admin.AddAuth("digest", []byte("admin:secret")))
	b := newBackend(t, perNode)
	logs := make(errorLog, 16)
	ctx, cancel := context.WithTimeout(t.Context(), startWithin)
	defer cancel()
	c, err := b.StartContend(ctx, contender(mutex, "a", slog.New(logs)))
	require.NoError(t, err)
	node := nodeOf(t, admin, parent, "a")
	require.NotEmpty(t, node)

	_, err = admin.SetACL(parent, zk.DigestACL(zk.PermAll, "admin", "secret"), -1)
	require.NoError(t, err)
	_, err = admin.Set(node, []byte("a"), -1) // the contention's watch fires: it looks again
	require.NoError(t, err)
	select {
	case err := <-logs:
		assert.ErrorIs(t, err, simba.ErrRefused)
		assert.ErrorIs(t, err, zk.ErrNoAuth)
	case <-time.After(startWithin):
		t.Fatal("no refusal logged at Error level")
	}

	_, err = c.(backend.WaitList).OthersWaiting(ctx)
	assert.ErrorIs(t, err, simba.ErrRefused)
	err = c.StopContend(ctx)
	assert.ErrorIs(t, err, simba.ErrRefused)
	assert.ErrorIs(t, err, zk.ErrNoAuth)
}

// Outages are no refusals: a server that is down when the contention starts, and a
// connection cut while it runs.
func TestOutageIsNotRefused(t *testing.T) {
	t.Run("server down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close()) // nothing listens there now: the dial is refused
		b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
			return zk.Connect([]string{addr}, sessionTimeout, zk.WithEventCallback(events), zk.WithLogger(quiet{}))
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = b.StartContend(ctx, contender(mutexName(t), "a", testLogger(t)))
		assert.ErrorIs(t, err, zookeeper.ErrNoSession)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, simba.ErrRefused)
	})
	t.Run("connection cut", func(t *testing.T) {
		n := &network{}
		b := newBackendOn(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), startWithin)
		defer cancel()
		c, err := b.StartContend(ctx, contender(mutexName(t), "a", testLogger(t)))
		require.NoError(t, err)
		n.cut(true)
		short, cancelShort := context.WithTimeout(ctx, time.Second)
		defer cancelShort()
		_, err = c.(backend.WaitList).OthersWaiting(short)
		require.Error(t, err)
		assert.NotErrorIs(t, err, simba.ErrRefused)
		err = c.StopContend(ctx)
		require.Error(t, err)
		assert.NotErrorIs(t, err, simba.ErrRefused)
	})
}
