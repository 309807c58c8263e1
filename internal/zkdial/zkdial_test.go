package zkdial

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
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

// exchange writes the connect request through c, answers it from server with a 36-byte
// handshake sent in two pieces, reads it through c, and queues one reply on server.
func exchange(t *testing.T, c net.Conn, server net.Conn, session uint64) {
	t.Helper()
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

// A resumed session's first read after the handshake waits for the watch reset, and no
// longer than that.
func TestResumedSessionWaitsForTheWatchReset(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := Wrap(client)
	defer c.Close()
	exchange(t, c, server, 42)
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

// A resumed session without watches (no reset is ever written) waits Hold at most; a new
// session does not wait at all.
func TestWaitIsBounded(t *testing.T) {
	for _, session := range []uint64{0, 42} {
		client, server := net.Pipe()
		c := Wrap(client)
		exchange(t, c, server, session)
		d := readTook(t, c)
		held := c.(*conn).held
		switch {
		case session == 0 && held:
			t.Errorf("a new session's first read was held")
		case session != 0 && (!held || d < Hold/2 || d > 10*Hold):
			t.Errorf("a resumed session without watches waited %v (held %v), want about %v", d, held, Hold)
		}
		_ = c.Close()
		_ = server.Close()
	}
}

// A client that closes a resumed session while its first read is held writes the close
// request instead of the watch reset: the read fails at once rather than deliver a reply
// (which would write lastZxid unordered with the reset's read of it).
func TestCloseWhileHeldFailsTheRead(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := Wrap(client)
	defer c.Close()
	exchange(t, c, server, 42)
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
