package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EtcdOptions tunes a test etcd.
type EtcdOptions struct {
	// HeartbeatInterval and ElectionTimeout are raft's timing; default etcd's own, 100ms
	// and 1s. The server grants no lease shorter than 1.5 × ElectionTimeout, rounded up to
	// whole seconds (2s with the defaults).
	HeartbeatInterval, ElectionTimeout time.Duration
}

func (o *EtcdOptions) defaults() {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 100 * time.Millisecond
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = time.Second
	}
}

// etcdMember is what one member's command line needs besides the cluster's members.
type etcdMember struct {
	s    *Server
	name string
	peer int // the peer port
	data string
}

func (m etcdMember) peerURL() string {
	return "http://" + m.s.Host + ":" + strconv.Itoa(m.peer)
}

// args returns the member's command line in a cluster whose --initial-cluster is cluster.
func (m etcdMember) args(bin, cluster string, o EtcdOptions) []string {
	client := "http://" + m.s.Addr()
	return []string{bin,
		"--name", m.name, "--data-dir", m.data,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "simba-test",
		"--heartbeat-interval", strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(o.ElectionTimeout.Milliseconds(), 10),
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	}
}

// newEtcdMember prepares member name in dir on free client and peer ports. Its data
// directory is dir/data, mode 0700 as etcd wants it.
func newEtcdMember(name, dir string) (etcdMember, error) {
	s, err := newServer(name, dir)
	if err != nil {
		return etcdMember{}, err
	}
	peer, err := FreePort()
	if err != nil {
		return etcdMember{}, err
	}
	s.ready = func(ctx context.Context) error { return etcdHealthy(ctx, s.Addr()) }
	s.before = func(context.Context) error { return os.MkdirAll(filepath.Join(dir, "data"), 0o700) }
	return etcdMember{s: s, name: name, peer: peer, data: filepath.Join(dir, "data")}, nil
}

// Etcd prepares a single-member etcd (Debian's etcd-server) in dir on free loopback
// client and peer ports. Its data stays in dir/data across restarts; remove that directory
// while it is stopped for a store that starts empty. Call Start to run it.
func Etcd(dir string, o EtcdOptions) (*Server, error) {
	bin, err := lookPath("etcd")
	if err != nil {
		return nil, err
	}
	o.defaults()
	m, err := newEtcdMember("etcd", dir)
	if err != nil {
		return nil, err
	}
	m.s.args = func() []string { return m.args(bin, m.name+"="+m.peerURL(), o) }
	return m.s, nil
}

// EtcdCluster is an etcd cluster of members on loopback, each with a data directory of
// its own.
type EtcdCluster struct {
	// Members are the members; a client reaches Members[i] at its Addr. Each can be
	// stopped, killed, paused and started again on its own (with its data).
	Members []*Server
}

// NewEtcdCluster prepares a cluster of n members (n ≥ 3) in dir, each in a directory of
// its own. Call Start to run it.
func NewEtcdCluster(dir string, n int, o EtcdOptions) (*EtcdCluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("testserver: an etcd cluster of %d members; it takes at least 3", n)
	}
	bin, err := lookPath("etcd")
	if err != nil {
		return nil, err
	}
	o.defaults()
	members := make([]etcdMember, n)
	urls := make([]string, n)
	for i := range n {
		m, err := newEtcdMember(fmt.Sprintf("etcd-%d", i+1), filepath.Join(dir, strconv.Itoa(i+1)))
		if err != nil {
			return nil, err
		}
		members[i], urls[i] = m, m.name+"="+m.peerURL()
	}
	c := &EtcdCluster{}
	cluster := strings.Join(urls, ",")
	for _, m := range members {
		m.s.args = func() []string { return m.args(bin, cluster, o) }
		c.Members = append(c.Members, m.s)
	}
	return c, nil
}

// Start starts every member that is not running, at once (none is healthy before a quorum
// is up), and waits until each is healthy: it has a leader and answers a read through it.
func (c *EtcdCluster) Start(ctx context.Context) error { return startStopped(ctx, c.Members) }

// Stop stops every member.
func (c *EtcdCluster) Stop() error { return inParallel(c.Members, (*Server).Stop) }

// Endpoints returns the client addresses of every member.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, s := range c.Members {
		out[i] = s.Addr()
	}
	return out
}

// Leader returns the index of the member that is the leader now, as each member's
// /metrics says (etcd_server_is_leader).
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	var states []string
	for i, s := range c.Members {
		leads, err := etcdIsLeader(ctx, s.Addr())
		switch {
		case err != nil:
			states = append(states, fmt.Sprintf("%s: %v", s.Name, err))
		case leads:
			return i, nil
		default:
			states = append(states, s.Name+": follower")
		}
	}
	return -1, fmt.Errorf("testserver: no leader in the etcd cluster (%s)", strings.Join(states, "; "))
}

// etcdIsLeader reads etcd_server_is_leader from a member's /metrics.
func etcdIsLeader(ctx context.Context, addr string) (bool, error) {
	body, err := etcdGet(ctx, addr, "/metrics", 1<<22)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "etcd_server_is_leader "); ok {
			return strings.TrimSpace(v) == "1", nil
		}
	}
	return false, errors.New("no etcd_server_is_leader in /metrics")
}

// AwaitHealthy waits until member i is healthy (see Start), or ctx ends.
func (c *EtcdCluster) AwaitHealthy(ctx context.Context, i int) error {
	s := c.Members[i]
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := etcdHealthy(cctx, s.Addr())
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s not healthy: %w", s.Name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// healthClient keeps no idle connection, which would outlive the request (and a goroutine
// leak check) for nothing.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// etcdHealthy asks an etcd member's /health: true once it has a leader and a read through
// raft succeeds.
func etcdHealthy(ctx context.Context, addr string) error {
	body, err := etcdGet(ctx, addr, "/health", 4096)
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return errors.New("unhealthy: " + strings.TrimSpace(body))
	}
	return nil
}

// etcdGet returns the body, at most limit bytes, of an etcd member's HTTP endpoint path.
func etcdGet(ctx context.Context, addr, path string, limit int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
