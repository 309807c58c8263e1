// Package zkdial dials ZooKeeper for simba's own tests in a way that keeps a data race
// inside go-zookeeper (v1.0.4) from failing race-enabled runs.
//
// When go-zookeeper resumes a session that has watches, its connection loop reads
// Conn.lastZxid to build the watch-reset request while its receive loop, already started,
// may write it for a reply that arrived on the new connection: nothing orders the two
// (go-zookeeper issue #260, pull request #35, unmerged). The read happens before the
// reset request is written. A connection of this package that resumes a session holds the
// receive loop's first read until the client has written its watch reset (or, for a
// session without watches, which sends none, until Hold has passed), so that the write
// of lastZxid happens after the read in the race detector's order as it does in time.
// A client that closes the session while its first read is held writes its close
// request instead of the watch reset, which then never comes: that read fails (the
// connection is going anyway), so that no reply on it writes lastZxid.
//
// This is a test fixture: applications keep the race until go-zookeeper fixes it; it is
// harmless on 64-bit platforms, where the word is read and written whole.
package zkdial

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Hold bounds how long the first read on a resumed connection waits for the client's
// watch reset.
const Hold = 200 * time.Millisecond

// The operation codes of ZooKeeper's SetWatches and CloseSession requests.
const (
	opSetWatches = 101
	opClose      = -11
)

// Dial is a zk.Dialer (pass it with zk.WithDialer).
func Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Wrap returns c, ordered as the package describes.
func Wrap(c net.Conn) net.Conn {
	return &conn{Conn: c, reset: make(chan struct{}), closing: make(chan struct{})}
}

// conn watches the client's packets (go-zookeeper writes each whole, in one Write) and
// holds the first read after the handshake on a resumed session.
type conn struct {
	net.Conn

	mu      sync.Mutex
	writes  int  // packets written so far
	resumed bool // the connect request named a session
	left    int  // bytes of the handshake's answer still to be read; -1 until known
	header  []byte
	held    bool // the first read after the handshake has waited

	once    sync.Once
	reset   chan struct{} // closed once the watch reset is written
	closed  sync.Once
	closing chan struct{} // closed once the close request is written
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	if first {
		c.left = -1
		// length, protocol version, last zxid seen, timeout, session ID, ...
		c.resumed = len(p) >= 28 && binary.BigEndian.Uint64(p[20:28]) != 0
	}
	c.mu.Unlock()
	if !first && len(p) >= 12 {
		switch int32(binary.BigEndian.Uint32(p[8:12])) {
		case opSetWatches:
			c.once.Do(func() { close(c.reset) })
		case opClose:
			c.closed.Do(func() { close(c.closing) })
		}
	}
	return c.Conn.Write(p)
}

func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	wait := c.resumed && c.left == 0 && !c.held
	if wait {
		c.held = true
	}
	c.mu.Unlock()
	if wait {
		t := time.NewTimer(Hold)
		defer t.Stop()
		select {
		case <-c.reset:
		case <-c.closing:
			select {
			case <-c.reset: // written before the close after all
			default:
				return 0, net.ErrClosed
			}
		case <-t.C:
		}
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.consume(p[:n])
	c.mu.Unlock()
	return n, err
}

// consume counts the handshake's answer down: a 4-byte length, then that many bytes.
// Called with c.mu held.
func (c *conn) consume(b []byte) {
	for len(b) > 0 && c.left != 0 {
		if c.left < 0 {
			k := min(4-len(c.header), len(b))
			c.header = append(c.header, b[:k]...)
			b = b[k:]
			if len(c.header) == 4 {
				c.left = int(binary.BigEndian.Uint32(c.header))
			}
			continue
		}
		k := min(c.left, len(b))
		c.left -= k
		b = b[k:]
	}
}
