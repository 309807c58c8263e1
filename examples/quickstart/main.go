// Command quickstart shows simba's three ways of use on the embedded memory backend, with no
// server: contender callbacks electing a leader, a Locker protecting a counter, and a
// Scheduler running work only on the leader.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

func main() {
	// One store; a backend per "process". On Redis, MariaDB or ZooKeeper each process
	// would create its backend from its own client instead.
	store := memory.NewStore()
	ctx := context.Background()
	election(ctx, store)
	counter(ctx, store)
	schedule(ctx, store)
}

// election: three contenders for one mutex; the leader stops and another takes over.
func election(ctx context.Context, store *memory.Store) {
	fmt.Println("== contender callbacks: leader election")
	type event struct {
		id  string
		at  time.Time
		tok uint64
	}
	acquired := make(chan event, 3)
	services := map[string]*simba.Service{}
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		b, err := memory.New(store)
		if err != nil {
			log.Fatal(err)
		}
		svc, err := simba.NewService(b, simba.ContenderFuncs{
			MutexName: "orders-leader",
			ID:        id,
			Acquired: func(ctx context.Context, s simba.State) {
				acquired <- event{id, time.Now(), s.After.Token}
			},
			Released: func(s simba.State) { fmt.Printf("  %s stepped down\n", id) },
		}, simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
		if err != nil {
			log.Fatal(err)
		}
		if err := svc.Start(ctx); err != nil {
			log.Fatal(err)
		}
		services[id] = svc
	}
	leader := <-acquired
	fmt.Printf("  %s leads (fencing token %d)\n", leader.id, leader.tok)

	stopped := time.Now()
	if err := services[leader.id].Stop(ctx); err != nil {
		log.Fatal(err)
	}
	next := <-acquired
	fmt.Printf("  %s took over after %v (fencing token %d)\n", next.id, next.at.Sub(stopped).Round(time.Microsecond), next.tok)
	for _, svc := range services {
		if err := svc.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// counter: eight goroutines, each with its own Locker (its own contender), increment a
// shared counter inside the lock.
func counter(ctx context.Context, store *memory.Store) {
	fmt.Println("== Locker: a counter protected across goroutines")
	const workers, increments = 8, 50
	counter := 0
	var wg sync.WaitGroup
	for i := range workers {
		b, err := memory.New(store)
		if err != nil {
			log.Fatal(err)
		}
		locker, err := simba.NewLocker(b, "counter", simba.WithContenderID(fmt.Sprintf("worker-%d", i)))
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			for range increments {
				lease, err := locker.Acquire(ctx)
				if err != nil {
					log.Fatal(err)
				}
				v := counter // read, modify, write: safe only under the lock
				time.Sleep(10 * time.Microsecond)
				counter = v + 1
				if err := lease.Release(ctx); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("  counter = %d (want %d)\n", counter, workers*increments)
}

// schedule: two schedulers for one job; only the leader ticks; when it stops, the other
// takes the schedule over.
func schedule(ctx context.Context, store *memory.Store) {
	fmt.Println("== Scheduler: leader-only periodic work")
	ticks := make(chan string) // unbuffered: a tick is printed while its scheduler leads
	schedulers := map[string]*simba.Scheduler{}
	for _, id := range []string{"node-1", "node-2"} {
		b, err := memory.New(store)
		if err != nil {
			log.Fatal(err)
		}
		s, err := simba.NewScheduler(b, "report-job", simba.Schedule{Period: 200 * time.Millisecond},
			func(ctx context.Context, _ simba.Owner) {
				select {
				case ticks <- id:
				case <-ctx.Done():
				}
			}, simba.WithContenderID(id), simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
		if err != nil {
			log.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			log.Fatal(err)
		}
		schedulers[id] = s
	}
	first := <-ticks
	fmt.Printf("  tick on %s\n", first)
	for range 2 {
		fmt.Printf("  tick on %s\n", <-ticks)
	}
	if err := schedulers[first].Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("  %s stopped\n", first)
	for range 3 {
		fmt.Printf("  tick on %s\n", <-ticks)
	}
	for _, s := range schedulers {
		if err := s.Close(); err != nil {
			log.Fatal(err)
		}
	}
}
