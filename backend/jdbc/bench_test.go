package jdbc_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/latency"
)

// BenchmarkLockerCycle measures an uncontended Acquire + Release of a Locker (p50-ns and
// p99-ns per cycle).
func BenchmarkLockerCycle(b *testing.B) {
	benchmarkLockerCycle(b, newBackend(b))
}

// BenchmarkPostgresLockerCycle is BenchmarkLockerCycle on PostgreSQL (whose test server
// does not flush commits).
func BenchmarkPostgresLockerCycle(b *testing.B) {
	benchmarkLockerCycle(b, newPGBackend(b))
}

// BenchmarkLockerCycleWithDeadline is BenchmarkLockerCycle with a context that can end, as
// an application's acquisitions have; BenchmarkPostgresLockerCycleWithDeadline on
// PostgreSQL.
func BenchmarkLockerCycleWithDeadline(b *testing.B) {
	benchmarkLockerCycleWithin(b, newBackend(b), time.Hour)
}

func BenchmarkPostgresLockerCycleWithDeadline(b *testing.B) {
	benchmarkLockerCycleWithin(b, newPGBackend(b), time.Hour)
}

func benchmarkLockerCycle(b *testing.B, be *jdbc.Backend) { benchmarkLockerCycleWithin(b, be, 0) }

// benchmarkLockerCycleWithin measures uncontended Locker cycles on be, each acquisition
// and release with a context that ends after within (0: never).
func benchmarkLockerCycleWithin(b *testing.B, be *jdbc.Backend, within time.Duration) {
	l, err := simba.NewLocker(be, mutexName(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	benchmarkCycle(b, ctx, l.Acquire)
}

// benchmarkCycle measures acquire and the release of the lease it returns, one after the
// other, with ctx, and reports p50-ns and p99-ns per cycle.
func benchmarkCycle(b *testing.B, ctx context.Context, acquire func(context.Context) (*simba.Lease, error)) {
	var cycles []time.Duration
	created, cpu := goroutinesCreated(), processCPU()
	for b.Loop() {
		began := time.Now()
		lease, err := acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		cycles = append(cycles, time.Since(began))
	}
	b.ReportMetric(float64(goroutinesCreated()-created)/float64(len(cycles)), "goroutines/op")
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(len(cycles)), "cpu-ns/op")
	latency.Report(b, cycles)
}

// goroutinesCreated returns how many goroutines the process has created.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkHandOver measures the time from the holder's Release call to the return of
// Acquire in a waiter on another backend with a pool of its own (another process, as far
// as the store can tell) that was already waiting. It reports p50-ns and p99-ns.
func BenchmarkHandOver(b *testing.B) {
	benchmarkHandOver(b)
}

func benchmarkHandOver(b *testing.B, opts ...jdbc.Option) {
	mutex := mutexName(b)
	backends := []*jdbc.Backend{newBackend(b, opts...), newBackend(b, opts...)}
	lockers := make([]*simba.Locker, 2)
	for i, be := range backends {
		var err error
		if lockers[i], err = simba.NewLocker(be, mutex); err != nil {
			b.Fatal(err)
		}
	}
	benchHandOvers(b, [2]func(context.Context) (*simba.Lease, error){lockers[0].Acquire, lockers[1].Acquire},
		func(w int) bool { return backends[w].Waiting(mutex) > 0 })
}

// benchHandOvers times hand-overs between two acquirers taking turns: the first one holds,
// and in each round the other one's acquisition waits (waiting tells when its backend sees
// it waiting), the holder releases, and the time from that release call to the waiter's
// acquisition returning is a sample; it reports p50-ns and p99-ns.
func benchHandOvers(b *testing.B, acquire [2]func(context.Context) (*simba.Lease, error), waiting func(w int) bool) {
	ctx := context.Background()
	held, err := acquire[0](ctx)
	if err != nil {
		b.Fatal(err)
	}
	type acquired struct {
		lease *simba.Lease
		at    time.Time
		err   error
	}
	var latencies []time.Duration
	i := 0
	for b.Loop() {
		w := (i + 1) % 2
		i++
		got := make(chan acquired, 1)
		go func() {
			l, err := acquire[w](ctx)
			got <- acquired{l, time.Now(), err}
		}()
		for !waiting(w) {
			runtime.Gosched()
		}
		began := time.Now()
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		a := <-got
		if a.err != nil {
			b.Fatal(a.err)
		}
		latencies = append(latencies, a.at.Sub(began))
		held = a.lease
	}
	b.StopTimer()
	_ = held.Release(ctx)
	latency.Report(b, latencies)
}

// BenchmarkContenders8 runs eight contenders, each a Locker on a backend with a pool of
// its own, taking turns on one mutex; it reports critical sections per second (sections/s)
// and the time from one section's end to the next one's start (gap p50-ns and p99-ns).
func BenchmarkContenders8(b *testing.B) {
	const n = 8
	mutex := mutexName(b)
	ctx := context.Background()
	lockers := make([]*simba.Locker, n)
	for i := range lockers {
		var err error
		if lockers[i], err = simba.NewLocker(newBackend(b), mutex); err != nil {
			b.Fatal(err)
		}
	}
	var (
		left    atomic.Int64
		mu      sync.Mutex
		lastEnd time.Time
		gaps    []time.Duration
		failed  atomic.Value
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				lease, err := l.Acquire(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				if !lastEnd.IsZero() {
					gaps = append(gaps, time.Since(lastEnd))
				}
				lastEnd = time.Now()
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
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sections/s")
	latency.Report(b, gaps)
}

// BenchmarkStartContend measures what a Locker's acquisition costs the backend before
// its first statement and after its last: StartContend and StopContend, no I/O once the
// table is checked.
func BenchmarkStartContend(b *testing.B) {
	b.Run("mysql", func(b *testing.B) { benchmarkStartContend(b, newBackend(b)) })
	b.Run("postgres", func(b *testing.B) { benchmarkStartContend(b, newPGBackend(b)) })
}

func benchmarkStartContend(b *testing.B, be *jdbc.Backend) {
	ctx := context.Background()
	p := backend.Participant{Mutex: mutexName(b), ContenderID: "bench", TTL: 10 * time.Second, Transition: 6 * time.Second,
		Wake: func() {}, WaitsOnly: true}
	c, err := be.StartContend(ctx, p) // checks the table
	if err != nil {
		b.Fatal(err)
	}
	_ = c.StopContend(ctx)
	b.ReportAllocs()
	for b.Loop() {
		c, err := be.StartContend(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.StopContend(ctx)
	}
}
