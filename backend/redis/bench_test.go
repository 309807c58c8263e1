package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/latency"
	"github.com/simba-go/simba/internal/testserver"
)

// BenchmarkRoundTrip measures one PING through a client: the unit the other figures are
// best read in, since the machine's load moves them all.
func BenchmarkRoundTrip(b *testing.B) {
	c := newClient(b, server(b).Addr())
	ctx := context.Background()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockerCycle measures an uncontended Acquire + Release through one backend: two
// script calls. It reports the median and 99th percentile cycle as p50-ns and p99-ns.
// The context cannot end, so the service makes its calls on the caller's goroutine.
func BenchmarkLockerCycle(b *testing.B) {
	srv := server(b)
	cycles(b, context.Background(), newBackend(b, newClient(b, srv.Addr())))
}

// BenchmarkLockerCycleCancellable is BenchmarkLockerCycle with a context that can end, as
// a request's: the service then makes its calls on goroutines of its own, so as to return
// when the context ends whatever the store does.
func BenchmarkLockerCycleCancellable(b *testing.B) {
	srv := server(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cycles(b, ctx, newBackend(b, newClient(b, srv.Addr())))
}

// BenchmarkQuorumCycle is BenchmarkLockerCycle on a Quorum of five instances: each call
// goes to all five in parallel.
func BenchmarkQuorumCycle(b *testing.B) {
	servers := make([]*testserver.Server, 5)
	for i := range servers {
		servers[i] = ownServer(b)
	}
	cycles(b, context.Background(), newQuorum(b, servers))
}

// cycles measures uncontended Acquire + Release cycles of a Locker on be, with ctx.
func cycles(b *testing.B, ctx context.Context, be simba.Backend) {
	l, err := simba.NewLocker(be, uniqueName(b, "m"))
	if err != nil {
		b.Fatal(err)
	}
	var cycles []time.Duration
	defer reportCPU(b, cpuTime(b))
	for b.Loop() {
		began := time.Now()
		lease, err := l.Acquire(ctx)
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
// Acquire in a waiter on another backend instance, with a client of its own, that was
// already waiting (subscribed to its channel). The two take turns. It reports the median
// and 99th percentile as p50-ns and p99-ns.
func BenchmarkHandOver(b *testing.B) {
	srv := server(b)
	admin := newClient(b, srv.Addr())
	ctx := context.Background()
	mutex := uniqueName(b, "m")
	lockers := make([]*simba.Locker, 2)
	for i := range lockers {
		be := newBackend(b, newClient(b, srv.Addr()))
		l, err := simba.NewLocker(be, mutex, simba.WithContenderID(fmt.Sprintf("c%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		lockers[i] = l
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
		inbox := "simba:{" + mutex + "}:" + waiter.ContenderID()
		for {
			n, err := admin.PubSubNumSub(ctx, inbox).Result()
			if err != nil {
				b.Fatal(err)
			}
			if n[inbox] > 0 {
				break
			}
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
	_ = held.Release(ctx)
	latency.Report(b, latencies)
}

// BenchmarkEightContenders runs eight goroutines, each with a Locker on a backend and a
// client of its own, taking turns on one mutex with empty critical sections: hand-overs
// under contention, one at a time. It reports critical sections per second; each op is
// one critical section.
func BenchmarkEightContenders(b *testing.B) {
	srv := server(b)
	mutex := uniqueName(b, "m")
	lockers := make([]*simba.Locker, eight)
	for i := range lockers {
		be := newBackend(b, newClient(b, srv.Addr()))
		l, err := simba.NewLocker(be, mutex, simba.WithContenderID(fmt.Sprintf("c%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		lockers[i] = l
	}
	admin := newClient(b, srv.Addr())
	before, cpuBefore, usecBefore := commandStats(b, admin), serverCPU(b, admin), scriptUsec(b, admin)
	contended(b, func(ctx context.Context, i int) (*simba.Lease, error) { return lockers[i].Acquire(ctx) })
	b.ReportMetric(float64(serverCPU(b, admin)-cpuBefore)/float64(b.N)/1e3, "srv-µs/section")
	after := commandStats(b, admin)
	b.ReportMetric(float64(scriptUsec(b, admin)-usecBefore)/float64(scripts(after)-scripts(before)), "script-µs/call")
	reportCommands(b, before, after)
}

// scriptUsec returns the time the server has spent in scripts so far, by EVALSHA, EVAL or
// FCALL, their inner commands included (INFO commandstats, µs).
func scriptUsec(t testing.TB, admin *goredis.Client) int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval" && name != "cmdstat_fcall") {
			continue
		}
		_, usec, _ := strings.Cut(rest, ",usec=")
		usec, _, _ = strings.Cut(usec, ",")
		n, err := strconv.ParseInt(usec, 10, 64)
		require.NoError(t, err)
		total += n
	}
	return total
}

// serverCPU returns the CPU time the server's main thread has used so far (INFO cpu:
// user and system), which runs every command and script; unlike commandstats' usec, it
// does not count a script's inner commands twice.
func serverCPU(t testing.TB, admin *goredis.Client) time.Duration {
	t.Helper()
	info, err := admin.Info(context.Background(), "cpu").Result()
	require.NoError(t, err)
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user_main_thread" || name == "used_cpu_sys_main_thread") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// reportCommands reports the server's commands per critical section (b.N sections) from
// two commandStats snapshots, and logs them by name.
func reportCommands(b *testing.B, before, after map[string]int64) {
	per, by := commandsPer(before, after, b.N)
	b.ReportMetric(per, "cmds/section")
	b.Logf("commands per section: %s", by)
}

// BenchmarkMutexesEightGoroutines is BenchmarkEightContenders for eight goroutines of one
// process sharing one contender through simba.Mutexes: they hand the mutex over in the
// local queue, and it goes back to the store only when nobody waits locally or another
// process waits.
func BenchmarkMutexesEightGoroutines(b *testing.B) {
	srv := server(b)
	m, err := simba.NewMutexes(newBackend(b, newClient(b, srv.Addr())))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	mutex := uniqueName(b, "m")
	contended(b, func(ctx context.Context, _ int) (*simba.Lease, error) { return m.Acquire(ctx, mutex) })
}

const eight = 8

// contended runs eight goroutines that take turns on one mutex through acquire, checks
// that no two hold it at once, and reports critical sections per second.
func contended(b *testing.B, acquire func(ctx context.Context, worker int) (*simba.Lease, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		left    atomic.Int64
		holders atomic.Int32
		wg      sync.WaitGroup
		errs    = make(chan error, eight)
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	defer reportCPU(b, cpuTime(b))
	began := time.Now()
	for i := range eight {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				lease, err := acquire(ctx, i)
				if err != nil {
					errs <- err
					return
				}
				if holders.Add(1) != 1 {
					errs <- fmt.Errorf("two holders at once")
				}
				holders.Add(-1)
				if err := lease.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sections/s")
}

// cpuTime returns the CPU time this process (the clients, not the servers it started) has
// used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// reportCPU reports the client CPU time per op since began (a cpuTime) as cpu-ns/op: the
// figure a loaded machine moves least.
func reportCPU(b *testing.B, began time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-began)/float64(b.N), "cpu-ns/op")
}
