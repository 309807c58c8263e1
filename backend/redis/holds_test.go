package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/latency"
)

// holdKeys returns the names of the keys of a semaphore ("sem") or read-write lock ("rw").
func holdKeys(kind, name string) map[string]string {
	base := "simba:" + kind + ":{" + name + "}"
	keys := map[string]string{}
	for _, k := range []string{"holders", "holds", "queue", "alive", "writers", "permits", "fence"} {
		keys[k] = base + ":" + k
	}
	return keys
}

// process returns a backend of a client of its own: another process.
func process(t *testing.T) *redis.Backend {
	return newBackend(t, newClient(t, server(t).Addr()))
}

// acquiring runs acquire on a goroutine of its own; the result arrives on the channel.
type acquired struct {
	lease *simba.Lease
	err   error
}

func acquiring(ctx context.Context, acquire func(context.Context) (*simba.Lease, error)) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- acquired{l, err}
	}()
	return ch
}

// awaitLease waits up to d for an acquisition's lease.
func awaitLease(t *testing.T, ch <-chan acquired, d time.Duration, what string) *simba.Lease {
	t.Helper()
	select {
	case a := <-ch:
		require.NoError(t, a.err, what)
		return a.lease
	case <-time.After(d):
		require.FailNow(t, what+": no hold within "+d.String())
		return nil
	}
}

// awaitQueued waits until id is in the queue of the hold whose keys are keys.
func awaitQueued(t *testing.T, admin goredis.UniversalClient, keys map[string]string, id string) {
	t.Helper()
	poll(t, id+" queued", func() bool {
		_, err := admin.ZScore(context.Background(), keys["queue"], id).Result()
		return err == nil
	})
}

// A process that gives another permit count than the holders' is refused at once, with
// both counts; once the holders are gone, the count goes with them.
func TestSemaphorePermitCountRefused(t *testing.T) {
	ctx := t.Context()
	name := uniqueName(t, "sem")
	two, err := simba.NewSemaphore(process(t), name, 2, simba.WithContenderID("two"))
	require.NoError(t, err)
	defer two.Close()
	l, err := two.Acquire(ctx)
	require.NoError(t, err)

	three, err := simba.NewSemaphore(process(t), name, 3, simba.WithContenderID("three"))
	require.NoError(t, err)
	defer three.Close()
	_, err = three.TryAcquire(ctx)
	require.ErrorIs(t, err, simba.ErrRefused)
	assert.Contains(t, err.Error(), "has 2 permits, not 3")

	require.NoError(t, l.Release(ctx))
	l3, err := three.TryAcquire(ctx)
	require.NoError(t, err, "nobody holds or waits: a new count")
	require.NoError(t, l3.Release(ctx))
}

// A mutex, a semaphore and a read-write lock of one name are different things.
func TestHoldKindsApart(t *testing.T) {
	ctx := t.Context()
	b := process(t)
	name := uniqueName(t, "name")
	locker, err := simba.NewLocker(b, name, simba.WithContenderID("locker"))
	require.NoError(t, err)
	defer locker.Close()
	sem, err := simba.NewSemaphore(b, name, 1, simba.WithContenderID("sem"))
	require.NoError(t, err)
	defer sem.Close()
	rw, err := simba.NewRWMutex(b, name, simba.WithContenderID("rw"))
	require.NoError(t, err)
	defer rw.Close()

	m, err := locker.TryAcquire(ctx)
	require.NoError(t, err)
	s, err := sem.TryAcquire(ctx)
	require.NoError(t, err, "a semaphore beside the mutex of its name")
	w, err := rw.TryLock(ctx)
	require.NoError(t, err, "a write hold beside the semaphore and the mutex of its name")
	for _, l := range []*simba.Lease{m, s, w.Lease} {
		require.NoError(t, l.Release(ctx))
	}
}

// A release wakes the waiters that now fit at once, not at their next attempt, which a
// long ttl puts far off: one waiter of a semaphore, every reader behind a writer.
func TestHoldReleaseWakesWaiters(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, server(t).Addr())
	long := []simba.LockerOption{simba.WithTTL(30 * time.Second), simba.WithTransition(0)}
	const soon = 10 * time.Second // well before the holder's lease would end

	t.Run("semaphore", func(t *testing.T) {
		name := uniqueName(t, "sem")
		holder, err := simba.NewSemaphore(process(t), name, 1, append(long, simba.WithContenderID("h"))...)
		require.NoError(t, err)
		defer holder.Close()
		waiter, err := simba.NewSemaphore(process(t), name, 1, append(long, simba.WithContenderID("w"))...)
		require.NoError(t, err)
		defer waiter.Close()
		h, err := holder.Acquire(ctx)
		require.NoError(t, err)
		w := acquiring(ctx, waiter.Acquire)
		awaitQueued(t, admin, holdKeys("sem", name), "w#0")
		require.NoError(t, h.Release(ctx))
		l := awaitLease(t, w, soon, "the waiter")
		require.NoError(t, l.Release(ctx))
	})

	t.Run("readers", func(t *testing.T) {
		name := uniqueName(t, "rw")
		writer, err := simba.NewRWMutex(process(t), name, append(long, simba.WithContenderID("w"))...)
		require.NoError(t, err)
		defer writer.Close()
		wl, err := writer.Lock(ctx)
		require.NoError(t, err)
		var readers []<-chan acquired
		for i := range 3 {
			id := "r" + strconv.Itoa(i)
			m, err := simba.NewRWMutex(process(t), name, append(long, simba.WithContenderID(id))...)
			require.NoError(t, err)
			defer m.Close()
			readers = append(readers, acquiring(ctx, m.RLock))
			awaitQueued(t, admin, holdKeys("rw", name), id+"/r#0")
		}
		require.NoError(t, wl.Release(ctx))
		for i, r := range readers {
			l := awaitLease(t, r, soon, "reader "+strconv.Itoa(i))
			defer func() { require.NoError(t, l.Release(ctx)) }()
		}
	})
}

// A waiter whose process died (its backend closed, nothing released) is dropped once it
// has been silent for longer than a live waiter can be, and the waiter behind it gets
// the permit.
func TestHoldDeadWaiterDropped(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, server(t).Addr())
	name := uniqueName(t, "sem")
	keys := holdKeys("sem", name)
	short := []simba.LockerOption{simba.WithTTL(time.Second), simba.WithTransition(200 * time.Millisecond)}
	semaphore := func(b *redis.Backend, id string) *simba.Semaphore {
		s, err := simba.NewSemaphore(b, name, 1, append(short, simba.WithContenderID(id))...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	h, err := semaphore(process(t), "holder").Acquire(ctx)
	require.NoError(t, err)

	deadBackend := process(t)
	dead := acquiring(ctx, semaphore(deadBackend, "dead").Acquire)
	awaitQueued(t, admin, keys, "dead#0")
	require.NoError(t, deadBackend.Close())
	assert.ErrorIs(t, (<-dead).err, simba.ErrClosed)

	live := acquiring(ctx, semaphore(process(t), "live").Acquire)
	awaitQueued(t, admin, keys, "live#0")
	require.NoError(t, h.Release(ctx))
	// The dead waiter is silent for at most the soonest hold's transition (none now), its
	// jitter and a lease (about 2.2 s) before it counts as gone.
	l := awaitLease(t, live, 20*time.Second, "the waiter behind the dead one")
	_, err = admin.ZScore(ctx, keys["queue"], "dead#0").Result()
	assert.ErrorIs(t, err, goredis.Nil, "the dead waiter is off the queue")
	require.NoError(t, l.Release(ctx))
}

// A writer whose process dies (nothing released, no renewal) lets the reader waiting
// behind it in once its hold has lapsed on the store, not before it stopped believing.
func TestHoldDeadHolderLapses(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, server(t).Addr())
	name := uniqueName(t, "rw")
	opts := []simba.LockerOption{simba.WithTTL(time.Second), simba.WithTransition(200 * time.Millisecond)}
	deadBackend := process(t)
	writer, err := simba.NewRWMutex(deadBackend, name, append(opts, simba.WithContenderID("w"))...)
	require.NoError(t, err)
	defer writer.Close()
	reader, err := simba.NewRWMutex(process(t), name, append(opts, simba.WithContenderID("r"))...)
	require.NoError(t, err)
	defer reader.Close()

	w, err := writer.Lock(ctx)
	require.NoError(t, err)
	r := acquiring(ctx, reader.RLock)
	awaitQueued(t, admin, holdKeys("rw", name), "r/r#0")
	require.NoError(t, deadBackend.Close())

	l := awaitLease(t, r, 20*time.Second, "the reader behind the dead writer")
	select {
	case <-w.Done():
	default:
		assert.Fail(t, "the reader got in while the dead writer still believed")
	}
	assert.Greater(t, l.Token(), w.Token())
	require.NoError(t, l.Release(ctx))
}

// Every key of a semaphore or read-write lock is in the slot of its hash tag, on the node
// that serves it, and names spread over the masters.
func TestClusterHoldKeysShareOneSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; skipped with -short")
	}
	addrs := startCluster(t)
	client := newClusterClient(t, addrs)
	holding, waiting := newBackend(t, client), newBackend(t, newClusterClient(t, addrs))
	ctx := t.Context()
	nodesUsed := map[string]bool{}
	for i := range 12 {
		name := "slot-" + strconv.Itoa(i)
		kind, present := "sem", []string{"holders", "holds", "queue", "alive", "permits", "fence"}
		var held *simba.Lease
		var wait <-chan acquired
		wctx, cancel := context.WithCancel(ctx)
		if i%2 == 0 {
			s, err := simba.NewSemaphore(holding, name, 1, simba.WithContenderID("h"))
			require.NoError(t, err)
			defer s.Close()
			held, err = s.Acquire(ctx)
			require.NoError(t, err)
			w, err := simba.NewSemaphore(waiting, name, 1, simba.WithContenderID("w"))
			require.NoError(t, err)
			defer w.Close()
			wait = acquiring(wctx, w.Acquire)
			awaitQueued(t, client, holdKeys(kind, name), "w#0")
		} else {
			kind, present = "rw", []string{"holders", "holds", "queue", "alive", "writers", "fence"}
			r, err := simba.NewRWMutex(holding, name, simba.WithContenderID("h"))
			require.NoError(t, err)
			defer r.Close()
			held, err = r.RLock(ctx)
			require.NoError(t, err)
			w, err := simba.NewRWMutex(waiting, name, simba.WithContenderID("w"))
			require.NoError(t, err)
			defer w.Close()
			wait = acquiring(wctx, func(ctx context.Context) (*simba.Lease, error) {
				wl, err := w.Lock(ctx)
				if err != nil {
					return nil, err
				}
				return wl.Lease, nil
			})
			awaitQueued(t, client, holdKeys(kind, name), "w/w#0")
		}
		keys := holdKeys(kind, name)
		slot, err := client.ClusterKeySlot(ctx, "{"+name+"}").Result()
		require.NoError(t, err)
		node, err := client.MasterForKey(ctx, keys["holders"])
		require.NoError(t, err)
		nodesUsed[node.Options().Addr] = true
		for _, k := range present {
			s, err := client.ClusterKeySlot(ctx, keys[k]).Result()
			require.NoError(t, err)
			assert.Equal(t, slot, s, "slot of %s", keys[k])
			n, err := node.Exists(ctx, keys[k]).Result()
			require.NoError(t, err)
			assert.EqualValues(t, 1, n, "%s on the node of its slot", keys[k])
		}
		cancel()
		assert.ErrorIs(t, (<-wait).err, context.Canceled)
		require.NoError(t, held.Release(ctx))
	}
	assert.Len(t, nodesUsed, 3, "twelve names should spread over the three masters")
}

// A Quorum keeps mutexes only: a semaphore or read-write lock on it is refused at
// construction, before any I/O.
func TestQuorumKeepsNoHolds(t *testing.T) {
	q, err := redis.NewQuorum([]goredis.UniversalClient{unreachable(t), unreachable(t), unreachable(t)})
	require.NoError(t, err)
	defer q.Close()
	_, err = simba.NewSemaphore(q, "name", 2)
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewRWMutex(q, "name")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// BenchmarkSemaphoreCycle measures an uncontended Acquire + Release of a permit: two
// script calls. It reports the median and 99th percentile cycle as p50-ns and p99-ns.
func BenchmarkSemaphoreCycle(b *testing.B) {
	s, err := simba.NewSemaphore(newBackend(b, newClient(b, server(b).Addr())), uniqueName(b, "sem"), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var cycles []time.Duration
	for b.Loop() {
		began := time.Now()
		l, err := s.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		cycles = append(cycles, time.Since(began))
	}
	latency.Report(b, cycles)
}

// BenchmarkSemaphoreEightOnThree runs eight goroutines, each with a semaphore on a backend
// and a client of its own, taking turns on three permits with empty critical sections.
// It reports critical sections per second and the commands the server ran per section;
// each op is one critical section.
func BenchmarkSemaphoreEightOnThree(b *testing.B) {
	const workers, permits = 8, 3
	name := uniqueName(b, "sem")
	sems := make([]*simba.Semaphore, workers)
	for i := range sems {
		s, err := simba.NewSemaphore(newBackend(b, newClient(b, server(b).Addr())), name, permits,
			simba.WithContenderID("c"+strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		sems[i] = s
	}
	admin := newClient(b, server(b).Addr())
	before := commandStats(b, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		left, holders atomic.Int64
		wg            sync.WaitGroup
		errs          = make(chan error, workers)
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	began := time.Now()
	for _, s := range sems {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				l, err := s.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				if holders.Add(1) > permits {
					errs <- errors.New("more holders than permits")
				}
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "sections/s")
	reportCommands(b, before, commandStats(b, admin))
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// contendHold opens a lease contention for hold on b directly, as the service would, and
// stops it when t ends.
func contendHold(t *testing.T, b simba.Backend, name, id string, hold backend.Hold) backend.LeaseContention {
	t.Helper()
	c, err := b.StartContend(t.Context(), backend.Participant{
		Mutex: name, ContenderID: id, TTL: testTTL, Transition: testTransition,
		Logger: slog.New(slog.DiscardHandler), Wake: func() {}, Hold: hold,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.LeaseContention)
}

// A new contention whose ID still holds (the earlier one's release was lost) begins a new
// hold with a larger token; its renewals keep that token. Each answer names the holder
// with its ttl and transition.
func TestHoldLostReleaseBeginsANewHold(t *testing.T) {
	ctx := t.Context()
	name := uniqueName(t, "sem")
	hold := backend.Hold{Kind: backend.Semaphore, Permits: 2}
	first := contendHold(t, process(t), name, "a", hold)
	rec, err := first.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", rec.Owner)
	assert.InDelta(t, testTTL, rec.TTL, float64(time.Second))
	assert.InDelta(t, testTTL+testTransition, rec.Transition, float64(time.Second))

	again := contendHold(t, process(t), name, "a", hold)
	next, err := again.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", next.Owner)
	assert.Greater(t, next.Token, rec.Token, "a new contention resumed the lost hold's token")
	renewed, err := again.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, next.Token, renewed.Token, "a renewal changed the token")
	require.NoError(t, again.Release(ctx))
}

// A release that lets in more waiters than it names wakes every waiter: 80 readers
// behind a writer all read once it leaves, long before their next attempt.
func TestHoldReleaseWakesManyReaders(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, server(t).Addr())
	name := uniqueName(t, "rw")
	long := []simba.LockerOption{simba.WithTTL(30 * time.Second), simba.WithTransition(0)}
	writer, err := simba.NewRWMutex(process(t), name, append(long, simba.WithContenderID("w"))...)
	require.NoError(t, err)
	defer writer.Close()
	wl, err := writer.Lock(ctx)
	require.NoError(t, err)
	readers := process(t) // one process: its readers share a subscription
	var waiting []<-chan acquired
	for i := range 80 {
		m, err := simba.NewRWMutex(readers, name, append(long, simba.WithContenderID("r"+strconv.Itoa(i)))...)
		require.NoError(t, err)
		defer m.Close()
		waiting = append(waiting, acquiring(ctx, m.RLock))
	}
	poll(t, "80 readers queued", func() bool { return admin.ZCard(ctx, holdKeys("rw", name)["queue"]).Val() == 80 })
	require.NoError(t, wl.Release(ctx))
	for i, r := range waiting {
		l := awaitLease(t, r, 10*time.Second, "reader "+strconv.Itoa(i))
		defer func() { require.NoError(t, l.Release(ctx)) }()
	}
}
