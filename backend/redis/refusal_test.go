package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
)

// scene is a server and the client a backend uses on it, for a row of the refusal tests.
type scene struct {
	srv    *testserver.Server
	admin  *goredis.Client // the default user, without a password
	client *goredis.Client // the ACL user "simba", who may do everything, or the default user
}

// newScene starts a server of its own, with the extra arguments args; the backend's
// client logs in as the ACL user "simba", or as the default user when asDefault is set.
func newScene(t *testing.T, asDefault bool, args ...string) *scene {
	t.Helper()
	srv, err := startRedis(args...)
	need(t, err)
	t.Cleanup(func() {
		_ = srv.Stop()
		_ = os.RemoveAll(srv.Dir)
	})
	s := &scene{srv: srv}
	s.admin = newClient(t, s.srv.Addr())
	opt := clientOptions(s.srv.Addr())
	if !asDefault {
		s.acl(t, "reset", "on", ">pw", "~*", "&*", "+@all")
		opt.Username, opt.Password = "simba", "pw"
	}
	s.client = goredis.NewClient(opt)
	t.Cleanup(func() { _ = s.client.Close() })
	return s
}

// acl changes the ACL user "simba".
func (s *scene) acl(t *testing.T, rules ...any) {
	t.Helper()
	require.NoError(t, s.admin.Do(t.Context(), append([]any{"ACL", "SETUSER", "simba"}, rules...)...).Err())
}

// kick closes every connection but the admin's, so that the client logs in again.
func (s *scene) kick(t *testing.T) {
	t.Helper()
	for _, typ := range []string{"normal", "pubsub"} {
		require.NoError(t, s.admin.Do(t.Context(), "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Err())
	}
}

// replicaOf makes the scene's server a replica of a new, empty primary and waits until it
// has synchronised.
func (s *scene) replicaOf(t *testing.T, primary *testserver.Server) {
	t.Helper()
	host, port, err := net.SplitHostPort(primary.Addr())
	require.NoError(t, err)
	require.NoError(t, s.admin.Do(t.Context(), "REPLICAOF", host, port).Err())
}

// loading makes the scene's server load a dataset, slowly, for minutes: it becomes the
// replica of a primary with a few thousand keys and loads each key with a delay. It
// answers LOADING meanwhile. The server is killed when t ends (it would finish loading
// before it stopped).
func (s *scene) loading(t *testing.T) {
	t.Helper()
	primary := ownServer(t)
	padmin := newClient(t, primary.Addr())
	// 3000 keys of 1 KB each, loaded at 20 ms per key, with clients answered after every
	// KB read rather than every 2 MB: a minute of LOADING answered within a few ms.
	require.NoError(t, padmin.Eval(t.Context(), "for i = 1, 3000 do redis.call('SET', 'k' .. i, string.rep('x', 1000)) end return 1", nil).Err())
	require.NoError(t, padmin.ConfigSet(t.Context(), "rdbcompression", "no").Err())
	require.NoError(t, padmin.ConfigSet(t.Context(), "repl-diskless-sync-delay", "0").Err())
	require.NoError(t, s.admin.ConfigSet(t.Context(), "key-load-delay", "20000").Err())
	require.NoError(t, s.admin.ConfigSet(t.Context(), "loading-process-events-interval-bytes", "1024").Err())
	t.Cleanup(func() { _ = s.srv.Kill() })
	s.replicaOf(t, primary)
	poll(t, "the server to answer LOADING", func() bool {
		return strings.HasPrefix(errString(s.admin.Ping(t.Context()).Err()), "LOADING")
	})
}

// busy runs a script that never ends on the scene's server, which answers BUSY to every
// other call, until t ends: then the script is killed.
func (s *scene) busy(t *testing.T) {
	t.Helper()
	require.NoError(t, s.admin.ConfigSet(t.Context(), "busy-reply-threshold", "10").Err())
	opt := clientOptions(s.srv.Addr())
	opt.ReadTimeout, opt.MaxRetries = -1, -1
	looper := goredis.NewClient(opt)
	done := make(chan error, 1)
	go func() { done <- looper.Eval(context.Background(), "while true do end", nil).Err() }()
	t.Cleanup(func() {
		_ = s.admin.Do(context.Background(), "SCRIPT", "KILL").Err()
		select {
		case <-done:
		case <-time.After(eventDeadline):
			t.Error("the endless script was not killed")
		}
		_ = looper.Close()
	})
	poll(t, "the server to answer BUSY", func() bool {
		return strings.HasPrefix(errString(s.admin.Ping(t.Context()).Err()), "BUSY")
	})
}

// misconf makes the scene's server fail a background save, after which it refuses writes
// with MISCONF while saving is configured. The server must allow CONFIG SET dir
// (protectedConfigs).
func (s *scene) misconf(t *testing.T) {
	t.Helper()
	dir := filepath.Join(s.srv.Dir, "gone")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, s.admin.ConfigSet(t.Context(), "dir", dir).Err())
	require.NoError(t, s.admin.ConfigSet(t.Context(), "save", "3600 1").Err())
	t.Cleanup(func() { _ = s.admin.ConfigSet(context.Background(), "save", "").Err() }) // or it would not stop
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, s.admin.BgSave(t.Context()).Err())
	poll(t, "the background save to fail", func() bool {
		info, err := s.admin.Info(t.Context(), "persistence").Result()
		return err == nil && strings.Contains(info, "rdb_last_bgsave_status:err")
	})
}

var protectedConfigs = []string{"--enable-protected-configs", "yes"}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// classified fails t unless err is one line that matches the regular expression says and
// matches simba.ErrRefused
// (and redis.ErrRefused) exactly when refused is set.
func classified(t *testing.T, err error, refused bool, says string) {
	t.Helper()
	require.Error(t, err)
	assert.Regexp(t, says, err.Error())
	if refused {
		assert.ErrorIs(t, err, simba.ErrRefused, "a refusal")
		assert.ErrorIs(t, err, redis.ErrRefused, "a refusal")
	} else {
		assert.NotErrorIs(t, err, simba.ErrRefused, "an outage")
		assert.NotErrorIs(t, err, redis.ErrRefused, "an outage")
	}
	oneLine(t, err)
}

// A row of the refusal tests: a state of the server, and whether the backend's calls are
// refused in it (no retry can cure it) or meet an outage.
type refusalRow struct {
	name      string
	asDefault bool // the backend logs in as the default user
	refused   bool
	says      string
	every     bool // every call fails, lookups included; otherwise only acquisitions
	atStart   bool // the state can be there before the backend's start-up check
	later     bool // the state can begin after a successful start
	args      []string
	apply     func(t *testing.T, s *scene)
}

var refusalRows = []refusalRow{
	// A connection that has not logged in and sends a command of more than 10 arguments (an
	// acquire or a release) is answered "ERR Protocol error: unauthenticated multibulk
	// length" rather than NOAUTH.
	{name: "password required, none given", asDefault: true, refused: true, says: "NOAUTH|Protocol error: unauthenticated", every: true, atStart: true, later: true,
		apply: func(t *testing.T, s *scene) {
			require.NoError(t, s.admin.ConfigSet(t.Context(), "requirepass", "secret").Err())
			s.kick(t)
		}},
	{name: "wrong password", refused: true, says: "WRONGPASS", every: true, atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.acl(t, "resetpass", ">other"); s.kick(t) }},
	{name: "user disabled", refused: true, says: "WRONGPASS", every: true, atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.acl(t, "off"); s.kick(t) }},
	{name: "user without scripting", refused: true, says: "NOPERM", every: true, atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.acl(t, "-@scripting") }},
	{name: "user without channels", refused: true, says: "publish", atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.acl(t, "resetchannels") }},
	{name: "read-only replica", refused: true, says: "READONLY", atStart: true, later: true,
		apply: func(t *testing.T, s *scene) {
			s.replicaOf(t, ownServer(t))
			poll(t, "the replica to refuse writes", func() bool {
				return strings.HasPrefix(errString(s.admin.Set(t.Context(), "probe", "1", 0).Err()), "READONLY")
			})
		}},
	{name: "server stopped", says: "connect", atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { require.NoError(t, s.srv.Stop()) }},
	{name: "server loading", says: "LOADING", atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.loading(t) }},
	{name: "script running", says: "BUSY", atStart: true, later: true,
		apply: func(t *testing.T, s *scene) { s.busy(t) }},
	{name: "out of memory", says: "OOM", later: true,
		apply: func(t *testing.T, s *scene) {
			require.NoError(t, s.admin.ConfigSet(t.Context(), "maxmemory", "1").Err())
		}},
	{name: "background save failed", says: "MISCONF", atStart: true, later: true, args: protectedConfigs,
		apply: func(t *testing.T, s *scene) { s.misconf(t) }},
}

// startCheck returns the error of the first StartContend of a new backend on client: its
// start-up check's.
func startCheck(t *testing.T, client goredis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(t.Context(), eventDeadline)
	defer cancel()
	_, err := newBackend(t, client).StartContend(ctx, backend.Participant{Mutex: uniqueName(t, "m"), ContenderID: "c", TTL: testTTL, Transition: testTransition})
	return err
}

// Which answers are refusals, at the start-up check (Backend.StartContend): a refusal
// matches simba.ErrRefused, so that Start and acquisitions end at once; an outage does
// not (issue 33). Before the fix, every error answer of the server was a refusal,
// LOADING and BUSY included.
func TestStartCheckTellsRefusalsFromOutages(t *testing.T) {
	for _, row := range refusalRows {
		if !row.atStart {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			s := newScene(t, row.asDefault, row.args...)
			row.apply(t, s)
			err := startCheck(t, s.client)
			classified(t, err, row.refused, row.says)
			if !row.refused {
				assert.ErrorIs(t, err, redis.ErrUnreachable)
			}
		})
	}
}

// Answers that only a start-up check can meet: options that the server's configuration
// refuses at every connection, and a server that is a Redis Cluster node.
func TestStartCheckRefusesMisconfiguration(t *testing.T) {
	t.Run("scripting disabled", func(t *testing.T) {
		srv, err := startRedis("--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "", "--rename-command", "FCALL", "")
		need(t, err)
		t.Cleanup(func() { _ = srv.Stop(); _ = os.RemoveAll(srv.Dir) })
		classified(t, startCheck(t, newClient(t, srv.Addr())), true, "unknown command")
	})
	t.Run("database out of range", func(t *testing.T) {
		opt := clientOptions(server(t).Addr())
		opt.DB = 99
		c := goredis.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		classified(t, startCheck(t, c), true, "DB index")
	})
	t.Run("cluster node serving no slots", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "simba-redis-cluster-")
		require.NoError(t, err)
		node, err := testserver.RedisClusterNode(dir)
		need(t, err)
		need(t, node.Start(t.Context()))
		t.Cleanup(func() { _ = node.Stop(); _ = os.RemoveAll(dir) })
		classified(t, startCheck(t, newClient(t, node.Addr())), false, "CLUSTERDOWN")
	})
}

// Which answers are refusals when they begin after the backend's start-up check, which is
// remembered: the calls of a contention classify their errors too (issue 33). Before the
// fix, no later call's error matched simba.ErrRefused.
func TestLaterCallsTellRefusalsFromOutages(t *testing.T) {
	for _, row := range refusalRows {
		if !row.later {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			s := newScene(t, row.asDefault, row.args...)
			b := newBackend(t, s.client)
			mutex := uniqueName(t, "m")
			c := contend(t, b, mutex, "c", &wakes{})
			rec, err := c.Acquire(t.Context())
			require.NoError(t, err)
			require.Equal(t, "c", rec.Owner)
			require.NoError(t, c.Release(t.Context()))

			row.apply(t, s)
			call := func(name string, f func(context.Context) error) {
				ctx, cancel := context.WithTimeout(t.Context(), eventDeadline)
				defer cancel()
				err := f(ctx)
				t.Logf("%s: %v", name, err)
				if row.every || name == "acquire" || err != nil {
					classified(t, err, row.refused, row.says)
				}
			}
			call("acquire", func(ctx context.Context) error { _, err := c.Acquire(ctx); return err })
			call("lookup", func(ctx context.Context) error { _, err := c.Lookup(ctx); return err })
			call("others waiting", func(ctx context.Context) error { _, err := c.(backend.WaitList).OthersWaiting(ctx); return err })
			call("release", c.Release)
		})
	}
}

// A refusal that begins while a Locker is in use reaches the Locker's next acquisition,
// although the backend's start-up check is remembered (issue 33).
func TestLockerSeesARefusalThatBeganAfterStart(t *testing.T) {
	s := newScene(t, false)
	b := newBackend(t, s.client)
	l, err := simba.NewLocker(b, uniqueName(t, "m"), simba.WithTTL(testTTL), simba.WithTransition(testTransition))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, lease.Release(t.Context()))

	s.acl(t, "resetpass", ">rotated")
	s.kick(t)
	_, err = l.TryAcquire(t.Context())
	require.Error(t, err)
	assert.ErrorIs(t, err, simba.ErrRefused)
	assert.Contains(t, err.Error(), "WRONGPASS")
}

// A Quorum's call is refused only when the instances that refuse leave too few to make a
// quorum: otherwise a retry may succeed once the instances that are down come back.
// Instances that refuse are not left out, so that every call hears the refusal again.
func TestQuorumRefusals(t *testing.T) {
	scenes := []*scene{newScene(t, false), newScene(t, false), newScene(t, false)}
	q, err := redis.NewQuorum([]goredis.UniversalClient{scenes[0].client, scenes[1].client, scenes[2].client})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	c := contend(t, q, uniqueName(t, "m"), "c", &wakes{})
	acquire := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), eventDeadline)
		defer cancel()
		rec, err := c.Acquire(ctx)
		if err == nil {
			require.Equal(t, "c", rec.Owner)
			require.NoError(t, c.Release(ctx))
		}
		return err
	}
	require.NoError(t, acquire())

	scenes[0].acl(t, "resetpass", ">rotated")
	scenes[0].kick(t)
	require.NoError(t, acquire(), "two of three still make a quorum")
	assert.Equal(t, 3, q.Available(), "the refusing instance is not left out")

	require.NoError(t, scenes[1].srv.Stop())
	err = acquire()
	classified(t, err, false, "WRONGPASS")
	assert.ErrorIs(t, err, redis.ErrTooFewInstances)

	scenes[2].acl(t, "resetpass", ">rotated")
	scenes[2].kick(t)
	err = acquire()
	classified(t, err, true, "WRONGPASS")
	assert.ErrorIs(t, err, redis.ErrTooFewInstances)
}

// logRecorder is a slog handler that keeps the records with an "err" attribute.
type logRecorder struct {
	mu   sync.Mutex
	list []loggedError
	sig  signal
}

type loggedError struct {
	level slog.Level
	msg   string
	err   error
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.mu.Lock()
			h.list = append(h.list, loggedError{level: r.Level, msg: r.Message, err: err})
			h.mu.Unlock()
			h.sig.notify()
		}
		return true
	})
	return nil
}

// await waits for a record that match accepts, and returns it.
func (h *logRecorder) await(t *testing.T, what string, match func(loggedError) bool) loggedError {
	t.Helper()
	var found loggedError
	await(t, &h.sig, what, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, r := range h.list {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// A user who may not subscribe: the subscription connection's refusal is logged at Error
// level, wrapped in simba.ErrRefused, while acquisitions go on (they poll).
func TestSubscriptionRefusalIsLogged(t *testing.T) {
	s := newScene(t, false)
	s.acl(t, "-subscribe")
	h := &logRecorder{}
	b := newBackend(t, s.client, redis.WithLogger(slog.New(h)))
	other := newBackend(t, newClient(t, s.srv.Addr()))
	mutex := uniqueName(t, "m")
	owner := contend(t, other, mutex, "owner", &wakes{})
	_, err := owner.Acquire(t.Context())
	require.NoError(t, err)

	c := contend(t, b, mutex, "c", &wakes{})
	rec, err := c.Acquire(t.Context()) // waits: subscribes
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	refusal := h.await(t, "the refused subscription logged", func(r loggedError) bool {
		return r.level == slog.LevelError && errors.Is(r.err, simba.ErrRefused)
	})
	assert.Contains(t, refusal.err.Error(), "NOPERM")

	require.NoError(t, owner.Release(t.Context()))
	rec, err = c.Acquire(t.Context())
	require.NoError(t, err, "acquisitions go on")
	assert.Equal(t, "c", rec.Owner)
}
