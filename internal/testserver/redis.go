package testserver

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Redis prepares a redis-server without persistence (the owner keys vanish on a restart)
// in dir on a free loopback port; extra arguments are appended to its command line. Call
// Start to run it.
func Redis(dir string, extra ...string) (*Server, error) {
	bin, err := lookPath("redis-server")
	if err != nil {
		return nil, err
	}
	s, err := newServer("redis", dir)
	if err != nil {
		return nil, err
	}
	s.args = func() []string {
		return append([]string{bin,
			"--bind", s.Host, "--port", strconv.Itoa(s.Port), "--dir", s.Dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
		}, extra...)
	}
	s.ready = func(ctx context.Context) error {
		return dialCheck(ctx, s.Addr(), "PING\r\n", "+PONG")
	}
	return s, nil
}

// RedisClusterNode prepares a redis-server with cluster mode enabled, for a cluster the
// caller forms (see FormCluster). Its cluster bus listens on a second free port: the
// default, the client port + 10000, may lie beyond 65535.
func RedisClusterNode(dir string) (*Server, error) {
	bus, err := FreePort()
	if err != nil {
		return nil, err
	}
	s, err := Redis(dir)
	if err != nil {
		return nil, err
	}
	s.Name = "redis-cluster-node"
	plain := s.args
	s.args = func() []string {
		return append(plain(), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus), "--repl-diskless-sync-delay", "0")
	}
	// The bus port is taken as often as the client port: another test's server may have
	// bound it since FreePort found it free.
	s.repick = func() (err error) {
		bus, err = FreePort()
		return err
	}
	return s, nil
}

// FormCluster joins started cluster nodes into one cluster with the 16384 slots spread over
// them and no replicas, and waits until every node reports the cluster as ok.
func FormCluster(ctx context.Context, nodes ...*Server) error {
	return formCluster(ctx, 0, nodes)
}

// formCluster is FormCluster with replicas replicas per primary, which redis-cli picks
// among the nodes.
func formCluster(ctx context.Context, replicas int, nodes []*Server) error {
	cli, err := lookPath("redis-cli")
	if err != nil {
		return err
	}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	for _, n := range nodes {
		for {
			out, err := exec.CommandContext(ctx, cli, "-h", n.Host, "-p", strconv.Itoa(n.Port), "cluster", "info").CombinedOutput()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("redis cluster node %s not ok: %s", n.Addr(), out)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
