package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/simba-go/simba/internal/faultproxy"
)

// SentinelMaster is the name under which a RedisSentinel's sentinels know their master.
const SentinelMaster = "simba"

// RedisSentinel is a Redis deployment with automatic failover on loopback: a primary, a
// replica of it, and three sentinels that promote the replica once the primary has been
// unreachable for DownAfter. Replication is asynchronous, as Redis's is: a failover loses
// what the replica had not received.
type RedisSentinel struct {
	// Primary and Replica are the data servers as started; after a failover the replica
	// is the master, and the primary, once it is started again, a replica of it.
	Primary, Replica *Server
	// Sentinels watch the primary; clients ask them where the master is.
	Sentinels []*Server
	// DownAfter is how long the first sentinel waits before it fails an unreachable
	// master over (the others wait longer: half of it more each): 500ms.
	DownAfter time.Duration

	link *faultproxy.Proxy // the replica's connection to the primary, once started
}

// NewRedisSentinel prepares the servers in dir (each in a directory of its own). Call
// Start to run them.
func NewRedisSentinel(dir string) (*RedisSentinel, error) {
	bin, err := lookPath("redis-server")
	if err != nil {
		return nil, err
	}
	d := &RedisSentinel{DownAfter: 500 * time.Millisecond}
	// No delay before a replica's first sync (Redis 7 waits 5 s for more replicas).
	if d.Primary, err = Redis(filepath.Join(dir, "primary"), "--repl-diskless-sync-delay", "0"); err != nil {
		return nil, err
	}
	d.Primary.Name = "redis-primary"
	if d.Replica, err = Redis(filepath.Join(dir, "replica"), "--repl-diskless-sync-delay", "0"); err != nil {
		return nil, err
	}
	d.Replica.Name = "redis-replica"
	// The replica reaches the primary through a fault proxy, which Start makes once the
	// primary listens, so that a test can hold replication back (CutReplication). After
	// a failover the sentinels reconfigure whichever server is not the master.
	args := d.Replica.args
	d.Replica.args = func() []string {
		host, port, _ := net.SplitHostPort(d.link.Addr())
		return append(args(), "--replicaof", host, port)
	}
	for i := range 3 {
		s, err := newServer(fmt.Sprintf("redis-sentinel-%d", i+1), filepath.Join(dir, fmt.Sprintf("sentinel%d", i+1)))
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(s.Dir, "sentinel.conf")
		written := false
		s.before = func(context.Context) error {
			if written { // the sentinel rewrites its configuration with what it learnt
				return nil
			}
			written = true
			// The sentinels fail the master at staggered times, so that the first asks
			// the others for their votes before they stand themselves: three that stood
			// at once each voted for itself (a CI run). A failed election is tried again
			// after twice the failover timeout: 5 s here, where Redis's default is 3 min.
			downAfter := d.DownAfter + time.Duration(i)*d.DownAfter/2
			conf := fmt.Sprintf(`bind %s
port %d
dir %s
sentinel monitor %s %s %d 2
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 5000
sentinel parallel-syncs %s 1
`, s.Host, s.Port, s.Dir, SentinelMaster, d.Primary.Host, d.Primary.Port, SentinelMaster, downAfter.Milliseconds(),
				SentinelMaster, SentinelMaster)
			return os.WriteFile(cfg, []byte(conf), 0o644)
		}
		s.args = func() []string { return []string{bin, cfg, "--sentinel"} }
		s.ready = func(ctx context.Context) error { return dialCheck(ctx, s.Addr(), "PING\r\n", "+PONG") }
		d.Sentinels = append(d.Sentinels, s)
	}
	return d, nil
}

// Start starts the primary, the replica and the sentinels, and waits until the replica is
// in sync and every sentinel knows it and the other two sentinels: only then can a
// failover happen without losing more than the last writes.
func (d *RedisSentinel) Start(ctx context.Context) error {
	if err := d.Primary.Start(ctx); err != nil {
		return err
	}
	if d.link == nil {
		link, err := faultproxy.New(d.Primary.Addr())
		if err != nil {
			return err
		}
		d.link = link
	}
	if err := d.Replica.Start(ctx); err != nil {
		return err
	}
	if err := awaitInSync(ctx, d.Replica); err != nil {
		return err
	}
	if err := inParallel(d.Sentinels, func(s *Server) error { return s.Start(ctx) }); err != nil {
		return err
	}
	for _, s := range d.Sentinels {
		if err := awaitSentinel(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// awaitSentinel waits until sentinel s knows a replica and two other sentinels.
func awaitSentinel(ctx context.Context, s *Server) error {
	c := goredis.NewSentinelClient(&goredis.Options{Addr: s.Addr(), DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer c.Close()
	for {
		m, err := c.Master(ctx, SentinelMaster).Result()
		if err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s does not know the replica and the other sentinels (%v, %v)", s.Name, m, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitInSync waits until replica reports its link to the master up: its first sync is
// done.
func awaitInSync(ctx context.Context, replica *Server) error {
	for {
		// Each check on its own deadline: dialCheck reads until the answer names the link
		// up, and the server keeps the connection open after an answer that does not.
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := dialCheck(cctx, replica.Addr(), "INFO replication\r\n", "master_link_status:up")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s not in sync with its master: %w", replica.Name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Master asks a sentinel where the master is now.
func (d *RedisSentinel) Master(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range d.Sentinels {
		c := goredis.NewSentinelClient(&goredis.Options{Addr: s.Addr(), DisableIdentity: true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		addr, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		_ = c.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1]), nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("testserver: no sentinel names a master: %w", errors.Join(errs...))
}

// CutReplication swallows what the primary sends its replica from now on, in both
// directions: the replica falls behind without knowing it, and a failover then loses
// every write since. The sentinels would point the replica at the primary directly
// after their failover timeout, which is therefore a minute.
func (d *RedisSentinel) CutReplication() { d.link.Blackhole(faultproxy.Both) }

// Stop stops every server and closes the replication proxy.
func (d *RedisSentinel) Stop() error {
	err := d.each((*Server).Stop)
	if d.link != nil {
		err = errors.Join(err, d.link.Close())
	}
	return err
}

// Kill kills every server (SIGKILL).
func (d *RedisSentinel) Kill() error { return d.each((*Server).Kill) }

// Pause stops every server with SIGSTOP.
func (d *RedisSentinel) Pause() error { return d.each((*Server).Pause) }

// Resume continues every server.
func (d *RedisSentinel) Resume() error { return d.each((*Server).Resume) }

func (d *RedisSentinel) each(f func(*Server) error) error {
	return inParallel(append([]*Server{d.Primary, d.Replica}, d.Sentinels...), f)
}

// Addr returns the sentinels' addresses, separated by commas: what a client is given.
func (d *RedisSentinel) Addr() string {
	addrs := make([]string, len(d.Sentinels))
	for i, s := range d.Sentinels {
		addrs[i] = s.Addr()
	}
	return strings.Join(addrs, ",")
}
