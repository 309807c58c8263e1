package testserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ZooKeeperOptions tunes a test ZooKeeper.
type ZooKeeperOptions struct {
	// TickTime is the server's tick; session timeouts are clamped to [2, 20] ticks.
	// Default 100ms, which allows sessions of 200ms to 2s.
	TickTime time.Duration
	// ContainerCheckInterval is how often the server reaps empty container nodes.
	// Default 100ms.
	ContainerCheckInterval time.Duration
	// SyncLimit, in an ensemble, is how many ticks a follower goes on without hearing from
	// its leader (and serving its clients) before it gives up on it. Default 20, which is
	// twice the longest session ZooKeeper grants: with ZooKeeper's own defaults (5 ticks of
	// 2s, sessions from 4s) a follower cut off from its leader also outlives sessions.
	SyncLimit int
}

func (o *ZooKeeperOptions) defaults() {
	if o.TickTime == 0 {
		o.TickTime = 100 * time.Millisecond
	}
	if o.ContainerCheckInterval == 0 {
		o.ContainerCheckInterval = 100 * time.Millisecond
	}
	if o.SyncLimit == 0 {
		o.SyncLimit = 20
	}
}

// The Debian package's jars.
const zkJar, slf4jJar = "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"

// zkJava returns the machine's java, once it has checked that ZooKeeper's jars are there.
func zkJava() (string, error) {
	java, err := lookPath("java")
	if err != nil {
		return "", err
	}
	for _, f := range []string{zkJar, slf4jJar} {
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("%w: %s", ErrMissing, f)
		}
	}
	return java, nil
}

// zkCommand returns the command line of a ZooKeeper server with the configuration file cfg,
// logging into dir.
func zkCommand(java, dir, cfg string, o ZooKeeperOptions) []string {
	return []string{java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir=" + dir,
		fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", o.ContainerCheckInterval.Milliseconds()),
		"-Dznode.container.maxPerMinute=100000",
		"-cp", zkJar + ":" + slf4jJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
}

// zkConfig returns the part of a server's configuration every test ZooKeeper shares.
func zkConfig(data string, port int, host string, o ZooKeeperOptions) string {
	return fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=%s
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,wchc,dump
forceSync=no
`, o.TickTime.Milliseconds(), data, port, host)
}

// ZooKeeper prepares a standalone ZooKeeper (the Debian package's jars on the machine's
// Java) in dir on a free loopback port. Call Start to run it.
func ZooKeeper(dir string, o ZooKeeperOptions) (*Server, error) {
	java, err := zkJava()
	if err != nil {
		return nil, err
	}
	o.defaults()
	s, err := newServer("zookeeper", dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	s.before = func(context.Context) error { // at every start: the port may have moved
		return os.WriteFile(cfg, []byte(zkConfig(data, s.Port, s.Host, o)), 0o644)
	}
	s.args = func() []string { return zkCommand(java, dir, cfg, o) }
	s.ready = func(ctx context.Context) error {
		if err := dialCheck(ctx, s.Addr(), "ruok", "imok"); err != nil {
			return err
		}
		return dialCheck(ctx, s.Addr(), "srvr", "Mode: standalone")
	}
	return s, nil
}
