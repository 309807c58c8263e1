package zookeeper

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Dialer returns a zk.Dialer (for zk.WithDialer) whose connections wait at most handshake
// for the server's first answer. go-zookeeper waits ten times two thirds of the session
// timeout for it (13s with a 2s session): a server that takes the connection and never
// answers, as a restarting ZooKeeper 3.8 can, holds the client that long (Backend.Close
// too, which waits for the connection's goroutines) and lets its session expire. Half the
// session timeout is a good handshake.
func Dialer(handshake time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: c, limit: handshake}, nil
	}
}

// handshakeConn bounds the read deadlines go-zookeeper sets until the server has answered.
type handshakeConn struct {
	net.Conn
	limit    time.Duration
	answered atomic.Bool
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	if !c.answered.Load() && c.limit > 0 {
		if bound := time.Now().Add(c.limit); t.IsZero() || t.After(bound) {
			t = bound
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		// The server answers: go-zookeeper's later deadlines (one per read, a session
		// timeout's worth) are its own again.
		c.answered.Store(true)
	}
	return n, err
}
