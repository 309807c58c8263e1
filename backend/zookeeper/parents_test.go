package zookeeper_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/internal/testserver"
)

// beforeCreate forwards a connection, calling f before it writes the first create of a
// container node whose request contains name.
type beforeCreate struct {
	net.Conn
	name      []byte
	f         func()
	handshake bool // the connect request, which has no request header, has been written
	done      bool
}

func (b *beforeCreate) Write(p []byte) (int, error) {
	const opCreateContainer = 19
	if b.handshake && !b.done && len(p) >= 12 && binary.BigEndian.Uint32(p[8:12]) == opCreateContainer && bytes.Contains(p, b.name) {
		b.done = true
		b.f()
	}
	b.handshake = true
	return b.Conn.Write(p)
}

// The server reaps /simba, empty, after the backend found it there and before it creates
// the mutex node under it (ZooKeeper reaps an empty container every check interval): the
// backend creates both again, and the contention starts.
func TestRootReapedBeforeMutexNode(t *testing.T) {
	needServer(t)
	srv, err := testserver.ZooKeeper(t.TempDir(), testserver.ZooKeeperOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx)) // a server of its own: /simba must be empty to go
	t.Cleanup(func() { _ = srv.Stop() })
	admin := adminConnAt(t, srv)
	mutex := mutexName(t)
	reaped := make(chan error, 1)
	n := &network{wrap: func(c net.Conn) net.Conn {
		return &beforeCreate{Conn: c, name: []byte("/simba/" + mutex), f: func() { reaped <- admin.Delete("/simba", -1) }}
	}}
	b := newBackendAt(t, srv, sessionTimeout, n)
	c, err := b.StartContend(ctx, contender(mutex, "a", testLogger(t)))
	select {
	case err := <-reaped:
		require.NoError(t, err, "deleting /simba")
	default:
		t.Fatal("the mutex node was not created")
	}
	require.NoError(t, err)
	assert.NoError(t, c.StopContend(ctx))
}
