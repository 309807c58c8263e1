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
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/faultproxy"
)

// An acquire call whose caller gave it up unanswered (its bytes held on the network path:
// a fault proxy's stall) reaches the server over the connection it was sent on, after the
// contention released the mutex over another one. It must leave nothing behind: the mutex
// is free then, and the call would take it for a contender that has stopped, held until
// that lease lapsed. Arriving after the stop, it finds the stop recorded and takes
// nothing; arriving between the release and the stop, it takes the mutex, and the stop
// finds that tenure, newer than any the contention heard of, and releases it.
func TestAcquireGivenUpLeavesNothingAfterStop(t *testing.T) {
	for _, order := range stopOrders {
		t.Run(order.name, func(t *testing.T) {
			l := stallable(t)
			mutex := uniqueName(t, "m")
			order.run(l, l.contend(mutex, backend.Hold{}))

			owner, err := l.reader.Get(t.Context(), "simba:{"+mutex+"}").Result()
			if errors.Is(err, goredis.Nil) {
				owner, err = "", nil
			}
			require.NoError(t, err)
			assert.Empty(t, owner, "the call given up kept the mutex after its contention stopped")
		})
	}
}

// The same for a semaphore's permit: the call given up would admit a hold (or renew one
// released since into a new one), or queue a waiter, for a holder that has stopped.
func TestHoldAcquireGivenUpLeavesNothingAfterStop(t *testing.T) {
	for _, order := range stopOrders {
		t.Run(order.name, func(t *testing.T) {
			l := stallable(t)
			name := uniqueName(t, "sem")
			order.run(l, l.contend(name, backend.Hold{Kind: backend.Semaphore, Permits: 1}))

			for _, set := range []string{"holders", "queue"} {
				ids, err := l.reader.ZRange(t.Context(), "simba:sem:{"+name+"}:"+set, 0, -1).Result()
				require.NoError(t, err)
				assert.Empty(t, ids, "the call given up left itself in %s after its contention stopped", set)
			}
		})
	}
}

// stopOrders are the two moments at which a held call reaches the server.
var stopOrders = []struct {
	name string
	run  func(*stalledLink, backend.LeaseContention)
}{
	{"after the stop", (*stalledLink).giveUpAcquireThenStop},
	{"between the release and the stop", (*stalledLink).giveUpAcquireBeforeStop},
}

// stalledLink is a backend whose only connection to the server runs through a fault
// proxy until a call on it has been given up; after that the client dials the server
// directly.
type stalledLink struct {
	t       *testing.T
	proxy   *faultproxy.Proxy
	client  *goredis.Client
	backend *redis.Backend
	reader  *goredis.Client // a client of its own, for the test's reads
	direct  atomic.Bool
}

func stallable(t *testing.T) *stalledLink {
	s := server(t)
	p, err := faultproxy.New(s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	l := &stalledLink{t: t, proxy: p, reader: newClient(t, s.Addr())}
	opt := clientOptions(s.Addr())
	opt.PoolSize = 1
	opt.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		if l.direct.Load() {
			return d.DialContext(ctx, "tcp", s.Addr())
		}
		return d.DialContext(ctx, "tcp", p.Addr())
	}
	l.client = goredis.NewClient(opt)
	t.Cleanup(func() { _ = l.client.Close() })
	l.backend = newBackend(t, l.client)
	return l
}

// contend opens contender w's contention for mutex, or for the semaphore or read-write
// lock name hold asks for.
func (l *stalledLink) contend(name string, hold backend.Hold) backend.LeaseContention {
	c, err := l.backend.StartContend(l.t.Context(), backend.Participant{Mutex: name, ContenderID: "w", TTL: 2 * time.Second,
		Transition: time.Second, Wake: func() {}, Grant: func(backend.Record, time.Time) {}, Hold: hold})
	require.NoError(l.t, err)
	return c.(backend.LeaseContention)
}

// giveUpAcquireThenStop gives up an acquire call of c, held on the network path; releases
// and stops c over a direct connection; then lets the held call reach the server, and
// returns once the server has run it.
func (l *stalledLink) giveUpAcquireThenStop(c backend.LeaseContention) {
	t := l.t
	l.giveUpAcquire(c)
	require.NoError(t, c.Release(t.Context()))
	require.NoError(t, c.StopContend(t.Context()))
	l.arrive()
}

// giveUpAcquireBeforeStop is giveUpAcquireThenStop with the held call run between c's
// release and its stop.
func (l *stalledLink) giveUpAcquireBeforeStop(c backend.LeaseContention) {
	t := l.t
	l.giveUpAcquire(c)
	require.NoError(t, c.Release(t.Context()))
	l.arrive()
	require.NoError(t, c.StopContend(t.Context()))
}

// giveUpAcquire gives up an acquire call of c, held on the network path; the client dials
// the server directly from then on.
func (l *stalledLink) giveUpAcquire(c backend.LeaseContention) {
	t := l.t
	require.NoError(t, l.client.Ping(t.Context()).Err()) // the connection is open
	l.proxy.Stall(faultproxy.Up)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err := c.Acquire(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the call was given up")
	l.direct.Store(true)
}

// arrive lets the held call reach the server, and returns once the server has run it.
func (l *stalledLink) arrive() {
	t := l.t
	scripts := func() int64 {
		calls := commandStats(t, l.reader)
		return calls["fcall"] + calls["evalsha"] + calls["eval"]
	}
	ran := scripts()
	l.proxy.Stall(0)
	require.Eventually(t, func() bool { return scripts() > ran }, 5*time.Second, time.Millisecond, "the held call never ran")
}
