package jdbc_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
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

func benchmarkLockerCycle(b *testing.B, be *jdbc.Backend) {
	l, err := simba.NewLocker(be, mutexName(b))
	if err != nil {
		b.Fatal(err)
	}
	benchmarkCycle(b, l.Acquire)
}

// benchmarkCycle measures acquire and the release of the lease it returns, one after the
// other, and reports p50-ns and p99-ns per cycle.
func benchmarkCycle(b *testing.B, acquire func(context.Context) (*simba.Lease, error)) {
	ctx := context.Background()
	var cycles []time.Duration
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
	latency.Report(b, cycles)
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
