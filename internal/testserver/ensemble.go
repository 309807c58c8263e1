package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// ZooKeeperEnsemble is a ZooKeeper ensemble on loopback: n servers, each of which reaches
// every other through fault proxies of its own (one to the other's quorum port, one to its
// election port), so that a test can cut a server off from the rest of the ensemble while
// it goes on answering its clients, as a follower on the wrong side of a partition does.
type ZooKeeperEnsemble struct {
	// Servers are the members; a client reaches Servers[i] directly at its Addr. Each
	// can be stopped, killed, paused and started again on its own.
	Servers []*Server

	links [][]peerLink // links[i][j]: server i's connections to server j
}

// peerLink is the pair of proxies through which one server reaches another.
type peerLink struct{ quorum, election *faultproxy.Proxy }

func (l peerLink) each(f func(*faultproxy.Proxy)) {
	for _, p := range []*faultproxy.Proxy{l.quorum, l.election} {
		if p != nil {
			f(p)
		}
	}
}

// NewZooKeeperEnsemble prepares an ensemble of n servers (n ≥ 3) in dir, each in a
// directory of its own, and the proxies between them. Call Start to run it.
func NewZooKeeperEnsemble(dir string, n int, o ZooKeeperOptions) (*ZooKeeperEnsemble, error) {
	if n < 3 {
		return nil, fmt.Errorf("testserver: an ensemble of %d servers; it takes at least 3", n)
	}
	java, err := zkJava()
	if err != nil {
		return nil, err
	}
	o.defaults()
	e := &ZooKeeperEnsemble{links: make([][]peerLink, n)}
	type ports struct{ quorum, election int }
	peers := make([]ports, n)
	for i := range n {
		s, err := newServer(fmt.Sprintf("zookeeper-%d", i+1), filepath.Join(dir, fmt.Sprint(i+1)))
		if err != nil {
			return nil, errors.Join(err, e.closeLinks())
		}
		e.Servers = append(e.Servers, s)
		q, err1 := FreePort()
		el, err2 := FreePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, errors.Join(err, e.closeLinks())
		}
		peers[i] = ports{q, el}
	}
	for i := range n {
		e.links[i] = make([]peerLink, n)
		for j := range n {
			if i == j {
				continue
			}
			q, err1 := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", peers[j].quorum))
			el, err2 := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", peers[j].election))
			e.links[i][j] = peerLink{q, el}
			if err := errors.Join(err1, err2); err != nil {
				return nil, errors.Join(err, e.closeLinks())
			}
		}
	}
	for i, s := range e.Servers {
		data := filepath.Join(s.Dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, errors.Join(err, e.closeLinks())
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintln(i+1)), 0o644); err != nil {
			return nil, errors.Join(err, e.closeLinks())
		}
		// Server i knows itself by its own ports and every other member by the proxies
		// of link i→j.
		var members strings.Builder
		for j := range n {
			q, el := fmt.Sprintf("127.0.0.1:%d", peers[j].quorum), fmt.Sprintf("127.0.0.1:%d", peers[j].election)
			if j != i {
				q, el = e.links[i][j].quorum.Addr(), e.links[i][j].election.Addr()
			}
			fmt.Fprintf(&members, "server.%d=%s:%s\n", j+1, q, strings.TrimPrefix(el, "127.0.0.1:"))
		}
		cfg := filepath.Join(s.Dir, "zoo.cfg")
		s.before = func(context.Context) error {
			// initLimit, the ticks a new leader waits for its followers to sync, is
			// generous: a JVM warming up on a busy machine is slow, and a leader that
			// gives up starts another election.
			conf := zkConfig(data, s.Port, s.Host, o) + fmt.Sprintf("initLimit=%d\nsyncLimit=%d\n", max(o.SyncLimit, 50), o.SyncLimit) +
				members.String()
			return os.WriteFile(cfg, []byte(conf), 0o644)
		}
		s.args = func() []string { return zkCommand(java, s.Dir, cfg, o) }
		s.ready = func(ctx context.Context) error {
			mode, err := zkMode(ctx, s.Addr())
			if err != nil {
				return err
			}
			if mode != "leader" && mode != "follower" {
				return fmt.Errorf("mode %s", mode)
			}
			return nil
		}
	}
	return e, nil
}

// Start starts every server that is not running, in parallel (none is ready before a
// quorum is up), and waits until each serves as the leader or a follower.
func (e *ZooKeeperEnsemble) Start(ctx context.Context) error { return startStopped(ctx, e.Servers) }

// Stop stops every server and closes the proxies between them: the ensemble is done.
func (e *ZooKeeperEnsemble) Stop() error {
	return errors.Join(e.each((*Server).Stop), e.closeLinks())
}

// Kill kills every server (SIGKILL).
func (e *ZooKeeperEnsemble) Kill() error { return e.each((*Server).Kill) }

// Pause stops every server with SIGSTOP.
func (e *ZooKeeperEnsemble) Pause() error { return e.each((*Server).Pause) }

// Resume continues every server.
func (e *ZooKeeperEnsemble) Resume() error { return e.each((*Server).Resume) }

func (e *ZooKeeperEnsemble) each(f func(*Server) error) error { return inParallel(e.Servers, f) }

// inParallel applies f to every server at once and joins the errors.
func inParallel(list []*Server, f func(*Server) error) error {
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Go(func() { errs[i] = f(s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startStopped starts the servers of list that are not running, at once.
func startStopped(ctx context.Context, list []*Server) error {
	return inParallel(list, func(s *Server) error {
		if s.PID() != 0 {
			return nil
		}
		return s.Start(ctx)
	})
}

// Addr returns the client addresses of every server, separated by commas, as a ZooKeeper
// connect string lists them.
func (e *ZooKeeperEnsemble) Addr() string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr()
	}
	return strings.Join(addrs, ",")
}

// Leader returns the index of the server that serves as the leader now.
func (e *ZooKeeperEnsemble) Leader(ctx context.Context) (int, error) {
	var modes []string
	for i, s := range e.Servers {
		mode, err := zkMode(ctx, s.Addr())
		if err != nil {
			mode = err.Error()
		}
		if mode == "leader" {
			return i, nil
		}
		modes = append(modes, fmt.Sprintf("%s: %s", s.Name, mode))
	}
	return -1, fmt.Errorf("testserver: no leader in the ensemble (%s)", strings.Join(modes, "; "))
}

// AwaitServing waits until server i serves clients as the leader or a follower, or ctx
// ends.
func (e *ZooKeeperEnsemble) AwaitServing(ctx context.Context, i int) error {
	s := e.Servers[i]
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.ready(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s not serving: %w", s.Name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Isolate cuts server i off from every other member in both directions: what either side
// sends is swallowed, and the connections stay open. Server i goes on answering its
// clients until it gives up on its leader (SyncLimit ticks), or, if it was the leader,
// until it loses its quorum.
func (e *ZooKeeperEnsemble) Isolate(i int) {
	e.peersOf(i, func(p *faultproxy.Proxy) { p.Blackhole(faultproxy.Both) })
}

// Rejoin ends the isolation of server i. The connections that were cut are reset (their
// streams lost bytes), so the servers connect again.
func (e *ZooKeeperEnsemble) Rejoin(i int) {
	e.peersOf(i, func(p *faultproxy.Proxy) {
		p.Heal()
		p.Reset()
	})
}

// peersOf applies f to every proxy between server i and another member, both ways.
func (e *ZooKeeperEnsemble) peersOf(i int, f func(*faultproxy.Proxy)) {
	for j := range e.Servers {
		if j != i {
			e.links[i][j].each(f)
			e.links[j][i].each(f)
		}
	}
}

func (e *ZooKeeperEnsemble) closeLinks() error {
	var errs []error
	for _, row := range e.links {
		for _, l := range row {
			l.each(func(p *faultproxy.Proxy) { errs = append(errs, p.Close()) })
		}
	}
	return errors.Join(errs...)
}

var modeLine = regexp.MustCompile(`(?m)^Mode: (\S+)`)

// zkMode returns the mode a ZooKeeper server reports to "srvr": "standalone", "leader",
// "follower", or an error while it serves no clients (electing a leader, cut off).
func zkMode(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(conn) // the server closes the connection after its answer
	if err != nil {
		return "", err
	}
	m := modeLine.FindSubmatch(answer)
	if m == nil {
		return "", fmt.Errorf("no mode in %q", strings.TrimSpace(string(answer)))
	}
	return string(m[1]), nil
}
