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

	"github.com/stretchr/testify/assert"
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

// An owner's watch of its own key is sent once its tenure has lasted ownWatchDelay, from
// the revision of the read that found it owning: a deletion of its key before then (an
// administrator's release, say) reaches it when the watch is sent, and its tenure ends.
func TestKeyDeletedBeforeTheOwnersWatchIsSent(t *testing.T) {
	b := newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	etcd.SetOwnWatchDelay(b.Backend, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	lease, err := newLocker(t, b, "deleted-early", "owner").Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, etcd.WatchesHeldBack(b.Backend), "the owner's watch of its key is not held back")
	admin := newClient(t, server.Addr())
	id, _ := b.Lease()
	del, err := admin.Delete(ctx, etcd.KeyOf(b.MutexPrefix("deleted-early"), id, 1))
	require.NoError(t, err)
	require.EqualValues(t, 1, del.Deleted, "the owner's key")
	_, err = admin.Put(ctx, "deleted-early-filler", "") // the watch starts behind etcd's revision
	require.NoError(t, err)
	require.NoError(t, lease.Context().Err(), "the tenure ended before its watch was sent")
	etcd.SendWatchesNow(b.Backend)
	await(t, lease.Done(), "the owner's tenure context ends")
	assert.ErrorIs(t, context.Cause(lease.Context()), simba.ErrOwnershipLost)
}

// A tenure shorter than ownWatchDelay sends no watch: an owner that makes a round trip
// while it holds, as a critical section would, then releases, sends neither the create of
// its watch of its own key nor its cancel.
func TestShortTenureSendsNoWatch(t *testing.T) {
	b := newBackend(t)
	etcd.SetOwnWatchDelay(b.Backend, eventBound) // longer than these tenures, however slow the machine
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	l := newLocker(t, b, "short-tenure", "owner")
	admin := newClient(t, server.Addr())
	received := serverMetric(t, watchRequestsReceived)
	for range 5 {
		lease, err := l.Acquire(ctx)
		require.NoError(t, err)
		_, err = admin.Get(ctx, "short-tenure-work")
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	assert.Zero(t, serverMetric(t, watchRequestsReceived)-received, "watch requests for 5 short tenures")
}

// watchRequestsReceived is the member's count of requests received on watch streams:
// creates, cancels and progress requests.
const watchRequestsReceived = `grpc_server_msg_received_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"}`

// txnsHandled is the member's count of transactions answered.
const txnsHandled = `grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"}`
