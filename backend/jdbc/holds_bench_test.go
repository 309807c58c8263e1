package jdbc_test

import (
	"context"
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
	ctx := context.Background()
	var cycles []time.Duration
	for b.Loop() {
		began := time.Now()
		lease, err := s.Acquire(ctx)
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
