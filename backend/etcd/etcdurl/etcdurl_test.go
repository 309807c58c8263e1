package etcdurl_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd/etcdurl"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

var (
	server    *testserver.Server
	serverErr error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "simba-etcdurl-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if server, serverErr = testserver.Etcd(dir, testserver.EtcdOptions{}); serverErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			serverErr = server.Start(ctx)
			cancel()
		}
		if err := etcdurl.Register(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		code := m.Run()
		if server != nil {
			_ = server.Stop()
		}
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	}())
}

// A malformed etcd URL fails at Open with an error wrapping simba.ErrInvalidArgument that
// does not show the password, and dials nothing.
func TestOpenInvalid(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var dials atomic.Int64
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	at := l.Addr().String()
	for _, raw := range []string{
		"etcd://",
		"etcd://:secret@" + at,
		"etcd://u:secret@host:notaport",
		"etcd://u:secret@" + at + "?lease_ttl=1500ms",
		"etcd://u:secret@" + at + "?lease_ttl=0s",
		"etcd://u:secret@" + at + "?dial_timeout=soon",
		"etcd://u:secret@" + at + "?unknown=1",
	} {
		s, err := storeurl.Open(raw)
		if !assert.ErrorIs(t, err, simba.ErrInvalidArgument, raw) {
			_ = s.Close()
			continue
		}
		assert.NotContains(t, err.Error(), "secret", "the password never shows")
	}
	s, err := storeurl.Open("etcd://" + at + "/app")
	require.NoError(t, err, "a valid URL opens without dialing")
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())
	<-accepted
	assert.Zero(t, dials.Load(), "Open dialed")
}

// An etcd URL opens a backend under the URL's prefix; List names its mutexes, Release
// ends the tenure looked up, and the Store's client is the etcd client.
func TestStore(t *testing.T) {
	testserver.Need(t, serverErr)
	s, err := storeurl.Open("etcd://" + server.Addr() + "/app/locks?lease_ttl=5s&dial_timeout=2s")
	require.NoError(t, err)
	defer s.Close()
	l, err := simba.NewLocker(s.Backend(), "m1", simba.WithContenderID("holder"))
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	client := etcdurl.Client(s)
	require.NotNil(t, client)
	resp, err := client.Get(t.Context(), "app/locks/m1/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the key under the URL's prefix")
	names, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, names)
	o, err := simba.Lookup(t.Context(), s.Backend(), "m1")
	require.NoError(t, err)
	require.Equal(t, lease.Token(), o.Token)
	require.NoError(t, s.Release(t.Context(), "m1", o))
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the owner did not see its key go")
	}
	assert.Nil(t, etcdurl.Client(&storeurl.Store{}))
	assert.NoError(t, etcdurl.Register(), "idempotent")
}
