package simba_test

import (
	"context"
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
