package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
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
