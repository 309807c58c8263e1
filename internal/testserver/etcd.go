package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// EtcdOptions tunes a test etcd.
type EtcdOptions struct {
	// HeartbeatInterval and ElectionTimeout are raft's timing; default etcd's own, 100ms
	// and 1s. The server grants no lease shorter than 1.5 × ElectionTimeout, rounded up to
	// whole seconds (2s with the defaults).
	HeartbeatInterval, ElectionTimeout time.Duration
	// PeerProxies puts fault proxies on every peer connection of a cluster, so that
	// EtcdCluster.Isolate can cut a member off. The relay that carries the members'
	// requests runs in the test's process, where its goroutines come and go with their
	// connections: a test that counts goroutines wants a cluster without.
	PeerProxies bool
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
	peer int    // the peer port
	via  string // the peer URL it advertises, the address of the proxy before its peer port; empty: its own
	data string
}

// peerURL returns the URL the member listens on for its peers.
func (m etcdMember) peerURL() string {
	return "http://" + m.s.Host + ":" + strconv.Itoa(m.peer)
}

// advertised returns the peer URL the other members reach the member at.
func (m etcdMember) advertised() string {
	if m.via != "" {
		return m.via
	}
	return m.peerURL()
}

// args returns the member's command line in a cluster whose --initial-cluster is cluster.
func (m etcdMember) args(bin, cluster string, o EtcdOptions) []string {
	client := "http://" + m.s.Addr()
	return []string{bin,
		"--name", m.name, "--data-dir", m.data,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.advertised(),
		"--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "simba-test",
		"--heartbeat-interval", strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(o.ElectionTimeout.Milliseconds(), 10),
		// As etcd 3.5 and later do by default: a member cut off from the others does not
		// force an election when it rejoins.
		"--pre-vote",
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
	m.s.repick = func() (err error) {
		m.peer, err = FreePort()
		return err
	}
	return m.s, nil
}

// EtcdCluster is an etcd cluster of members on loopback, each with a data directory of
// its own. With EtcdOptions.PeerProxies, its peer connections all go through fault
// proxies: a test can cut a member off from the others while it goes on answering its
// clients (Isolate), as a member on the wrong side of a partition does.
//
// Members reach each other over HTTP. Each member's HTTP client goes through a proxy of
// its own (its HTTP_PROXY, out[i]) to the relay, an HTTP forward proxy, and each member
// advertises the address of a proxy in front of its peer port (in[i]) as its peer URL. So
// every connection member i opens to another goes through out[i], and every connection
// another opens to it through in[i]. The peer URLs name the host "localhost." rather
// than 127.0.0.1: Go's HTTP client sends no request for a loopback address or "localhost"
// through a proxy, and "localhost." resolves to the same address.
type EtcdCluster struct {
	// Members are the members; a client reaches Members[i] at its Addr. Each can be
	// stopped, killed, paused and started again on its own (with its data).
	Members []*Server

	relay   *peerRelay          // nil without EtcdOptions.PeerProxies
	in, out []*faultproxy.Proxy // by member: before its peer port; its way to the relay
	proxies []*faultproxy.Proxy // every proxy, for closeLinks
}

// NewEtcdCluster prepares a cluster of n members (n ≥ 3) in dir, each in a directory of
// its own, and the proxies between them. Call Start to run it.
func NewEtcdCluster(dir string, n int, o EtcdOptions) (*EtcdCluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("testserver: an etcd cluster of %d members; it takes at least 3", n)
	}
	bin, err := lookPath("etcd")
	if err != nil {
		return nil, err
	}
	o.defaults()
	c := &EtcdCluster{}
	if o.PeerProxies {
		if c.relay, err = newPeerRelay(); err != nil {
			return nil, err
		}
	}
	members := make([]etcdMember, n)
	urls := make([]string, n)
	for i := range n {
		m, err := newEtcdMember(fmt.Sprintf("etcd-%d", i+1), filepath.Join(dir, strconv.Itoa(i+1)))
		if err != nil {
			return nil, errors.Join(err, c.closeLinks())
		}
		if o.PeerProxies {
			if err := c.link(&m); err != nil {
				return nil, errors.Join(err, c.closeLinks())
			}
		}
		members[i], urls[i] = m, m.name+"="+m.advertised()
	}
	cluster := strings.Join(urls, ",")
	for _, m := range members {
		m.s.args = func() []string { return m.args(bin, cluster, o) }
		c.Members = append(c.Members, m.s)
	}
	return c, nil
}

// link puts m's peer connections through proxies: in front of its peer port, and in
// front of the relay as its HTTP_PROXY.
func (c *EtcdCluster) link(m *etcdMember) error {
	in, err1 := faultproxy.New(net.JoinHostPort(m.s.Host, strconv.Itoa(m.peer)))
	out, err2 := faultproxy.New(c.relay.addr())
	for _, p := range []*faultproxy.Proxy{in, out} {
		if p != nil {
			c.proxies = append(c.proxies, p)
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	c.in, c.out = append(c.in, in), append(c.out, out)
	_, port, _ := net.SplitHostPort(in.Addr())
	m.via = "http://localhost.:" + port
	m.s.env = []string{"HTTP_PROXY=http://" + out.Addr(), "http_proxy=http://" + out.Addr(), "NO_PROXY=", "no_proxy=",
		"GODEBUG=netdns=go"} // Go's own resolver reads "localhost." in /etc/hosts
	return nil
}

// Start starts every member that is not running, at once (none is healthy before a quorum
// is up), and waits until each is healthy: it has a leader and answers a read through it.
func (c *EtcdCluster) Start(ctx context.Context) error { return startStopped(ctx, c.Members) }

// Stop stops every member and closes the proxies between them: the cluster is done.
func (c *EtcdCluster) Stop() error {
	return errors.Join(inParallel(c.Members, (*Server).Stop), c.closeLinks())
}

// Kill kills every member (SIGKILL).
func (c *EtcdCluster) Kill() error { return inParallel(c.Members, (*Server).Kill) }

// Pause stops every member with SIGSTOP.
func (c *EtcdCluster) Pause() error { return inParallel(c.Members, (*Server).Pause) }

// Resume continues every member.
func (c *EtcdCluster) Resume() error { return inParallel(c.Members, (*Server).Resume) }

// Addr returns the client addresses of every member, separated by commas.
func (c *EtcdCluster) Addr() string { return strings.Join(c.Endpoints(), ",") }

// Endpoints returns the client addresses of every member.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, s := range c.Members {
		out[i] = s.Addr()
	}
	return out
}

// Isolate cuts member i off from every other member in both directions: what either side
// sends is swallowed, and the connections stay open. Member i goes on answering its
// clients from its own state; it has no leader once its election timeout has passed
// (if it led, it steps down once it misses its quorum), and the others go on without it.
// It takes a cluster made with EtcdOptions.PeerProxies.
func (c *EtcdCluster) Isolate(i int) error {
	if c.relay == nil {
		return errors.New("testserver: Isolate on an etcd cluster without peer proxies (EtcdOptions.PeerProxies)")
	}
	c.in[i].Blackhole(faultproxy.Both)
	c.out[i].Blackhole(faultproxy.Both)
	return nil
}

// Rejoin ends the isolation of member i. The connections that were cut are reset (their
// streams lost bytes), so the members connect again.
func (c *EtcdCluster) Rejoin(i int) error {
	if c.relay == nil {
		return errors.New("testserver: Rejoin on an etcd cluster without peer proxies (EtcdOptions.PeerProxies)")
	}
	for _, p := range []*faultproxy.Proxy{c.in[i], c.out[i]} {
		p.Heal()
		p.Reset()
	}
	return nil
}

func (c *EtcdCluster) closeLinks() error {
	var errs []error
	for _, p := range c.proxies {
		errs = append(errs, p.Close())
	}
	if c.relay != nil {
		errs = append(errs, c.relay.close())
	}
	return errors.Join(errs...)
}

// peerRelay is an HTTP forward proxy for the members' peer requests, which it forwards
// as they come, and their answers (raft's streams among them) as they go.
type peerRelay struct {
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	closeOnce sync.Once
	done      chan struct{} // closed when Serve has returned
}

func newPeerRelay() (*peerRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: time.Second}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost." {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	r := &peerRelay{ln: ln, transport: transport, done: make(chan struct{})}
	quiet := log.New(io.Discard, "", 0) // broken connections are the faults
	r.srv = &http.Server{ErrorLog: quiet, Handler: &httputil.ReverseProxy{
		// A proxied request names its target in full: forward it there.
		Rewrite:       func(*httputil.ProxyRequest) {},
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      quiet,
	}}
	go func() { // ends with close
		_ = r.srv.Serve(ln)
		close(r.done)
	}()
	return r, nil
}

func (r *peerRelay) addr() string { return r.ln.Addr().String() }

func (r *peerRelay) close() error {
	var err error
	r.closeOnce.Do(func() {
		err = r.srv.Close()
		<-r.done
		r.transport.CloseIdleConnections()
	})
	return err
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
