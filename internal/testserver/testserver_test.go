package testserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "simba-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// startRedis starts a Redis of the test's own, stopped when the test ends; ctx bounds
// the test's calls.
func startRedis(t *testing.T) (s *Server, ctx context.Context) {
	t.Helper()
	s, err := Redis(shortDir(t))
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() { _ = s.Stop() })
	return s, ctx
}

func TestRedisStartKillRestartPause(t *testing.T) {
	s, ctx := startRedis(t)
	pid := s.PID()
	require.NotZero(t, pid)
	require.NoError(t, s.Kill())
	assert.Zero(t, s.PID())
	assert.Error(t, dialCheck(ctx, s.Addr(), "PING\r\n", "+PONG"))
	require.NoError(t, s.Start(ctx), "restart on the same port")
	assert.NotEqual(t, pid, s.PID())

	require.NoError(t, s.Pause())
	pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	assert.Error(t, dialCheck(pctx, s.Addr(), "PING\r\n", "+PONG"), "a paused server does not answer")
	pcancel()
	require.NoError(t, s.Resume())
	assert.NoError(t, dialCheck(ctx, s.Addr(), "PING\r\n", "+PONG"))
	require.NoError(t, s.Stop())
}

func TestMariaDBStartAndRestart(t *testing.T) {
	m, err := NewMariaDB(shortDir(t))
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, m.Start(ctx))
	t.Cleanup(func() { _ = m.Stop() })
	require.NoError(t, m.Exec(ctx, "CREATE TABLE simba.t (a int); INSERT INTO simba.t VALUES (7);"))
	require.NoError(t, m.Kill())
	require.NoError(t, m.Start(ctx))
	assert.NoError(t, m.Exec(ctx, "SELECT a FROM simba.t WHERE a = 7"), "data kept across a crash")
	assert.Contains(t, m.DSN(), "interpolateParams=true")
}

func TestZooKeeperStart(t *testing.T) {
	z, err := ZooKeeper(shortDir(t), ZooKeeperOptions{})
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, z.Start(ctx))
	t.Cleanup(func() { _ = z.Stop() })
	require.NoError(t, dialCheck(ctx, z.Addr(), "ruok", "imok"))
	require.NoError(t, z.Stop())
}

func TestRedisCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nodes []*Server
	for range 3 {
		n, err := RedisClusterNode(shortDir(t))
		Need(t, err)
		require.NoError(t, n.Start(ctx))
		t.Cleanup(func() { _ = n.Stop() })
		nodes = append(nodes, n)
	}
	require.NoError(t, FormCluster(ctx, nodes...))
}

func TestPostgresStartKillRestart(t *testing.T) {
	p, err := NewPostgres(shortDir(t))
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	t.Cleanup(func() { _ = p.Stop() })
	require.NoError(t, p.Exec(ctx, "CREATE TABLE t (a int); INSERT INTO t VALUES (7);"))
	require.NoError(t, p.Kill())
	assert.Zero(t, p.PID())
	require.NoError(t, p.Start(ctx), "restart on the same port and data directory after a crash")
	assert.NoError(t, p.Exec(ctx, "DO $$ BEGIN IF (SELECT a FROM t) <> 7 THEN RAISE 'lost'; END IF; END $$"), "data kept across a crash")
	assert.Contains(t, p.DSN(), "sslmode=disable")
	require.NoError(t, p.Stop())
	assert.Zero(t, p.PID())
}

// A paused PostgreSQL answers nothing, not even on a connection opened before the pause
// (its backends are paused too); Kill leaves no backend behind.
func TestPostgresPauseReachesTheBackends(t *testing.T) {
	p, err := NewPostgres(shortDir(t))
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	t.Cleanup(func() { _ = p.Stop() })
	require.NoError(t, p.Exec(ctx, "SELECT 1"))
	pid := p.PID()
	kids := children(pid)
	require.NotEmpty(t, kids, "the postmaster's background processes")
	require.NoError(t, p.Pause())
	for _, c := range append(kids, pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		t.Logf("%s", b)
		// A backend that exited just before the pause stays a zombie ('Z') until the
		// postmaster, paused, reaps it: it runs nothing either.
		assert.Eventually(t, func() bool { _, state := stat(c); return state == 'T' || state == 'Z' || state == 0 }, 5*time.Second, 5*time.Millisecond, "process %d stopped (or gone)", c)
	}
	require.NoError(t, p.Resume())
	require.NoError(t, p.Exec(ctx, "SELECT 1"))
	kids = children(pid)
	require.NoError(t, p.Kill())
	for _, c := range kids {
		assert.False(t, running(c), "backend %d left running", c)
	}
	require.NoError(t, p.Start(ctx), "restart after a crash")
}

// TestPauseReturnsOnceStopped: every thread of a paused server is stopped when Pause
// returns. kill(2) returns before they stop, and jdbc's TestStopWhileTheServerStalls saw
// MariaDB answer a release sent right after Pause (1 run in 25).
func TestPauseReturnsOnceStopped(t *testing.T) {
	s, _ := startRedis(t)
	for i := range 30 {
		require.NoError(t, s.Pause())
		if !allStopped([]int{s.PID()}) {
			t.Fatalf("pause %d: a thread of the server still runs after Pause returned", i)
		}
		require.NoError(t, s.Resume())
	}
}

// TestEnsembleIsolatesAFollower checks the ensemble's fault switch: a follower cut off from
// the others stops serving once it gives up on its leader, and serves again once it
// rejoins, while the leader goes on with the third server.
func TestEnsembleIsolatesAFollower(t *testing.T) {
	e, err := NewZooKeeperEnsemble(shortDir(t), 3, ZooKeeperOptions{TickTime: 100 * time.Millisecond, SyncLimit: 5})
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = e.Stop() })
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	e.Isolate(follower)
	for {
		if _, err := zkMode(ctx, e.Servers[follower].Addr()); err != nil {
			break // it gave up on its leader
		}
		if ctx.Err() != nil {
			t.Fatalf("%s still serves after it was cut off from its leader", e.Servers[follower].Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := e.Leader(ctx); err != nil || got != leader {
		t.Fatalf("leader %d (%v), want %d: the other two keep their quorum", got, err, leader)
	}
	e.Rejoin(follower)
	if err := e.AwaitServing(ctx, follower); err != nil {
		t.Fatal(err)
	}
}

func TestEtcdStartAndRestart(t *testing.T) {
	e, err := Etcd(shortDir(t), EtcdOptions{})
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop() })
	require.NoError(t, etcdHealthy(ctx, e.Addr()))
	require.NoError(t, e.Kill())
	require.Error(t, etcdHealthy(ctx, e.Addr()), "killed")
	require.NoError(t, e.Start(ctx), "restarted on its data")
	require.NoError(t, e.Stop())
}

func TestEtcdCluster(t *testing.T) {
	c, err := NewEtcdCluster(shortDir(t), 3, EtcdOptions{})
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop() })
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Members[leader].Stop())
	other := (leader + 1) % 3
	require.NoError(t, c.AwaitHealthy(ctx, other), "two members of three keep a quorum")
	next, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, leader, next, "a new leader")
	require.NoError(t, c.Members[leader].Start(ctx))
	require.NoError(t, c.Stop())
}

// TestEtcdClusterIsolatesAMember checks the cluster's fault switch: a follower cut off
// from the others has no leader once its election timeout has passed, while the other
// two keep theirs, and it is healthy again once it rejoins.
func TestEtcdClusterIsolatesAMember(t *testing.T) {
	c, err := NewEtcdCluster(shortDir(t), 3, EtcdOptions{PeerProxies: true})
	Need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = c.Stop() })
	require.NoError(t, c.Start(ctx))
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	follower := (leader + 1) % 3
	require.NoError(t, c.Isolate(follower))
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err := etcdHealthy(cctx, c.Members[follower].Addr())
		ccancel()
		if err != nil {
			t.Logf("the isolated follower: %v", err)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s still healthy after it was cut off from the others", c.Members[follower].Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, etcdHealthy(ctx, c.Members[leader].Addr()), "the other two keep their quorum")
	got, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, leader, got, "the same leader")
	require.NoError(t, c.Rejoin(follower))
	require.NoError(t, c.AwaitHealthy(ctx, follower))
}

// argAfter returns the argument that follows flag in s's command line.
func argAfter(t *testing.T, s *Server, flag string) string {
	t.Helper()
	args := s.args()
	i := slices.Index(args, flag)
	require.True(t, i >= 0 && i+1 < len(args), "no %s in %q", flag, args)
	return args[i+1]
}

// TestFirstStartMovesOffATakenSecondPort: a server whose second port (a cluster bus, a
// peer port) another process bound after it was picked starts on other ports.
func TestFirstStartMovesOffATakenSecondPort(t *testing.T) {
	for _, c := range []struct {
		name, flag string
		server     func(dir string) (*Server, error)
		port       func(arg string) string
	}{
		{"redis cluster bus", "--cluster-port", RedisClusterNode, func(a string) string { return a }},
		{"etcd peer", "--listen-peer-urls", func(dir string) (*Server, error) { return Etcd(dir, EtcdOptions{}) },
			func(a string) string { return a[strings.LastIndex(a, ":")+1:] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.server(shortDir(t))
			Need(t, err)
			taken := c.port(argAfter(t, s, c.flag))
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", taken))
			require.NoError(t, err)
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, s.Start(ctx))
			t.Cleanup(func() { _ = s.Stop() })
			assert.NotEqual(t, taken, c.port(argAfter(t, s, c.flag)))
		})
	}
}
