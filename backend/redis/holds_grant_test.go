package redis_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// grantee is a hold's contention opened on a backend directly, as the service would, with
// its wake-ups and grants recorded.
type grantee struct {
	backend.LeaseContention
	wakes  wakes
	grants chan backend.Record
}

// contendGranted opens a contention for hold that takes grants, stopped when t ends.
func contendGranted(t *testing.T, b simba.Backend, name, id string, hold backend.Hold) *grantee {
	t.Helper()
	g := &grantee{grants: make(chan backend.Record, 4)}
	c, err := b.StartContend(t.Context(), backend.Participant{
		Mutex: name, ContenderID: id, TTL: 30 * time.Second, Transition: time.Second,
		Logger: slog.New(slog.DiscardHandler), Wake: g.wakes.wake, WaitsOnly: true, Hold: hold,
		Grant: func(rec backend.Record, _ time.Time) { g.grants <- rec },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	g.LeaseContention = c.(backend.LeaseContention)
	return g
}

// queue has g attempt, expecting to wait, and attempt once more when its subscription is
// confirmed, as the service does: from then on it hears the name's channel.
func (g *grantee) queue(t *testing.T) {
	t.Helper()
	rec, err := g.Acquire(t.Context())
	require.NoError(t, err)
	require.NotEqual(t, "", rec.Owner, "someone holds")
	g.wakes.waitMore(t, 0, "the waiter's subscription")
	_, err = g.Acquire(t.Context())
	require.NoError(t, err)
}

// granted waits for g's grant.
func (g *grantee) granted(t *testing.T, what string) backend.Record {
	t.Helper()
	select {
	case rec := <-g.grants:
		return rec
	case <-time.After(eventDeadline):
		require.FailNow(t, what+": no grant within "+eventDeadline.String())
		return backend.Record{}
	}
}

// scripts returns the scripts the server has run so far, by EVALSHA, EVAL or FCALL.
func scripts(stats map[string]int64) int64 { return stats["evalsha"] + stats["eval"] + stats["fcall"] }

// A release admits the waiters that now fit and hands each its hold: the release is the
// only script of the hand-over, and the waiters own with a token new at their admission.
// A writer behind the readers stays queued.
func TestHoldReleaseGrants(t *testing.T) {
	srv := ownServer(t) // no other test's scripts
	admin := newClient(t, srv.Addr())
	ctx := t.Context()
	process := func() simba.Backend { return newBackend(t, newClient(t, srv.Addr())) }
	// The server caches the scripts: a script's first EVALSHA is answered NOSCRIPT and
	// sent again as EVAL.
	warm, err := simba.NewSemaphore(process(), uniqueName(t, "warm"), 1)
	require.NoError(t, err)
	defer warm.Close()
	l, err := warm.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	t.Run("semaphore", func(t *testing.T) {
		name := uniqueName(t, "sem")
		hold := backend.Hold{Kind: backend.Semaphore, Permits: 1}
		h := contendGranted(t, process(), name, "h", hold)
		held, err := h.Acquire(ctx)
		require.NoError(t, err)
		w := contendGranted(t, process(), name, "w", hold)
		w.queue(t)

		before := commandStats(t, admin)
		require.NoError(t, h.Release(ctx))
		rec := w.granted(t, "the waiter")
		assert.EqualValues(t, 1, scripts(commandStats(t, admin))-scripts(before), "scripts of the hand-over")
		assert.Equal(t, "w", rec.Owner)
		assert.Greater(t, rec.Token, held.Token)
		renewed, err := w.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "w", renewed.Owner, "the grant holds on the store")
		assert.Equal(t, rec.Token, renewed.Token, "the renewal keeps the grant's token")
		require.NoError(t, w.Release(ctx))
	})

	t.Run("readers", func(t *testing.T) {
		name := uniqueName(t, "rw")
		writer := contendGranted(t, process(), name, "w", backend.Hold{Kind: backend.RWLock})
		held, err := writer.Acquire(ctx)
		require.NoError(t, err)
		readers := make([]*grantee, 2)
		for i := range readers {
			readers[i] = contendGranted(t, process(), name, "r"+strconv.Itoa(i), backend.Hold{Kind: backend.RWLock, Shared: true})
			readers[i].queue(t)
		}
		next := contendGranted(t, process(), name, "w2", backend.Hold{Kind: backend.RWLock})
		next.queue(t)

		before := commandStats(t, admin)
		require.NoError(t, writer.Release(ctx))
		var tokens []uint64
		for i, r := range readers {
			rec := r.granted(t, "reader "+strconv.Itoa(i))
			assert.Equal(t, "r"+strconv.Itoa(i), rec.Owner)
			assert.Greater(t, rec.Token, held.Token)
			assert.NotContains(t, tokens, rec.Token, "each hold has a token of its own")
			tokens = append(tokens, rec.Token)
		}
		assert.EqualValues(t, 1, scripts(commandStats(t, admin))-scripts(before), "scripts of the hand-over")
		rec, err := next.Acquire(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, "w2", rec.Owner, "the writer behind the readers waits")
		select {
		case rec := <-next.grants:
			assert.Fail(t, "the writer was granted a hold beside readers", "%+v", rec)
		default:
		}
		for _, r := range readers {
			require.NoError(t, r.Release(ctx))
		}
		assert.Equal(t, "w2", next.granted(t, "the writer, once the readers left").Owner)
		require.NoError(t, next.Release(ctx))
	})
}

// Eight processes taking turns on three permits run at most 2.5 scripts per critical
// section: the release that admits the next waiter, and the releaser's next attempt,
// which finds no room and queues. The admitted waiter runs none.
func TestSemaphoreContendedSectionScripts(t *testing.T) {
	srv := ownServer(t)
	admin := newClient(t, srv.Addr())
	const workers, permits = 8, 3
	name := uniqueName(t, "sem")
	sems := make([]*simba.Semaphore, workers)
	for i := range sems {
		s, err := simba.NewSemaphore(newBackend(t, newClient(t, srv.Addr())), name, permits, simba.WithContenderID("c"+strconv.Itoa(i)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		sems[i] = s
	}
	acquires := make([]func(context.Context) (*simba.Lease, error), len(sems))
	for i, s := range sems {
		acquires[i] = s.Acquire
	}
	takeTurns(t, 200, acquires) // start-up checks, and each waiter's first subscription
	const sections = 800
	before := commandStats(t, admin)
	takeTurns(t, sections, acquires)
	after := commandStats(t, admin)
	per, by := commandsPer(before, after, sections)
	perScripts := float64(scripts(after)-scripts(before)) / sections
	t.Logf("scripts per section: %.2f; commands: %.2f (%s)", perScripts, per, by)
	assert.LessOrEqual(t, perScripts, 2.5)
}
