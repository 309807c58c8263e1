package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

func start(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	p, err := New(echoServer(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return p, c, bufio.NewReader(c)
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return line, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForwardsAndBlackholes(t *testing.T) {
	p, c, r := start(t)
	got, err := roundTrip(c, r, "hello", time.Second)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", got)

	p.Blackhole(Down) // the request reaches the server, the reply is swallowed
	_, err = roundTrip(c, r, "lost", 200*time.Millisecond)
	assert.True(t, isTimeout(err), "want a timeout, got %v", err)
	p.Blackhole(0)
	got, err = roundTrip(c, r, "again", time.Second)
	require.NoError(t, err)
	assert.Equal(t, "again\n", got, "the swallowed reply never arrives; the connection still works")
	assert.Positive(t, p.Stats().Swallowed)

	p.Blackhole(Up)
	_, err = roundTrip(c, r, "dropped", 200*time.Millisecond)
	assert.True(t, isTimeout(err))
	p.Heal()
	got, err = roundTrip(c, r, "healed", time.Second)
	require.NoError(t, err)
	assert.Equal(t, "healed\n", got)
}

func TestDelayKeepsOrder(t *testing.T) {
	p, c, r := start(t)
	p.Delay(Up, 150*time.Millisecond, 50*time.Millisecond)
	began := time.Now()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, m := range []string{"a\n", "b\n", "c\n"} {
		_, err := c.Write([]byte(m))
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	var got []string
	for range 3 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		got = append(got, line)
	}
	assert.Equal(t, []string{"a\n", "b\n", "c\n"}, got)
	assert.GreaterOrEqual(t, time.Since(began), 100*time.Millisecond)
}

func TestResetClosesConnections(t *testing.T) {
	p, c, r := start(t)
	_, err := roundTrip(c, r, "x", time.Second)
	require.NoError(t, err)
	p.Reset()
	_, err = roundTrip(c, r, "y", time.Second)
	assert.Error(t, err)
	assert.False(t, isTimeout(err), "a reset is a fast error, not a timeout: %v", err)
	assert.Equal(t, 1, p.Stats().Resets)
}

func TestPauseAndDelayAccept(t *testing.T) {
	p, err := New(echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	// The accept loop is already waiting in Accept when accepting is paused.
	c0, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = roundTrip(c0, bufio.NewReader(c0), "before", time.Second)
	require.NoError(t, err)
	_ = c0.Close()
	p.PauseAccept(true)
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	require.NoError(t, err, "the kernel completes the handshake")
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = roundTrip(c, r, "waiting", 200*time.Millisecond)
	assert.True(t, isTimeout(err), "nothing answers while accepting is paused: %v", err)
	p.PauseAccept(false)
	got, err := roundTrip(c, r, "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, "waiting\n", got, "accepted once resumed; the queued bytes go through")

	p.AcceptDelay(300 * time.Millisecond)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	began := time.Now()
	got, err = roundTrip(c2, bufio.NewReader(c2), "late", 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "late\n", got)
	assert.GreaterOrEqual(t, time.Since(began), 250*time.Millisecond)
}

// A stall holds the bytes and loses none: what was sent during it arrives, in order, when
// it ends.
func TestStallHoldsAndDelivers(t *testing.T) {
	p, c, r := start(t)
	p.Stall(Both)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, m := range []string{"a\n", "b\n", "c\n"} {
		_, err := c.Write([]byte(m))
		require.NoError(t, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := r.ReadString('\n')
	assert.True(t, isTimeout(err), "nothing arrives during the stall, got %v", err)
	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []string
	for len(got) < 3 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		got = append(got, line)
	}
	assert.Equal(t, []string{"a\n", "b\n", "c\n"}, got)
	assert.Zero(t, p.Stats().Swallowed)
}

// A reset while connections are being made closes each of them, whether its upstream side
// was dialled before the reset or after (then it is closed at once): no race between the
// reset and the connection's own set-up, and no upstream connection left open.
func TestResetWhileConnecting(t *testing.T) {
	p, err := New(echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = roundTrip(c, bufio.NewReader(c), "ping", time.Second)
		})
		wg.Go(p.Reset)
	}
	wg.Wait()
	require.NoError(t, p.Close())
}
