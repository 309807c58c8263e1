package simbagocron_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/simbagocron"
)

// redisServer is the real store of the tests; redisErr is why it is missing.
var (
	redisServer *testserver.Server
	redisErr    error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "simba-gocron-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if redisServer, redisErr = testserver.Redis(dir); redisErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			redisErr = redisServer.Start(ctx)
			cancel()
		}
		code := m.Run()
		if redisErr == nil {
			_ = redisServer.Stop()
		}
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	}())
}

// stores returns, by name, a function that makes a new backend (a process of its own) on
// each store the tests run on: memory and a real Redis. Call it with the (sub)test that
// uses the backend.
func stores() map[string]func(t *testing.T) simba.Backend {
	mem := memory.NewStore()
	return map[string]func(t *testing.T) simba.Backend{
		"memory": func(t *testing.T) simba.Backend {
			b, err := memory.New(mem)
			require.NoError(t, err)
			return b
		},
		"redis": func(t *testing.T) simba.Backend {
			testserver.Need(t, redisErr)
			client := goredis.NewClient(&goredis.Options{Addr: redisServer.Addr()})
			t.Cleanup(func() { _ = client.Close() })
			b, err := redis.New(client)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	}
}

// instance is one process's gocron scheduler with a job that counts its runs.
type instance struct {
	sched gocron.Scheduler
	runs  atomic.Int64
}

func newInstance(t *testing.T, job string, every time.Duration, opts ...gocron.SchedulerOption) *instance {
	t.Helper()
	in := &instance{}
	s, err := gocron.NewScheduler(opts...)
	require.NoError(t, err)
	_, err = s.NewJob(gocron.DurationJob(every), gocron.NewTask(func() { in.runs.Add(1) }), gocron.WithName(job))
	require.NoError(t, err)
	s.Start()
	in.sched = s
	t.Cleanup(func() { _ = s.Shutdown() })
	return in
}

// eventually waits until cond holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		<-tick.C
	}
}

func TestElector(t *testing.T) {
	for name, newBackend := range stores() {
		t.Run(name, func(t *testing.T) {
			mutex := "gocron-elector-" + name
			elector := func(id string) (*simba.Service, *simbagocron.Elector) {
				svc, err := simba.NewService(newBackend(t), simba.ContenderFuncs{MutexName: mutex, ID: id},
					simba.WithTTL(time.Second), simba.WithTransition(500*time.Millisecond))
				require.NoError(t, err)
				t.Cleanup(func() { _ = svc.Close() })
				e, err := simbagocron.NewElector(svc)
				require.NoError(t, err)
				return svc, e
			}
			svcA, ea := elector("a")
			require.NoError(t, svcA.Start(t.Context()))
			eventually(t, "a leads", svcA.IsOwner)
			svcB, eb := elector("b")
			require.NoError(t, svcB.Start(t.Context()))

			a := newInstance(t, "report", 20*time.Millisecond, gocron.WithDistributedElector(ea))
			b := newInstance(t, "report", 20*time.Millisecond, gocron.WithDistributedElector(eb))
			eventually(t, "the leader runs the job", func() bool { return a.runs.Load() >= 3 })
			assert.Zero(t, b.runs.Load(), "the follower runs nothing")
			assert.ErrorIs(t, eb.IsLeader(t.Context()), simbagocron.ErrNotLeader)

			require.NoError(t, svcA.Stop(t.Context())) // hands leadership over
			eventually(t, "the new leader runs the job", func() bool { return b.runs.Load() >= 3 })
			ran := a.runs.Load()
			eventually(t, "b runs on", func() bool { return b.runs.Load() >= 6 })
			assert.Equal(t, ran, a.runs.Load(), "the former leader runs nothing more")
		})
	}
}

func TestLocker(t *testing.T) {
	for name, newBackend := range stores() {
		t.Run(name, func(t *testing.T) {
			var inFlight, most atomic.Int64
			var runs atomic.Int64
			work := func() {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runs.Add(1)
				time.Sleep(5 * time.Millisecond) // the job's work, so that the two instances' runs meet
				inFlight.Add(-1)
			}
			job := "gocron-locker-" + name
			for range 2 {
				// No minimum hold: each run's end frees the mutex, so that the instances' runs meet.
				l, err := simbagocron.NewLocker(newBackend(t), simbagocron.WithMinHold(0))
				require.NoError(t, err)
				s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
				require.NoError(t, err)
				_, err = s.NewJob(gocron.DurationJob(10*time.Millisecond), gocron.NewTask(work), gocron.WithName(job))
				require.NoError(t, err)
				s.Start()
				t.Cleanup(func() {
					_ = s.Shutdown()
					_ = l.Close()
				})
			}
			eventually(t, "runs", func() bool { return runs.Load() >= 10 })
			assert.Equal(t, int64(1), most.Load(), "runs of the job never overlap across the instances")
		})
	}
}

func TestNewElectorInvalid(t *testing.T) {
	_, err := simbagocron.NewElector(nil)
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	b, _ := memory.New(memory.NewStore())
	rs, err := simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: "m"})
	require.NoError(t, err)
	_, err = simbagocron.NewElector(rs)
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
}
