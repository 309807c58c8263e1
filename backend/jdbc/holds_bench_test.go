package jdbc_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/latency"
)

// BenchmarkPermitCycle measures an uncontended Acquire + Release of a semaphore's permit
// (p50-ns and p99-ns per cycle), to set beside BenchmarkLockerCycle.
func BenchmarkPermitCycle(b *testing.B) {
	benchmarkPermitCycle(b, newBackend(b))
}

// BenchmarkPostgresPermitCycle is BenchmarkPermitCycle on PostgreSQL.
func BenchmarkPostgresPermitCycle(b *testing.B) {
	benchmarkPermitCycle(b, newPGBackend(b))
}

func benchmarkPermitCycle(b *testing.B, be *jdbc.Backend) {
	s, err := simba.NewSemaphore(be, mutexName(b), 3)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	benchmarkCycle(b, context.Background(), s.Acquire)
}

// BenchmarkPermitHandOver measures the time from the Release of a semaphore's only permit
// to the return of Acquire in a waiter on another backend with a pool of its own (another
// process, as far as the store can tell) that was already parked. It reports p50-ns and
// p99-ns, to set beside BenchmarkHandOver.
func BenchmarkPermitHandOver(b *testing.B) {
	benchmarkPermitHandOver(b, newBackend)
}

// BenchmarkPostgresPermitHandOver is BenchmarkPermitHandOver on PostgreSQL.
func BenchmarkPostgresPermitHandOver(b *testing.B) {
	benchmarkPermitHandOver(b, newPGBackend)
}

func benchmarkPermitHandOver(b *testing.B, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
	name := mutexName(b)
	backends := []*jdbc.Backend{newB(b), newB(b)}
	sems := make([]*simba.Semaphore, 2)
	for i, be := range backends {
		var err error
		if sems[i], err = simba.NewSemaphore(be, name, 1); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sems[i].Close() })
	}
	benchHandOvers(b, [2]func(context.Context) (*simba.Lease, error){sems[0].Acquire, sems[1].Acquire},
		func(w int) bool { return backends[w].Parked(name) > 0 })
}

// BenchmarkPermits8On3 runs eight contenders, each a Semaphore on a backend with a pool of
// its own, taking and giving back permits of a semaphore of three; it reports holds per
// second (holds/s) and the time from an Acquire call to its return (wait p50-ns and
// p99-ns).
func BenchmarkPermits8On3(b *testing.B) {
	benchmarkPermits8On3(b, newBackend)
}

// BenchmarkPostgresPermits8On3 is BenchmarkPermits8On3 on PostgreSQL.
func BenchmarkPostgresPermits8On3(b *testing.B) {
	benchmarkPermits8On3(b, newPGBackend)
}

func benchmarkPermits8On3(b *testing.B, newB func(t testing.TB, opts ...jdbc.Option) *jdbc.Backend) {
	const n, permits = 8, 3
	name := mutexName(b)
	ctx := context.Background()
	sems := make([]*simba.Semaphore, n)
	for i := range sems {
		var err error
		if sems[i], err = simba.NewSemaphore(newB(b), name, permits); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sems[i].Close() })
	}
	var (
		left   atomic.Int64
		mu     sync.Mutex
		waits  []time.Duration
		failed atomic.Value
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for _, s := range sems {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				asked := time.Now()
				lease, err := s.Acquire(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				waits = append(waits, time.Since(asked))
				mu.Unlock()
				if err := lease.Release(ctx); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "holds/s")
	latency.Report(b, waits)
}
