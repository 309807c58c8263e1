package zkdial

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/testserver"
)

// connectRequest is a client's first packet naming session (0: a new session).
func connectRequest(session uint64) []byte {
	p := make([]byte, 4+44)
	binary.BigEndian.PutUint32(p, 44)
	binary.BigEndian.PutUint64(p[20:], session)
	return p
}

// request is a client packet with the given operation code.
func request(op int32) []byte {
	p := make([]byte, 12)
	binary.BigEndian.PutUint32(p, 8)
	binary.BigEndian.PutUint32(p[4:], 1)
	binary.BigEndian.PutUint32(p[8:], uint32(op))
	return p
}

// handshaken returns a connection of this package over a pipe, with passed as its loop's
// stack, and the pipe's server end, closed when t ends. It writes the connect request for
// session, answers it from server with a 36-byte handshake sent in two pieces, reads it,
// and queues one reply on server.
func handshaken(t *testing.T, passed func(uint64) bool, session uint64) (*conn, net.Conn) {
	t.Helper()
	client, server := net.Pipe()
	c := wrap(client, passed)
	t.Cleanup(func() {
		_ = c.Close()
		_ = server.Close()
	})
	go func() {
		buf := make([]byte, 48)
		_, _ = io.ReadFull(server, buf)
		answer := make([]byte, 40)
		binary.BigEndian.PutUint32(answer, 36)
		_, _ = server.Write(answer[:6])
		_, _ = server.Write(answer[6:])
		_, _ = server.Write([]byte("reply"))
	}()
	if _, err := c.Write(connectRequest(session)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 40)
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[4:]); err != nil {
		t.Fatal(err)
	}
	return c, server
}

// readTook reads the queued reply through c and says how long it waited.
func readTook(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	began := time.Now()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "reply" {
		t.Fatalf("read %q, %v", buf, err)
	}
	return time.Since(began)
}

// never is a loop that never shows it passed its watch reset.
func never(uint64) bool { return false }

// The first read after the handshake waits for the watch reset, and no longer than that.
func TestFirstReadWaitsForTheWatchReset(t *testing.T) {
	c, server := handshaken(t, never, 42)
	got := make(chan time.Duration, 1)
	go func() { got <- readTook(t, c) }()
	select {
	case d := <-got:
		t.Fatalf("the first read returned after %v, before the watch reset was written", d)
	case <-time.After(Hold / 4):
	}
	go func() { _, _ = io.ReadFull(server, make([]byte, 12)) }()
	if _, err := c.Write(request(opSetWatches)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the read still waits after the watch reset was written")
	}
}

// The first read after the handshake goes on once the loop shows it went past its watch
// reset without sending one, and not before.
func TestFirstReadGoesOnOnceTheLoopPassed(t *testing.T) {
	for _, session := range []uint64{0, 42} {
		passed := make(chan struct{})
		c, _ := handshaken(t, func(uint64) bool {
			select {
			case <-passed:
				return true
			default:
				return false
			}
		}, session)
		got := make(chan time.Duration, 1)
		go func() { got <- readTook(t, c) }()
		select {
		case d := <-got:
			t.Fatalf("session %d: the first read returned after %v, before the loop passed", session, d)
		case <-time.After(Hold / 4):
		}
		close(passed)
		select {
		case <-got:
		case <-time.After(Hold / 2):
			t.Fatalf("session %d: the read still waits after the loop passed", session)
		}
		if !c.byLoop {
			t.Errorf("session %d: the read did not go on by the loop", session)
		}
	}
}

// A loop that never shows where it is holds the first read Hold at most.
func TestWaitIsBounded(t *testing.T) {
	c, _ := handshaken(t, never, 0)
	if d := readTook(t, c); d < Hold/2 || d > 10*Hold {
		t.Errorf("the first read waited %v, want about %v", d, Hold)
	}
}

// loopPassed reads go-zookeeper's connection loop from its stack: a client connected to a
// server that answers the handshake, with no watches to set again, has its first read let
// go by it, well within Hold.
func TestLoopPassedReadsGoZookeeper(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		size := make([]byte, 4)
		if _, err := io.ReadFull(s, size); err != nil {
			return
		}
		if _, err := io.ReadFull(s, make([]byte, binary.BigEndian.Uint32(size))); err != nil {
			return
		}
		// protocol version, timeout (ms), session ID, password (length, 16 bytes)
		answer := make([]byte, 4+36)
		binary.BigEndian.PutUint32(answer, 36)
		binary.BigEndian.PutUint32(answer[8:], 2000)
		binary.BigEndian.PutUint64(answer[12:], 7)
		binary.BigEndian.PutUint32(answer[20:], 16)
		if _, err := s.Write(answer); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, s)
	}()
	dialed := make(chan *conn, 1)
	dial := recording(dialed, func(c *conn) net.Conn { return c })
	zc, _, err := zk.Connect([]string{ln.Addr().String()}, 2*time.Second, zk.WithDialer(dial), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	c := <-dialed
	began := time.Now()
	select {
	case <-c.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the first read was never let go")
	}
	if !c.byLoop {
		t.Fatalf("the first read went on after %v, not by the loop's stack", time.Since(began))
	}
}

// A resumed session with a watch holds its first read until the watch reset is written,
// however late: the loop's stack shows it waiting, but the goroutine that writes the
// reset is alive.
func TestResumedSessionWithWatchWaitsForTheReset(t *testing.T) {
	srv, err := testserver.ZooKeeper(t.TempDir(), testserver.ZooKeeperOptions{})
	testserver.Need(t, err)
	defer func() { _ = srv.Stop() }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	dialed := make(chan *conn, 8)
	dial := recording(dialed, func(c *conn) net.Conn { return slowReset{c} })
	zc, _, err := zk.Connect([]string{srv.Addr()}, 4*time.Second, zk.WithDialer(dial), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	first := <-dialed
	if _, _, _, err := zc.ExistsW("/zkdial-watched"); err != nil {
		t.Fatal(err)
	}
	_ = first.Conn.Close() // the loop connects again and resumes the session, with its watch
	var second *conn
	select {
	case second = <-dialed:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not connect again")
	}
	select {
	case <-second.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the resumed session's first read was never let go")
	}
	select {
	case <-second.reset:
	default:
		t.Fatalf("the resumed session's first read went on (by the loop: %v) before the watch reset was written", second.byLoop)
	}
}

// recording is a zk.Dialer that sends each connection it makes to dialed and gives
// go-zookeeper outer of it.
func recording(dialed chan<- *conn, outer func(*conn) net.Conn) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		nc, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		c := wrap(nc, loopPassed)
		dialed <- c
		return outer(c), nil
	}
}

// slowReset writes the watch reset Hold/4 late.
type slowReset struct{ net.Conn }

func (s slowReset) Write(p []byte) (int, error) {
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches {
		time.Sleep(Hold / 4)
	}
	return s.Conn.Write(p)
}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// A client that closes a resumed session while its first read is held writes the close
// request instead of the watch reset: the read fails at once rather than deliver a reply
// (which would write lastZxid unordered with the reset's read of it).
func TestCloseWhileHeldFailsTheRead(t *testing.T) {
	c, server := handshaken(t, never, 42)
	type read struct {
		n   int
		err error
		d   time.Duration
	}
	got := make(chan read, 1)
	go func() {
		began := time.Now()
		n, err := c.Read(make([]byte, 5))
		got <- read{n, err, time.Since(began)}
	}()
	go func() { _, _ = io.ReadFull(server, make([]byte, 12)) }()
	if _, err := c.Write(request(opClose)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err == nil || r.n != 0 {
			t.Fatalf("the held read returned %d bytes, %v after the close request; want an error", r.n, r.err)
		}
		if r.d > Hold/2 {
			t.Errorf("the held read failed after %v, want at once", r.d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held read still waits after the close request was written")
	}
}
