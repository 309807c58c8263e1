package jdbc_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
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
	benchmarkCycle(b, s.Acquire)
}
