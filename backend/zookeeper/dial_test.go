package zookeeper_test

import (
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
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
