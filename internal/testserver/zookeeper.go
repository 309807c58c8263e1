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
}

// ZooKeeper prepares a standalone ZooKeeper (the Debian package's jars on the machine's
// Java) in dir on a free loopback port. Call Start to run it.
func ZooKeeper(dir string, o ZooKeeperOptions) (*Server, error) {
	java, err := lookPath("java")
	if err != nil {
		return nil, err
	}
	const jar, slf4j = "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"
	for _, f := range []string{jar, slf4j} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMissing, f)
		}
	}
	if o.TickTime == 0 {
		o.TickTime = 100 * time.Millisecond
	}
	if o.ContainerCheckInterval == 0 {
		o.ContainerCheckInterval = 100 * time.Millisecond
	}
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
		conf := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=%s
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,wchc,dump
forceSync=no
`, o.TickTime.Milliseconds(), data, s.Port, s.Host)
		return os.WriteFile(cfg, []byte(conf), 0o644)
	}
	s.args = func() []string {
		return []string{java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dzookeeper.log.dir=" + dir,
			fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", o.ContainerCheckInterval.Milliseconds()),
			"-Dznode.container.maxPerMinute=100000",
			"-cp", jar + ":" + slf4j,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
	}
	s.ready = func(ctx context.Context) error {
		if err := dialCheck(ctx, s.Addr(), "ruok", "imok"); err != nil {
			return err
		}
		return dialCheck(ctx, s.Addr(), "srvr", "Mode: standalone")
	}
	return s, nil
}
