package etcd_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/simba-go/simba"
)

// An uncontended acquire and release with a Locker: a transaction that puts the key and
// reads the mutex, and a delete.
func BenchmarkLockerCycle(b *testing.B) {
	be := newBackend(b)
	l, err := simba.NewLocker(be, "bench-cycle", simba.WithContenderID("bench"))
	require.NoError(b, err)
	defer l.Close()
	ctx := context.Background()
	for b.Loop() {
		lease, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// The same with etcd's concurrency.Mutex on one session, for comparison.
func BenchmarkConcurrencyMutexCycle(b *testing.B) {
	needServer(b)
	cli := newClient(b, server.Addr())
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(b, err)
	defer s.Close()
	m := concurrency.NewMutex(s, "bench-concurrency/")
	ctx := context.Background()
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
