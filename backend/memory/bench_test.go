package memory_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/internal/latency"
	"github.com/simba-go/simba/internal/options"
	"github.com/simba-go/simba/observe"
)

// BenchmarkLockerCycle measures an uncontended Acquire + Release.
func BenchmarkLockerCycle(b *testing.B) { lockerCycle(b) }

// BenchmarkLockerCycleObserved is BenchmarkLockerCycle with an Observer that does nothing:
// the cost of building and delivering the events.
func BenchmarkLockerCycleObserved(b *testing.B) {
	lockerCycle(b, simba.WithObserver(observe.Funcs{}))
}

func lockerCycle(b *testing.B, opts ...simba.Option) {
	be, err := memory.New(memory.NewStore())
	if err != nil {
		b.Fatal(err)
	}
	l, err := simba.NewLocker(be, "bench", options.As[simba.LockerOption](opts)...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		lease, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandOver measures the time from the holder's Release call to the return of
// Acquire in a waiter on another backend instance that was already waiting. It reports
// the median and 99th percentile as p50-ns and p99-ns.
func BenchmarkHandOver(b *testing.B) {
	store := memory.NewStore()
	ctx := context.Background()
	lockers := make([]*simba.Locker, 2)
	for i := range lockers {
		be, err := memory.New(store)
		if err != nil {
			b.Fatal(err)
		}
		if lockers[i], err = simba.NewLocker(be, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	held, err := lockers[0].Acquire(ctx)
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
		waiter := lockers[(i+1)%2]
		i++
		got := make(chan acquired, 1)
		go func() {
			l, err := waiter.Acquire(ctx)
			got <- acquired{l, time.Now(), err}
		}()
		for store.Waiting("bench") == 0 {
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

// BenchmarkMutexesLocalHandOver measures a hand-over between two goroutines of one
// process sharing a mutex through simba.Mutexes: from the holder's Release call to the
// return of Acquire in the goroutine that was already waiting in the local queue. No store
// call is made.
func BenchmarkMutexesLocalHandOver(b *testing.B) {
	be, err := memory.New(memory.NewStore())
	if err != nil {
		b.Fatal(err)
	}
	m, err := simba.NewMutexes(be, simba.WithLocalHandOvers(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	held, err := m.Acquire(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	type acquired struct {
		lease *simba.Lease
		at    time.Time
		err   error
	}
	var latencies []time.Duration
	for b.Loop() {
		got := make(chan acquired, 1)
		queued := make(chan struct{})
		go func() {
			close(queued)
			l, err := m.Acquire(ctx, "bench")
			got <- acquired{l, time.Now(), err}
		}()
		<-queued
		for m.Waiting("bench") == 0 {
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
