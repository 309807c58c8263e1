package simba_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// The root package's share of a Locker's uncontended cycle (Acquire, then Release), on the
// memory backend, whose calls cost next to nothing: what every store pays around its own
// calls. One per kind of caller's context, as each takes a path of its own:
//
//	go test -run '^$' -bench LockerCycle -benchmem
func BenchmarkLockerCycle(b *testing.B) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			be, err := memory.New(memory.NewStore())
			require.NoError(b, err)
			l, err := simba.NewLocker(be, "bench-cycle")
			require.NoError(b, err)
			defer l.Close()
			ctx, cancel := c.ctx()
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := l.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The root package's share of a contended section: n Lockers on one memory store take
// turns on one mutex (contendedRing), each acquisition finding the mutex owned and waiting
// for the release to wake it. Each op is one section; cpu-ns/op is the process's CPU time
// (getrusage) per section, the ring's own bookkeeping included.
//
//	go test -run '^$' -bench LockersContended -benchmem
func BenchmarkLockersContended(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := newContendedRing(b, n)
			require.NoError(b, r.run(n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime(b)
			require.NoError(b, r.run(b.N))
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime returns the CPU time the process has used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
