package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/internal/zkdial"
)

func init() {
	register(Kit{
		Name:    "zookeeper",
		Letter:  "Z",
		Session: true,
		Server: func(dir string) (ServerProcess, error) {
			return testserver.ZooKeeper(dir, testserver.ZooKeeperOptions{TickTime: 100 * time.Millisecond})
		},
		Backend: zookeeperBackend,
		Residue: zookeeperResidue,
		Owner:   zookeeperOwner,
	})
}

// zookeeperBackend opens a backend on the servers of cfg.Addr (a ZooKeeper connect
// string: addresses separated by commas).
func zookeeperBackend(_ context.Context, cfg ContenderConfig) (simba.Backend, func(), error) {
	session := cfg.SessionTTL
	if session <= 0 {
		session = time.Second
	}
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect(strings.Split(cfg.Addr, ","), session, zk.WithEventCallback(events), zk.WithLogger(quietZK{}),
			zk.WithDialer(zookeeperDialer(session)))
	}, zookeeper.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = b.Close() }, nil
}

// zookeeperDialer dials as the README tells users to (zookeeper.Dialer, half the session
// for the handshake: a restarting server can take a connection and never answer it), with
// zkdial's ordering on top.
func zookeeperDialer(session time.Duration) zk.Dialer {
	handshake := zookeeper.Dialer(session / 2)
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := handshake(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return zkdial.Wrap(c), nil
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zookeeperResidue reports latch nodes left under the mutex's node, except those of
// excused contenders (killed, or stopped with an error: a node left without a session),
// which their sessions' expiry removes.
func zookeeperResidue(ctx context.Context, addr, mutex string, excused []string) error {
	conn, _, err := zk.Connect(strings.Split(addr, ","), 2*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() { // ends with the connection's request
		kids, _, err := conn.Children("/simba/" + mutex)
		switch {
		case err == zk.ErrNoNode:
			done <- nil
			return
		case err != nil:
			done <- err
			return
		}
		var left []string
		for _, k := range kids {
			data, _, err := conn.Get("/simba/" + mutex + "/" + k)
			if err == nil && !slices.Contains(excused, string(data)) {
				left = append(left, k+" ("+string(data)+")")
			}
		}
		if len(left) > 0 {
			done <- fmt.Errorf("zookeeper: nodes left under /simba/%s: %v", mutex, left)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// zookeeperOwner returns the data of the lowest latch node under the mutex's node.
func zookeeperOwner(ctx context.Context, addr, mutex string) (string, error) {
	conn, _, err := zk.Connect(strings.Split(addr, ","), 2*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	type answer struct {
		owner string
		err   error
	}
	done := make(chan answer, 1)
	go func() { // ends with the connection's requests
		parent := "/simba/" + mutex
		kids, _, err := conn.Children(parent)
		if err == zk.ErrNoNode {
			done <- answer{}
			return
		}
		if err != nil {
			done <- answer{err: err}
			return
		}
		best, bestSeq := "", ""
		for _, k := range kids {
			i := strings.LastIndex(k, "-latch-")
			if i < 0 {
				continue
			}
			if seq := k[i+len("-latch-"):]; best == "" || seq < bestSeq {
				best, bestSeq = k, seq
			}
		}
		if best == "" {
			done <- answer{}
			return
		}
		data, _, err := conn.Get(parent + "/" + best)
		done <- answer{string(data), err}
	}()
	select {
	case a := <-done:
		return a.owner, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
