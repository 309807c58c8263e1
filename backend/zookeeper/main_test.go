package zookeeper_test

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/internal/zkdial"
)

// server is the ZooKeeper the tests share (tickTime 100ms: sessions of 200ms to 2s,
// containers reaped every 100ms). Nil when it is not installed and the run is -short.
var server *testserver.Server

// sessionTimeout is what test backends ask for: the most the shared server grants
// (20 ticks of 100ms). Shorter sessions expire whenever this shared two-core machine
// stalls the client or the server for a second; a vanished backend's session still
// expires well inside the conformance suite's take-over bound (3.5s).
const sessionTimeout = 2 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if fuzzing() || listing() {
		return m.Run() // fuzz targets need no server, nor does -list
	}
	dir, err := os.MkdirTemp("", "simba-zk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(dir)
	switch {
	case errors.Is(err, testserver.ErrMissing) && testing.Short() && !testserver.Required():
		fmt.Fprintf(os.Stderr, "zookeeper tests skipped (-short): %v\n", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	default:
		server = srv
		if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
			if err := warmUp(srv.Addr(), 3000); err != nil {
				fmt.Fprintln(os.Stderr, "warm-up:", err)
				_ = srv.Stop()
				return 1
			}
		}
	}
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if slow.srv != nil {
		_ = slow.srv.Stop()
		_ = os.RemoveAll(slow.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// fuzzing reports whether this process fuzzes (as coordinator or worker).
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

// listing reports whether the run only lists tests (-test.list).
func listing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

func startServer(dir string) (*testserver.Server, error) {
	srv, err := testserver.ZooKeeper(dir, testserver.ZooKeeperOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return srv, srv.Start(ctx)
}

// warmUp runs n create/list/delete cycles so that the JVM has compiled the request path
// before benchmarks time it.
func warmUp(addr string, n int) error {
	conn, _, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(zkdial.Dial))
	if err != nil {
		return err
	}
	defer conn.Close()
	for range n {
		p, err := conn.Create("/warmup/_c_x-latch-", []byte("w"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNoNode) { // the container was reaped once empty
			if _, err := conn.CreateContainer("/warmup", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if _, _, err := conn.Children("/warmup"); err != nil {
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

// needServer skips a test under -short when ZooKeeper is not installed (TestMain has
// failed the run otherwise).
func needServer(t testing.TB) {
	t.Helper()
	if server == nil {
		t.Skip("zookeeper not installed (-short)")
	}
}

// quiet discards go-zookeeper's own log lines, which it writes from its goroutines,
// also after a test has ended.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// testBackend is a backend on a connection of its own whose network the test controls.
// Vanish cuts the connection and refuses new ones, as if the process had died: the
// session expires on the server after its timeout.
type testBackend struct {
	*zookeeper.Backend
	net *network
}

// Vanish implements tck.Vanisher.
func (b *testBackend) Vanish() { b.net.cut(true) }

// newBackend returns a backend with a session of its own (timeout 2s), closed when the
// test ends.
func newBackend(t testing.TB, opts ...zookeeper.Option) *testBackend {
	t.Helper()
	return newBackendOn(t, &network{}, opts...)
}

func newBackendOn(t testing.TB, n *network, opts ...zookeeper.Option) *testBackend {
	t.Helper()
	needServer(t)
	return newBackendAt(t, server, sessionTimeout, n, opts...)
}

// newBackendAt returns a backend on srv asking for the given session timeout, dialing
// through n, closed when the test ends.
func newBackendAt(t testing.TB, srv *testserver.Server, timeout time.Duration, n *network, opts ...zookeeper.Option) *testBackend {
	t.Helper()
	level := slog.LevelInfo // shown for failed tests only
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn // benchmarks always print
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
	opts = append([]zookeeper.Option{zookeeper.WithLogger(log)}, opts...)
	if n.handshake == 0 {
		n.handshake = timeout / 2
	}
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{srv.Addr()}, timeout,
			zk.WithEventCallback(events), zk.WithDialer(n.dial), zk.WithLogger(quiet{}))
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &testBackend{Backend: b, net: n}
}

// network dials ZooKeeper for one connection and can cut it.
type network struct {
	mu     sync.Mutex
	refuse bool
	conns  []net.Conn
	// wrap, when set, wraps every new connection.
	wrap func(net.Conn) net.Conn
	// handshake bounds the wait for the server's first answer (zookeeper.Dialer), as
	// users are told to: a restarted server can take a connection and never answer.
	handshake time.Duration
}

var errRefused = errors.New("test network: connection refused")

func (n *network) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refuse {
		return nil, errRefused
	}
	c, err := zookeeper.Dialer(n.handshake)(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	n.conns = append(n.conns, c)
	if n.wrap != nil {
		return n.wrap(zkdial.Wrap(c)), nil
	}
	return zkdial.Wrap(c), nil
}

// spied returns a backend whose connection shows seen each request before it goes out
// (see spy).
func spied(t testing.TB, seen func(op int32, path string), opts ...zookeeper.Option) *testBackend {
	t.Helper()
	return newBackendOn(t, &network{wrap: func(c net.Conn) net.Conn { return &spy{Conn: c, seen: seen} }}, opts...)
}

// perNode makes a backend watch every mutex per node, as the ZooKeeper recipe does, for
// the tests of that way of watching (see zookeeper.WithQueueWatchLimit).
var perNode = zookeeper.WithQueueWatchLimit(0)

// spy passes a connection's bytes through and shows seen every request first, with the
// node it names ("" for requests that name none): go-zookeeper writes each request whole,
// in one Write, from its send loop, so the request waits for seen to return.
type spy struct {
	net.Conn
	seen  func(op int32, path string)
	first bool // the connect request, which has no request header, has been written
}

func (s *spy) Write(p []byte) (int, error) {
	if s.first && len(p) >= 12 {
		s.seen(int32(binary.BigEndian.Uint32(p[8:12])), requestPath(p))
	}
	s.first = true
	return s.Conn.Write(p)
}

// requestPath returns the node a request names: its body begins with the path for the
// operations below (length, then bytes).
func requestPath(p []byte) string {
	switch binary.BigEndian.Uint32(p[8:12]) {
	case opCreate, opCreate2, opDelete, opExists, opGetData, opGetChildren2, opSync, opAddWatch, opRemoveWatches:
	default:
		return ""
	}
	if len(p) < 16 {
		return ""
	}
	n := int(binary.BigEndian.Uint32(p[12:16]))
	if n < 0 || 16+n > len(p) {
		return ""
	}
	return string(p[16 : 16+n])
}

// cut closes every connection; with refuse, new ones fail until heal.
func (n *network) cut(refuse bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refuse = refuse
	for _, c := range n.conns {
		_ = c.Close()
	}
	n.conns = nil
}

func (n *network) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refuse = false
}

// adminConn returns a plain connection for inspecting the server, closed when the test
// ends.
func adminConn(t testing.TB) *zk.Conn {
	t.Helper()
	needServer(t)
	return adminConnAt(t, server)
}

func adminConnAt(t testing.TB, srv *testserver.Server) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{srv.Addr()}, 2*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(zkdial.Dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// fourLetter sends a ZooKeeper four-letter command to the test server and returns the
// answer.
func fourLetter(t testing.TB, cmd string) string {
	t.Helper()
	return fourLetterAt(t, server.Addr(), cmd)
}

// fourLetterAt sends a four-letter command to the server at addr and returns the answer.
func fourLetterAt(t testing.TB, addr, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// watchedPaths returns the paths under prefix that sessions other than except watch
// (four-letter word wchc: a session per line, then its watched paths indented).
func watchedPaths(t testing.TB, prefix string, except int64) []string {
	t.Helper()
	var out []string
	skip := false
	for _, line := range strings.Split(fourLetter(t, "wchc"), "\n") {
		p := strings.TrimSpace(line)
		if !strings.HasPrefix(line, "\t") {
			skip = p == fmt.Sprintf("0x%x", except)
			continue
		}
		if !skip && strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// slow is a second server, with tickTime 200ms (sessions up to 4s), for the tests that
// stop the server or need a session to survive a client's reconnect delay (go-zookeeper
// waits a second before it dials again). Started by the first test that needs it.
var slow struct {
	once sync.Once
	srv  *testserver.Server
	dir  string
	err  error
}

func slowServer(t testing.TB) *testserver.Server {
	t.Helper()
	needServer(t)
	slow.once.Do(func() {
		if slow.dir, slow.err = os.MkdirTemp("", "simba-zk-slow-"); slow.err != nil {
			return
		}
		srv, err := testserver.ZooKeeper(slow.dir, testserver.ZooKeeperOptions{TickTime: 200 * time.Millisecond})
		if err != nil {
			slow.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if slow.err = srv.Start(ctx); slow.err == nil {
			slow.srv = srv
		}
	})
	if slow.err != nil {
		t.Fatal(slow.err)
	}
	return slow.srv
}

// watchedBy returns the paths that session watches.
func watchedBy(t testing.TB, session int64) []string {
	t.Helper()
	return watchedFrom(fourLetter(t, "wchc"), session)
}

// watchedFrom returns the paths that session watches, from a wchc answer.
func watchedFrom(wchc string, session int64) []string {
	var out []string
	mine := false
	for _, line := range strings.Split(wchc, "\n") {
		if !strings.HasPrefix(line, "\t") {
			mine = strings.TrimSpace(line) == fmt.Sprintf("0x%x", session)
			continue
		}
		if mine {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
