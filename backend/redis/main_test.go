package redis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
)

// shared is the redis-server most tests use, started by TestMain; sharedErr is why it is
// missing.
var (
	shared    *testserver.Server
	sharedErr error
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(serverMain{m}) }

// serverMain runs the tests between starting and stopping the shared server.
type serverMain struct{ m *testing.M }

func (s serverMain) Run() int {
	flag.Parse()
	if !flagSet("test.fuzzworker") && !flagSet("test.list") {
		shared, sharedErr = startRedis()
	}
	code := s.m.Run()
	if shared != nil {
		_ = shared.Stop()
		_ = os.RemoveAll(shared.Dir)
	}
	return code
}

// flagSet reports whether the testing flag name is set: fuzzing workers and listings need
// no server.
func flagSet(name string) bool {
	f := flag.Lookup(name)
	return f != nil && f.Value.String() != "" && f.Value.String() != "false"
}

// startRedis starts a redis-server without persistence on a free loopback port, in a
// directory of its own.
func startRedis(extra ...string) (*testserver.Server, error) {
	dir, err := os.MkdirTemp("", "simba-redis-")
	if err != nil {
		return nil, err
	}
	s, err := testserver.Redis(dir, extra...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// need reports a failure to start a server; see testserver.Need.
func need(t testing.TB, err error) {
	t.Helper()
	testserver.Need(t, err)
}

// server returns the shared server.
func server(t testing.TB) *testserver.Server {
	t.Helper()
	if shared == nil && sharedErr == nil {
		sharedErr = errors.New("the shared redis-server was not started")
	}
	need(t, sharedErr)
	return shared
}

// ownServer starts a server for t alone, for tests that kill or restart it.
func ownServer(t testing.TB) *testserver.Server {
	t.Helper()
	s, err := startRedis()
	need(t, err)
	t.Cleanup(func() {
		_ = s.Stop()
		_ = os.RemoveAll(s.Dir)
	})
	return s
}

// clientOptions are the options of every test client: go-redis 9.22 would otherwise send
// Redis 7.0 handshake commands it does not know, and without ContextTimeoutEnabled the
// service's call timeout would not bound socket reads.
func clientOptions(addr string) *goredis.Options {
	return &goredis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// newClient returns a new client of the server at addr, closed when t ends; each stands
// for another process.
func newClient(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(clientOptions(addr))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newBackend returns a backend on client, closed when t ends (before the client).
func newBackend(t testing.TB, client goredis.UniversalClient, opts ...redis.Option) *redis.Backend {
	t.Helper()
	b, err := redis.New(client, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

var names atomic.Int64

// uniqueName returns a mutex name or contender ID no other test uses.
func uniqueName(t testing.TB, role string) string {
	n := strings.NewReplacer("/", "-", "{", "", "}", "", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s-%s-%d", n, role, names.Add(1))
}
