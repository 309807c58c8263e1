package zookeeper_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend/zookeeper"
)

// A server that takes the connection and never answers (a ZooKeeper 3.8 that is still
// starting can): with Dialer, the client tries again within the handshake bound and its
// one-second pause; go-zookeeper alone waited 13.3s with a 2s session.
func TestDialerBoundsTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	conn, _, err := zk.Connect([]string{ln.Addr().String()}, 2*time.Second,
		zk.WithDialer(zookeeper.Dialer(time.Second)), zk.WithLogger(quiet{}))
	require.NoError(t, err)
	first := <-accepted
	began := time.Now()
	select {
	case second := <-accepted:
		t.Logf("tried again after %v", time.Since(began).Round(time.Millisecond))
		_ = second.Close()
	case <-time.After(6 * time.Second):
		t.Fatal("no second connection within 6s of a handshake that got no answer")
	}
	conn.Close()
	_ = ln.Close()
	_ = first.Close()
	for len(accepted) > 0 {
		_ = (<-accepted).Close()
	}
}

// silentServer listens on loopback and takes every connection without answering, until
// stop, which closes them all.
func silentServer(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	stop = func() { _ = ln.Close(); <-done }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// A Start that a handshake without an answer holds up says so, rather than only
// "connecting": the cause a user must act on when the connection does not come from
// Dialer.
func TestUnansweredHandshakeIsNamed(t *testing.T) {
	addr, stop := silentServer(t)
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{addr}, 2*time.Second, zk.WithEventCallback(events), zk.WithLogger(quiet{}))
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	c, err := b.StartContend(ctx, contender(mutexName(t), "a", testLogger(t)))
	require.Error(t, err)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, zookeeper.ErrNoSession)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "has not answered the handshake")
	assert.Contains(t, err.Error(), "zookeeper.Dialer")
	stop() // the handshake's read fails now, not 13s after it began: Close waits for it
	require.NoError(t, b.Close())
}
