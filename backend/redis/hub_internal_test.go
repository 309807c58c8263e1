package redis

import (
	"context"
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// idleHub returns a backend and a hub that talk to no server, and a call of the hub's
// writer's step at a given time (which keeps what it subscribed).
func idleHub(t *testing.T) (*Backend, *hub, func(at time.Time) (add, drop []string, next time.Duration)) {
	cfg, err := newConfig(nil)
	require.NoError(t, err)
	cfg.logger = slog.New(slog.DiscardHandler)
	b := newBackend(nil, cfg)
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	h := newHub(client, cfg.logger, time.Second)
	h.ps = client.Subscribe(context.Background()) // no channels: no I/O
	t.Cleanup(func() { _ = h.ps.Close() })
	sent := map[string]bool{}
	return b, h, func(at time.Time) (add, drop []string, next time.Duration) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.changes(sent, at)
	}
}

// A contention that leaves while another channel lingers does not wake the writer, whose
// timer is set already: with Lockers that take turns, every release would otherwise wake
// it once. Its channels still go a linger after it left.
func TestLeaveWakesNoWriterWhileAChannelLingers(t *testing.T) {
	b, h, writer := idleHub(t)
	locker := func(id string) *contention {
		return newContention(b, backend.Participant{Mutex: "m", ContenderID: id, TTL: time.Second, WaitsOnly: true})
	}
	a, c := locker("a"), locker("c")
	h.mu.Lock()
	h.addRoutes(a)
	h.addRoutes(c)
	h.mu.Unlock()
	add, _, _ := writer(time.Now())
	require.ElementsMatch(t, []string{"simba:{m}:@@released", "simba:{m}:a", "simba:{m}:c"}, add)

	h.leave(a) // a's own channel lingers from now on: the writer is woken to time it
	require.Len(t, h.kick, 1)
	<-h.kick
	_, drop, next := writer(time.Now())
	require.Empty(t, drop)
	require.Positive(t, next, "the writer's timer is set for a's channel")

	h.leave(c)
	assert.Empty(t, h.kick, "c left while the writer's timer was set")
	_, drop, _ = writer(time.Now().Add(linger))
	assert.ElementsMatch(t, []string{"simba:{m}:@@released", "simba:{m}:a", "simba:{m}:c"}, drop, "a linger after they left")
}

// A Locker that takes turns leaves and joins again at once, mostly before the writer runs:
// the writer that finds its channels routed again keeps its timer, so that the next leave
// wakes nobody either (it woke the writer a quarter of the sections of
// BenchmarkEightContenders).
func TestRejoinedChannelsKeepTheWriterAsleep(t *testing.T) {
	b, h, writer := idleHub(t)
	a := newContention(b, backend.Participant{Mutex: "m", ContenderID: "a", TTL: time.Second, WaitsOnly: true})
	join := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.addRoutes(a)
	}
	join()
	add, _, _ := writer(time.Now())
	require.ElementsMatch(t, []string{"simba:{m}:@@released", "simba:{m}:a"}, add)

	h.leave(a)
	require.Len(t, h.kick, 1, "the first leave sets the writer's timer")
	<-h.kick
	join() // before the writer runs
	_, drop, next := writer(time.Now())
	require.Empty(t, drop)
	require.Positive(t, next, "the writer keeps a timer while its channels come and go")
	for range 3 {
		h.leave(a)
		require.Empty(t, h.kick, "a leave woke the writer")
		join()
	}
	h.leave(a)
	_, drop, next = writer(time.Now().Add(linger / 2))
	require.Empty(t, drop, "half a linger after the last leave")
	require.Positive(t, next)
	_, drop, _ = writer(time.Now().Add(2 * linger))
	require.ElementsMatch(t, []string{"simba:{m}:@@released", "simba:{m}:a"}, drop, "a linger after the last leave")
}
