// Package zkdial dials ZooKeeper for simba's own tests in a way that keeps a data race
// inside go-zookeeper (v1.0.4) from failing race-enabled runs.
//
// Each time go-zookeeper connects, its connection loop starts the receive loop and then
// looks for watches to set again (sendSetWatches); where it finds some, it reads
// Conn.lastZxid to build the reset request, while the receive loop, already started, may
// write it for a reply that arrived on the new connection: nothing orders the two
// (go-zookeeper issue #260, pull request #35, unmerged). A resumed session has its
// watches from before; a new one has some when the loop was slow to get there and the
// replies to watching requests came first (a loaded machine: CI saw it on a new session).
// A connection of this package holds the receive loop's first read after the handshake
// until the connection loop has passed that point: until the client has written its watch
// reset, or, when it found no watches and so read nothing, until the loop waits for the
// connection to end (its goroutine's stack shows it, see loopPassed). The write of
// lastZxid then happens after the read in the race detector's order as it does in time.
// A client that closes the session while its first read is held writes its close request
// instead of the watch reset, which then never comes: that read fails (the connection is
// going anyway), so that no reply on it writes lastZxid.
//
// This is a test fixture: applications keep the race until go-zookeeper fixes it; it is
// harmless on 64-bit platforms, where the word is read and written whole.
package zkdial

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/goroutine"
)

// Hold bounds how long the first read after the handshake waits for the connection loop,
// should its stack never show where it is.
const Hold = time.Second

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
	return wrap(c, loopPassed)
}

func wrap(c net.Conn, passed func(loop uint64) bool) *conn {
	return &conn{Conn: c, passed: passed, reset: make(chan struct{}), closing: make(chan struct{}), released: make(chan struct{})}
}

// conn watches the client's packets (go-zookeeper writes each whole, in one Write) and
// holds the first read after the handshake.
type conn struct {
	net.Conn
	passed func(loop uint64) bool // whether the loop went past its watch reset, sending none

	mu     sync.Mutex
	writes int    // packets written so far
	loop   uint64 // the goroutine that wrote the connect request: go-zookeeper's connection loop
	left   int    // bytes of the handshake's answer still to be read; -1 until known
	header []byte
	held   bool // the first read after the handshake has waited

	once     sync.Once
	reset    chan struct{} // closed once the watch reset is written
	closed   sync.Once
	closing  chan struct{} // closed once the close request is written
	released chan struct{} // closed once the first read after the handshake may go on
	byLoop   bool          // it went on because the loop passed without a reset
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	if first {
		c.left = -1
		c.loop = goroutine.ID()
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
	wait := c.writes > 0 && c.left == 0 && !c.held
	if wait {
		c.held = true
	}
	c.mu.Unlock()
	if wait {
		err := c.await()
		close(c.released)
		if err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.consume(p[:n])
	c.mu.Unlock()
	return n, err
}

// await waits until the connection loop has passed its watch reset, or Hold has passed:
// until the reset (or the close request) is written, received from the channel its
// writer closed, which orders the loop's read of lastZxid before the receive loop's
// writes; or until the loop's stack shows it passed without a reset, having read nothing.
func (c *conn) await() error {
	bound := time.NewTimer(Hold)
	defer bound.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.reset:
			return nil
		case <-c.closing:
			select {
			case <-c.reset: // written before the close after all
				return nil
			default:
				return net.ErrClosed
			}
		case <-bound.C:
			return nil
		case <-tick.C:
			if c.passed(c.loop) {
				c.byLoop = true
				return nil
			}
		}
	}
}

// loopPassed reports whether goroutine loop, go-zookeeper's connection loop, waits for the
// connection to end (sync.WaitGroup.Wait in Conn.loop, which comes right after
// sendSetWatches), with no goroutine of its sendSetWatches alive: it found no watches, and
// read nothing. Such a goroutine, which writes the reset, lives until the reset's reply,
// which the held read keeps back.
func loopPassed(loop uint64) bool {
	id := strconv.FormatUint(loop, 10)
	waits := false
	for _, g := range goroutine.Stacks() {
		if strings.Contains(g, "created by github.com/go-zookeeper/zk.(*Conn).sendSetWatches in goroutine "+id+"\n") {
			return false
		}
		if strings.HasPrefix(g, "goroutine "+id+" [") {
			waits = strings.Contains(g, "\nsync.(*WaitGroup).Wait(") && strings.Contains(g, "\ngithub.com/go-zookeeper/zk.(*Conn).loop(")
		}
	}
	return waits
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
