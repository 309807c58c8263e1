package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/etcd"
)

// The benchmarks compare simba's Locker with etcd's concurrency.Mutex on the same member,
// each client with a connection of its own to it (no fault proxy between).
//
//	cd backend/etcd && go test -run '^$' -bench . -benchtime 5s
//	go test -run '^$' -bench 'VsConcurrencyMutexCycle' -benchtime 3000x -count 5

// An uncontended acquire and release with a Locker: a transaction that puts the key and
// reads the mutex, and a delete.
func BenchmarkLockerCycle(b *testing.B) {
	l := benchLocker(b, "bench-cycle", "bench")
	ctx := context.Background()
	defer reportCPU(b)()
	for b.Loop() {
		if err := cycle(ctx, lockerAcquire(l)); err != nil {
			b.Fatal(err)
		}
	}
}

// An uncontended acquire and release of a semaphore's permit: a transaction that puts the
// place and reads the name, one that puts the marker, and a delete.
func BenchmarkSemaphoreCycle(b *testing.B) {
	be := newBackend(b)
	s, err := simba.NewSemaphore(be, "bench-semaphore", 3, simba.WithContenderID("bench"))
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	for b.Loop() {
		lease, err := s.Acquire(ctx)
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
	m := benchMutex(b, "bench-concurrency/")
	ctx := context.Background()
	defer reportCPU(b)()
	for b.Loop() {
		if err := cycle(ctx, mutexAcquire(m)); err != nil {
			b.Fatal(err)
		}
	}
}

// A Locker's cycle and a concurrency.Mutex's cycle in turn, one op each: on a machine whose
// load moves, the ratio of the two (mutex/locker, 1.0 when the Locker is as fast) is steadier
// than two benchmarks run one after the other. Acquire and release are reported apart.
func BenchmarkLockerVsConcurrencyMutexCycle(b *testing.B) {
	versus(b, "locker", lockerAcquire(benchLocker(b, "bench-versus", "bench")), benchMutex(b, "bench-versus-concurrency/"))
}

// The same with the backend's contention alone (StartContend and StopContend of a Locker's
// participant), without the Locker's own work: the backend's share of a Locker's cycle.
func BenchmarkContentionVsConcurrencyMutexCycle(b *testing.B) {
	be := benchBackend(b)
	p := backend.Participant{Mutex: "bench-versus-contention", ContenderID: "bench", TTL: 10 * time.Second, WaitsOnly: true,
		Wake: func() {}, Report: func(backend.Record, time.Time) {}}
	contend := func(ctx context.Context) (func(context.Context) error, error) {
		c, err := be.StartContend(ctx, p)
		if err != nil {
			return nil, err
		}
		return c.StopContend, nil
	}
	versus(b, "contention", contend, benchMutex(b, "bench-versus-contention-concurrency/"))
}

// versus times a cycle of acquire, named name, and one of m in turn, and reports their
// acquires and releases, and the ratio of m's cycle to acquire's.
func versus(b *testing.B, name string, acquire acquireFunc, m *concurrency.Mutex) {
	sides := []struct {
		acquire acquireFunc
		took    [2]time.Duration // acquire, release
	}{{acquire: acquire}, {acquire: mutexAcquire(m)}}
	ctx := context.Background()
	for b.Loop() {
		for i := range sides {
			began := time.Now()
			release, err := sides[i].acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			acquired := time.Now()
			if err := release(ctx); err != nil {
				b.Fatal(err)
			}
			sides[i].took[0] += acquired.Sub(began)
			sides[i].took[1] += time.Since(acquired)
		}
	}
	n := float64(b.N)
	for i, name := range []string{name, "mutex"} {
		b.ReportMetric(float64(sides[i].took[0].Microseconds())/n, name+"-acquire-µs")
		b.ReportMetric(float64(sides[i].took[1].Microseconds())/n, name+"-release-µs")
	}
	b.ReportMetric(float64(sides[1].took[0]+sides[1].took[1])/float64(sides[0].took[0]+sides[0].took[1]), "mutex/"+name)
}

// Two Lockers, each on a backend of its own, take turns: while one holds, the other
// waits in Acquire, and one op is the holder's release and the waiter's Acquire returning
// (woken by its watch on the holder's key).
func BenchmarkLockerHandOver(b *testing.B) {
	handOver(b, etcd.DefaultPrefix+"bench-handover/", [2]acquireFunc{
		lockerAcquire(benchLocker(b, "bench-handover", "a")), lockerAcquire(benchLocker(b, "bench-handover", "b"))})
}

// The same with etcd's concurrency.Mutex, a session each.
func BenchmarkConcurrencyMutexHandOver(b *testing.B) {
	handOver(b, "bench-concurrency-handover/", [2]acquireFunc{
		mutexAcquire(benchMutex(b, "bench-concurrency-handover/")), mutexAcquire(benchMutex(b, "bench-concurrency-handover/"))})
}

// handOver times hand-overs between the two clients of acquire, whose keys lie under
// prefix. Before each release, the timer stopped, it waits until the waiter's key is there
// (the release hands over to a waiter, not to a later acquire), and holds for handOverHold
// more. Run it with a count: -benchtime 100x.
func handOver(b *testing.B, prefix string, acquire [2]acquireFunc) {
	ctx := context.Background()
	admin := newClient(b, server.Addr())
	release, err := acquire[0](ctx)
	require.NoError(b, err)
	holder := 0
	type acquired struct {
		release func(context.Context) error
		err     error
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		got := make(chan acquired, 1)
		go func(waiter int) {
			r, err := acquire[waiter](ctx)
			got <- acquired{r, err}
		}(1 - holder)
		for {
			resp, err := admin.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			require.NoError(b, err)
			if resp.Count == 2 {
				break
			}
		}
		time.Sleep(handOverHold)
		b.StartTimer()
		require.NoError(b, release(ctx))
		a := <-got
		require.NoError(b, a.err)
		release, holder = a.release, 1-holder
	}
	b.StopTimer()
	require.NoError(b, release(ctx))
}

// handOverHold is how long the holder holds once the waiter's key is there: past the
// 100ms in which etcd catches up a watch that starts at a revision already written, so
// that the release finds the waiter's watch in step, whichever library.
const handOverHold = 150 * time.Millisecond

// benchClients is how many clients contend in the contended benchmarks.
const benchClients = 8

// Eight clients loop acquire, an empty critical section, release on one mutex, each with
// a Locker on a backend (a connection and a lease) of its own: a waiter takes over when
// the watch on its predecessor's key fires. One op is one critical section.
func BenchmarkLocker8Clients(b *testing.B) {
	var lockers []*simba.Locker
	for i := range benchClients {
		lockers = append(lockers, benchLocker(b, "bench-8", fmt.Sprintf("c%d", i)))
	}
	var acquire []acquireFunc
	for _, l := range lockers {
		acquire = append(acquire, lockerAcquire(l))
	}
	contend(b, acquire)
}

// The same with etcd's concurrency.Mutex, a session (a connection and a lease) per client.
func BenchmarkConcurrencyMutex8Clients(b *testing.B) {
	var mutexes []*concurrency.Mutex
	for range benchClients {
		mutexes = append(mutexes, benchMutex(b, "bench-concurrency-8/"))
	}
	var acquire []acquireFunc
	for _, m := range mutexes {
		acquire = append(acquire, mutexAcquire(m))
	}
	contend(b, acquire)
}

// benchLocker returns a Locker of id for mutex on a backend of its own, with a client of
// its own on the shared member.
func benchLocker(b *testing.B, mutex, id string) *simba.Locker {
	b.Helper()
	l, err := simba.NewLocker(benchBackend(b), mutex, simba.WithContenderID(id))
	require.NoError(b, err)
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// benchBackend returns a backend with a client of its own on the shared member.
func benchBackend(b *testing.B) *etcd.Backend {
	b.Helper()
	needServer(b)
	be, err := etcd.New(newClient(b, server.Addr()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = be.Close() }) // before the client closes: cleanups run last first
	return be
}

// benchMutex returns a concurrency.Mutex on prefix, on a session of its own with a
// client of its own on the shared member.
func benchMutex(b *testing.B, prefix string) *concurrency.Mutex {
	b.Helper()
	needServer(b)
	s, err := concurrency.NewSession(newClient(b, server.Addr()), concurrency.WithTTL(10))
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return concurrency.NewMutex(s, prefix)
}

// acquireFunc acquires a mutex and returns the function that releases it.
type acquireFunc func(ctx context.Context) (release func(context.Context) error, err error)

func lockerAcquire(l *simba.Locker) acquireFunc {
	return func(ctx context.Context) (func(context.Context) error, error) {
		lease, err := l.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return lease.Release, nil
	}
}

func mutexAcquire(m *concurrency.Mutex) acquireFunc {
	return func(ctx context.Context) (func(context.Context) error, error) {
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return m.Unlock, nil
	}
}

// reportCPU, deferred as reportCPU(b)() before the loop, reports the CPU time (user and
// system) the process spent per op: the client's work, as the member is another process.
// Unlike the time per op, it moves little with the machine's load.
func reportCPU(b *testing.B) func() {
	began := cpuTime(b)
	return func() {
		b.ReportMetric(float64((cpuTime(b)-began).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cycle acquires and releases at once.
func cycle(ctx context.Context, acquire acquireFunc) error {
	release, err := acquire(ctx)
	if err != nil {
		return err
	}
	return release(ctx)
}

// contend runs a client for each of acquire at once, each looping acquire, an empty
// critical section, release, until b.N sections are done, and fails if two overlapped.
func contend(b *testing.B, acquire []acquireFunc) {
	ctx := context.Background()
	var (
		left     atomic.Int64
		inside   atomic.Int32
		overlaps atomic.Int64
		wg       sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	for _, acq := range acquire {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				release, err := acq(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				if err := release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if n := overlaps.Load(); n > 0 {
		b.Errorf("%d critical sections overlapped", n)
	}
}
