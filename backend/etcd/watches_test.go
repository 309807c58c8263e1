package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// A backend's watches share one watch stream: four owners, each watching its own key,
// open one stream on the member, not one each (a stream costs both sides goroutines and
// a round of frames when it opens and closes, which an uncontended cycle paid for its
// owner's watch).
func TestWatchesShareOneStream(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	watchers, streams := serverMetric(t, "etcd_debugging_mvcc_watcher_total"), serverMetric(t, watchStreamsStarted)
	for i := range 4 {
		l, err := simba.NewLocker(b, fmt.Sprintf("one-stream-%d", i))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
	}
	require.Eventually(t, func() bool { return serverMetric(t, "etcd_debugging_mvcc_watcher_total") >= watchers+4 },
		eventBound, 10*time.Millisecond, "the owners' watches were not created")
	require.Equal(t, 1.0, serverMetric(t, watchStreamsStarted)-streams, "watch streams opened for 4 owners' watches")
}

// watchStreamsStarted is the member's count of watch streams begun.
const watchStreamsStarted = `grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"}`

// serverMetric reads the shared member's metric named (with its labels, as /metrics
// writes them) from its /metrics; 0 when it has none.
func serverMetric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + server.Addr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// A watch that etcd cancels because its revision was compacted makes its contention read
// the mutex again (and watch anew from that read): what it waited for may have come and
// gone with the compacted revisions.
func TestCompactedWatchReadsAgain(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	l, err := simba.NewLocker(b, "compacted", simba.WithContenderID("c"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	id, _ := b.Lease()
	own := map[string][]string{"c": {etcd.KeyOf(b.MutexPrefix("compacted"), id, 1)}}
	require.Equal(t, own, etcd.Watched(b.Backend, "compacted"))
	admin := newClient(t, server.Addr())
	put, err := admin.Put(ctx, "compacted-filler", "")
	require.NoError(t, err)
	_, err = admin.Compact(ctx, put.Header.Revision)
	require.NoError(t, err)
	reads := serverMetric(t, txnsHandled)
	etcd.WatchAgainFrom(b.Backend, "compacted", put.Header.Revision-1)
	require.Eventually(t, func() bool {
		return serverMetric(t, txnsHandled) > reads && reflect.DeepEqual(etcd.Watched(b.Backend, "compacted"), own)
	}, eventBound, 10*time.Millisecond, "the owner did not read the mutex again and watch its key after its watch was compacted away")
	require.True(t, lease.Context().Err() == nil, "the owner stopped believing")
}

// txnsHandled is the member's count of transactions answered.
const txnsHandled = `grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"}`
