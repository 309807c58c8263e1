package etcd_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/chaos"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testserver"
)

// server is the single-member etcd most tests share; nil when etcd is not installed and
// the run is -short.
var server *testserver.Server

// testLeaseTTL is what test backends ask for: the shortest lease etcd grants with its
// default election timeout (1s). A vanished backend's keys go within the conformance
// suite's bounds at its time scale (testScale).
const testLeaseTTL = 2 * time.Second

func TestMain(m *testing.M) {
	if code, ok := chaos.ContenderMain(); ok { // a contender process of TestChaos
		os.Exit(code)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp(memoryDir(), "simba-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(dir)
	switch {
	case errors.Is(err, testserver.ErrMissing) && testing.Short() && !testserver.Required():
		fmt.Fprintf(os.Stderr, "etcd tests skipped (-short): %v\n", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	default:
		server = srv
	}
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if shared.cluster != nil {
		_ = shared.cluster.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// memoryDir returns /dev/shm where it is a directory, "" (the temporary directory)
// otherwise. etcd syncs every raft write to its data directory: in memory, a busy shared
// disk does not slow the members' writes past the suite's call timeouts.
func memoryDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

func startServer(dir string) (*testserver.Server, error) {
	srv, err := testserver.Etcd(dir+"/single", testserver.EtcdOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return srv, srv.Start(ctx)
}

// needServer skips a test under -short when etcd is not installed (TestMain has failed
// the run otherwise).
func needServer(t testing.TB) {
	t.Helper()
	if server == nil {
		t.Skip("etcd not installed (-short)")
	}
}

// shared is the 3-member cluster, started by the first test that needs it.
var shared struct {
	once    sync.Once
	dir     string
	cluster *testserver.EtcdCluster
	err     error
}

func cluster(t testing.TB) *testserver.EtcdCluster {
	t.Helper()
	needServer(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp(memoryDir(), "simba-etcd-cluster-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		c, err := testserver.NewEtcdCluster(dir, 3, testserver.EtcdOptions{})
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if shared.err = c.Start(ctx); shared.err == nil {
			shared.cluster = c
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cluster
}

// newClient returns a client of endpoints, closed when the test ends.
func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testBackend is a backend on a client of its own, whose connections go through fault
// proxies, one per endpoint, that the test controls.
type testBackend struct {
	*etcd.Backend
	client  *clientv3.Client
	proxies []*faultproxy.Proxy
}

// Vanish implements tck.Vanisher: every connection of the backend's client swallows what
// it carries from now on, as if the process had died. Its lease expires on the server.
func (b *testBackend) Vanish() { b.cut() }

// cut swallows everything the backend's connections carry, until heal.
func (b *testBackend) cut() {
	for _, p := range b.proxies {
		p.Blackhole(faultproxy.Both)
	}
}

func (b *testBackend) heal() {
	for _, p := range b.proxies {
		p.Heal()
		p.Reset() // the connections lost bytes: the client dials again
	}
}

// newBackend returns a backend on the shared server with a lease of testLeaseTTL, closed
// when the test ends.
func newBackend(t testing.TB, opts ...etcd.Option) *testBackend {
	t.Helper()
	needServer(t)
	return newBackendAt(t, []string{server.Addr()}, opts...)
}

// newBackendAt returns a backend whose client reaches endpoints through proxies, with a
// lease of testLeaseTTL, closed when the test ends.
func newBackendAt(t testing.TB, endpoints []string, opts ...etcd.Option) *testBackend {
	t.Helper()
	tb := &testBackend{}
	var via []string
	for _, e := range endpoints {
		p, err := faultproxy.New(e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		tb.proxies = append(tb.proxies, p)
		via = append(via, p.Addr())
	}
	tb.client = newClient(t, via...)
	level := slog.LevelInfo // shown for failed tests only
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
	opts = append([]etcd.Option{etcd.WithLogger(log), etcd.WithLeaseTTL(testLeaseTTL)}, opts...)
	b, err := etcd.New(tb.client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() }) // before the client closes: cleanups run last first
	tb.Backend = b
	return tb
}
