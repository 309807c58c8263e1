package redis_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/faultproxy"
)

// TestAcquireArrivingAfterStopTakesNothing: an acquire call whose caller gave it up
// unanswered (its bytes held on the network path: a fault proxy's stall) reaches the
// server after the contention released and stopped, over another connection. It must
// take nothing: the mutex is free then, and the call would take it for a contender that
// has stopped, held until that lease lapsed.
func TestAcquireArrivingAfterStopTakesNothing(t *testing.T) {
	s := server(t)
	p, err := faultproxy.New(s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	// One connection, through the proxy; once the call on it has been given up, the
	// client dials the server directly.
	var direct atomic.Bool
	opt := clientOptions(s.Addr())
	opt.PoolSize = 1
	opt.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		if direct.Load() {
			return d.DialContext(ctx, "tcp", s.Addr())
		}
		return d.DialContext(ctx, "tcp", p.Addr())
	}
	client := goredis.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	b := newBackend(t, client)
	mutex := uniqueName(t, "m")
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "w", TTL: 2 * time.Second,
		Transition: time.Second, Wake: func() {}, Grant: func(backend.Record, time.Time) {}})
	require.NoError(t, err)
	lc := c.(backend.LeaseContention)
	require.NoError(t, client.Ping(t.Context()).Err()) // the connection is open

	p.Stall(faultproxy.Up)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = lc.Acquire(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the call was given up")
	direct.Store(true)
	require.NoError(t, lc.Release(t.Context()))
	require.NoError(t, lc.StopContend(t.Context()))

	reader := newClient(t, s.Addr())
	scripts := func() int64 {
		calls := commandStats(t, reader)
		return calls["fcall"] + calls["evalsha"] + calls["eval"]
	}
	ran := scripts()
	p.Stall(0) // the held call reaches the server
	require.Eventually(t, func() bool { return scripts() > ran }, 5*time.Second, time.Millisecond, "the held call never ran")
	owner, err := reader.Get(t.Context(), "simba:{"+mutex+"}").Result()
	if errors.Is(err, goredis.Nil) {
		owner, err = "", nil
	}
	require.NoError(t, err)
	assert.Empty(t, owner, "the call given up took the mutex after its contention stopped")
}
