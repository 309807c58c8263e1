package zookeeper_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/latency"
)

// BenchmarkLockerCycle measures an uncontended Acquire + Release on one backend: create
// the node, list the children and read the node's stat (together), delete the node. It
// reports the median and 99th percentile of a cycle as p50-ns and p99-ns.
func BenchmarkLockerCycle(b *testing.B) {
	l, err := simba.NewLocker(newBackend(b), mutexName(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var latencies []time.Duration
	for b.Loop() {
		began := time.Now()
		lease, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(began))
	}
	latency.Report(b, latencies)
}

// BenchmarkHandOver measures the time from the holder's Release call to the return of
// Acquire in a waiter on another backend instance (another session) that was already
// waiting: its node made, and its watch on the holder's node, or the queue watch on the
// mutex node, armed. It reports the median and 99th percentile as p50-ns and p99-ns.
func BenchmarkHandOver(b *testing.B) {
	mutex := mutexName(b)
	parent := "/simba/" + mutex
	admin := adminConn(b)
	ctx := context.Background()
	backends := []*testBackend{newBackend(b), newBackend(b)}
	lockers := make([]*simba.Locker, 2)
	for i, be := range backends {
		var err error
		if lockers[i], err = simba.NewLocker(be, mutex, simba.WithContenderID([]string{"a", "b"}[i])); err != nil {
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
		holder, waiter := i%2, (i+1)%2
		i++
		got := make(chan acquired, 1)
		go func() {
			l, err := lockers[waiter].Acquire(ctx)
			got <- acquired{l, time.Now(), err}
		}()
		b.StopTimer()
		node := ""
		for node == "" || nodeOfB(b, admin, parent, lockers[waiter].ContenderID()) == "" {
			node = nodeOfB(b, admin, parent, lockers[holder].ContenderID())
		}
		// The waiter watches the holder's node, or, with the queue watch, the mutex node.
		session := zookeeper.SessionID(backends[waiter].Backend)
		for w := watchedBy(b, session); !slices.Contains(w, node) && !slices.Contains(w, parent); w = watchedBy(b, session) {
		}
		b.StartTimer()
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

// BenchmarkContended measures n Lockers, each on a session of its own, looping acquire
// and release on one mutex, with the queue watch and watched per node, against
// go-zookeeper's Lock recipe: b.N critical sections in all. It reports the client CPU
// of the process (user and system) per section as cpu-ns/section: where hearing every
// change of the queue in every session costs the clients more than watches per node.
func BenchmarkContended(b *testing.B) {
	for _, n := range []int{4, 8, 16} {
		for _, mode := range []string{"queue", "per-node", "zk.Lock"} {
			b.Run(fmt.Sprintf("%s/n=%d", mode, n), func(b *testing.B) {
				sections := contenders(b, n, mode)
				left := atomic.Int64{}
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				b.ResetTimer()
				began := processCPU(b)
				for i := range n {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							if err := sections(i); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(processCPU(b)-began)/float64(b.N), "cpu-ns/section")
			})
		}
	}
}

// contenders returns a function that runs one critical section of contender i of n on
// one mutex, watched as mode says.
func contenders(b *testing.B, n int, mode string) func(i int) error {
	ctx := context.Background()
	mutex := mutexName(b)
	if mode == "zk.Lock" {
		locks := make([]*zk.Lock, n)
		for i := range locks {
			locks[i] = zk.NewLock(adminConn(b), "/reference/"+mutex, zk.WorldACL(zk.PermAll))
		}
		return func(i int) error {
			if err := locks[i].Lock(); err != nil {
				return err
			}
			return locks[i].Unlock()
		}
	}
	var opts []zookeeper.Option
	if mode == "per-node" {
		opts = append(opts, perNode)
	}
	lockers := make([]*simba.Locker, n)
	for i := range lockers {
		var err error
		if lockers[i], err = simba.NewLocker(newBackend(b, opts...), mutex); err != nil {
			b.Fatal(err)
		}
	}
	return func(i int) error {
		lease, err := lockers[i].Acquire(ctx)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
}

// processCPU returns the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReferenceZKLockCycle measures go-zookeeper's own Lock recipe (create a
// protected ephemeral sequential node, list the children; delete) on the same server,
// for comparison with BenchmarkLockerCycle.
func BenchmarkReferenceZKLockCycle(b *testing.B) {
	conn := adminConn(b)
	lock := zk.NewLock(conn, "/reference/"+mutexName(b), zk.WorldACL(zk.PermAll))
	var latencies []time.Duration
	for b.Loop() {
		began := time.Now()
		if err := lock.Lock(); err != nil {
			b.Fatal(err)
		}
		if err := lock.Unlock(); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(began))
	}
	latency.Report(b, latencies)
}

// BenchmarkReferenceZKLockHandOver measures go-zookeeper's Lock recipe handing over
// between two connections, for comparison with BenchmarkHandOver.
func BenchmarkReferenceZKLockHandOver(b *testing.B) {
	path := "/reference/" + mutexName(b)
	conns := []*zk.Conn{adminConn(b), adminConn(b)}
	locks := []*zk.Lock{zk.NewLock(conns[0], path, zk.WorldACL(zk.PermAll)), zk.NewLock(conns[1], path, zk.WorldACL(zk.PermAll))}
	if err := locks[0].Lock(); err != nil {
		b.Fatal(err)
	}
	var latencies []time.Duration
	i := 0
	for b.Loop() {
		holder, waiter := i%2, (i+1)%2
		i++
		got := make(chan time.Time, 1)
		errs := make(chan error, 1)
		go func() {
			if err := locks[waiter].Lock(); err != nil {
				errs <- err
				return
			}
			got <- time.Now()
		}()
		b.StopTimer()
		for {
			kids, _, err := conns[holder].Children(path)
			if err != nil {
				b.Fatal(err)
			}
			if len(kids) == 2 && len(watchedBy(b, conns[waiter].SessionID())) > 0 {
				break
			}
		}
		b.StartTimer()
		began := time.Now()
		if err := locks[holder].Unlock(); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-got:
			latencies = append(latencies, at.Sub(began))
		case err := <-errs:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = locks[i%2].Unlock()
	latency.Report(b, latencies)
}

// BenchmarkHoldCycle measures an uncontended acquisition and release of a semaphore's
// permit (the guard's node, the lease node, the token's write, the two deletes) and of a
// read-write lock's write hold, against a Locker's, on one backend each. It reports the
// median and 99th percentile of a cycle as p50-ns and p99-ns, and the requests it sent.
func BenchmarkHoldCycle(b *testing.B) {
	acquirers := map[string]func(simba.Backend, string) (func(context.Context) (*simba.Lease, error), error){
		"locker": func(be simba.Backend, name string) (func(context.Context) (*simba.Lease, error), error) {
			l, err := simba.NewLocker(be, name)
			return l.Acquire, err
		},
		"permit": func(be simba.Backend, name string) (func(context.Context) (*simba.Lease, error), error) {
			s, err := simba.NewSemaphore(be, name, 3)
			return s.Acquire, err
		},
		"write": func(be simba.Backend, name string) (func(context.Context) (*simba.Lease, error), error) {
			m, err := simba.NewRWMutex(be, name)
			return writeLock(m), err
		},
	}
	for _, kind := range []string{"locker", "permit", "write"} {
		b.Run(kind, func(b *testing.B) {
			var requests atomic.Int64
			be := spied(b, func(op int32, _ string) {
				if op != opSync && op != opPing { // heartbeats
					requests.Add(1)
				}
			})
			acquire, err := acquirers[kind](be, mutexName(b))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var latencies []time.Duration
			requests.Store(0)
			for b.Loop() {
				began := time.Now()
				lease, err := acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(began))
			}
			latency.Report(b, latencies)
			b.ReportMetric(float64(requests.Load())/float64(len(latencies)), "requests/op")
		})
	}
}
