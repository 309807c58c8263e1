package etcd_test

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/goroutine"
)

// callers records, by gRPC method, the goroutines that made a client's unary calls.
type callers struct {
	mu  sync.Mutex
	ids map[string][]uint64
}

func (c *callers) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.ids[method] = append(c.ids[method], goroutine.ID())
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *callers) of(method string) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.ids[method]...)
}

// An uncontended Locker's acquisition puts its key (a transaction) and its release
// deletes it on the caller's goroutine: the backend keeps deadlines, so simba calls it
// there, and the contention makes its first look and its delete there too, rather than
// on its own goroutine, whose stack would grow anew for each.
func TestUncontendedCycleOnTheCallersGoroutine(t *testing.T) {
	needServer(t)
	rec := &callers{ids: make(map[string][]uint64)}
	client, err := clientv3.New(clientv3.Config{
		Endpoints: []string{server.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rec.intercept)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	b, err := etcd.New(client, etcd.WithLeaseTTL(testLeaseTTL))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	l, err := simba.NewLocker(b, "callers")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	lease, err := l.Acquire(ctx) // waits for the lease's grant: on the backend's goroutine
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))

	const txn, del = "/etcdserverpb.KV/Txn", "/etcdserverpb.KV/DeleteRange"
	before := map[string]int{txn: len(rec.of(txn)), del: len(rec.of(del))}
	lease, err = l.Acquire(ctx) // the backend has its lease
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	me := goroutine.ID()
	for _, m := range []string{txn, del} {
		ids := rec.of(m)[before[m]:]
		require.NotEmpty(t, ids, "no %s call", m)
		assert.Equal(t, me, ids[0], "%s was not made on the caller's goroutine", m)
	}
}

// An uncontended acquisition starts no goroutine for its contention: its first look is
// the caller's, and nothing after it (a watch firing, a failure, a new lease) asks for
// another until the release, which the caller makes too.
func TestUncontendedCycleStartsNoContentionGoroutine(t *testing.T) {
	b := newBackend(t)
	l, err := simba.NewLocker(b, "no-goroutine")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	lease, err := l.Acquire(ctx) // waits for the lease's grant, which pokes the contention
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	require.Eventually(t, func() bool { return !contentionRuns() }, eventBound, 10*time.Millisecond,
		"the first acquisition's contention goroutine did not end")
	lease, err = l.Acquire(ctx)
	require.NoError(t, err)
	defer lease.Release(ctx)
	require.False(t, contentionRuns(), "an uncontended acquisition's contention runs a goroutine")
}

// contentionRuns reports whether a contention's goroutine runs.
func contentionRuns() bool {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return strings.Contains(buf.String(), "backend/etcd.(*contention).run")
}
