package simba_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
)

// Contender callbacks: a service contends for a mutex and calls OnAcquired and OnReleased
// as ownership comes and goes. Two backends on one memory store stand for two processes.
func Example() {
	ctx := context.Background()
	store := memory.NewStore()
	newContender := func(id string, acquired chan<- string) *simba.Service {
		b, _ := memory.New(store)
		svc, err := simba.NewService(b, simba.ContenderFuncs{
			MutexName: "billing-leader",
			ID:        id,
			Acquired: func(ctx context.Context, s simba.State) {
				fmt.Printf("%s leads (token %d)\n", id, s.After.Token)
				acquired <- id
			},
			Released: func(s simba.State) { fmt.Printf("%s no longer leads\n", id) },
		})
		if err != nil {
			panic(err)
		}
		return svc
	}
	acquired := make(chan string, 2)
	a := newContender("instance-a", acquired)
	b := newContender("instance-b", acquired)
	_ = a.Start(ctx)
	<-acquired
	_ = b.Start(ctx) // b waits: a leads
	_ = a.Stop(ctx)  // a releases; b takes over at once
	<-acquired
	_ = b.Stop(ctx)
	// Output:
	// instance-a leads (token 1)
	// instance-a no longer leads
	// instance-b leads (token 2)
	// instance-b no longer leads
}

// Yield hands leadership over without stopping: the leader steps down, the next waiter
// leads, and the one that yielded waits its turn again (for a rolling deploy, say).
func ExampleService_Yield() {
	ctx := context.Background()
	store := memory.NewStore()
	acquired := make(chan string, 3)
	newContender := func(id string) *simba.Service {
		b, _ := memory.New(store)
		svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "billing-leader", ID: id,
			Acquired: func(_ context.Context, s simba.State) {
				fmt.Printf("%s leads (token %d)\n", id, s.After.Token)
				acquired <- id
			},
			Released: func(simba.State) { fmt.Printf("%s no longer leads\n", id) },
		})
		if err != nil {
			panic(err)
		}
		return svc
	}
	a, b := newContender("instance-a"), newContender("instance-b")
	_ = a.Start(ctx)
	<-acquired
	_ = b.Start(ctx)
	if err := a.Yield(ctx); err != nil {
		panic(err)
	}
	<-acquired // b leads; a contends on
	_ = b.Stop(ctx)
	<-acquired
	_ = a.Stop(ctx)
	// Output:
	// instance-a leads (token 1)
	// instance-a no longer leads
	// instance-b leads (token 2)
	// instance-b no longer leads
	// instance-a leads (token 3)
	// instance-a no longer leads
}

// WithPreference moves leadership to a contender whose owner value it accepts: here, to
// the instance of the new release as soon as it waits, at the old leader's next renewal.
// Service.HandOff hands leadership to a waiting contender named by its ID.
func ExampleWithPreference() {
	ctx := context.Background()
	store := memory.NewStore()
	leads := make(chan simba.Owner, 2)
	onNewRelease := simba.WithPreference(func(value string) bool { return value == "v2" })
	for _, version := range []string{"v1", "v2"} {
		b, _ := memory.New(store)
		svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "billing-leader", ID: "instance-" + version,
			Acquired: func(_ context.Context, s simba.State) { leads <- s.After },
		}, simba.WithOwnerValue(version), onNewRelease, simba.WithTTL(time.Second))
		if err != nil {
			panic(err)
		}
		if err := svc.Start(ctx); err != nil {
			panic(err)
		}
		defer svc.Stop(ctx)
		o := <-leads
		fmt.Printf("%s leads, running %s (token %d)\n", o.ID, o.Value, o.Token)
	}
	// Output:
	// instance-v1 leads, running v1 (token 1)
	// instance-v2 leads, running v2 (token 2)
}

// A Locker protects a critical section: Acquire blocks until this contender owns the
// mutex, and the lease's token fences the protected resource.
func ExampleNewLocker() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	locker, err := simba.NewLocker(b, "nightly-export")
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	lease, err := locker.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding with token", lease.Token())
	// Work that must stop when ownership is lost uses lease.Context().
	_ = lease.Release(ctx)
	fmt.Println("released")
	// Output:
	// holding with token 1
	// released
}

// Acquire gives up when its context ends; the error says both that the mutex was not
// acquired and why.
func ExampleLocker_Acquire() {
	ctx := context.Background()
	store := memory.NewStore()
	b1, _ := memory.New(store)
	b2, _ := memory.New(store)
	holder, _ := simba.NewLocker(b1, "invoice-42")
	defer holder.Close()
	waiter, _ := simba.NewLocker(b2, "invoice-42")
	defer waiter.Close()

	lease, _ := holder.Acquire(ctx)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := waiter.Acquire(wctx)
	fmt.Println("not acquired:", errors.Is(err, simba.ErrNotAcquired))
	fmt.Println("deadline exceeded:", errors.Is(err, context.DeadlineExceeded))

	_ = lease.Release(ctx)
	next, err := waiter.Acquire(ctx)
	fmt.Println("acquired after release:", err == nil, "token", next.Token())
	_ = next.Release(ctx)
	// Output:
	// not acquired: true
	// deadline exceeded: true
	// acquired after release: true token 2
}

// TryAcquire makes a single attempt.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	store := memory.NewStore()
	b1, _ := memory.New(store)
	b2, _ := memory.New(store)
	first, _ := simba.NewLocker(b1, "cache-warmup", simba.WithContenderID("worker-1"))
	defer first.Close()
	second, _ := simba.NewLocker(b2, "cache-warmup", simba.WithContenderID("worker-2"))
	defer second.Close()
	lease, _ := first.TryAcquire(ctx)
	_, err := second.TryAcquire(ctx)
	fmt.Println(err)
	fmt.Println("held, not a store error:", errors.Is(err, simba.ErrHeld))
	_ = lease.Release(ctx)
	// Output:
	// simba: not acquired: held by another contender: mutex "cache-warmup" is owned by "worker-1"
	// held, not a store error: true
}

// A Scheduler runs work only while it leads; the work's context ends when leadership
// does.
func ExampleNewScheduler() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	var runs atomic.Int32
	done := make(chan struct{})
	sched, err := simba.NewScheduler(b, "cleanup", simba.Schedule{Period: 10 * time.Millisecond},
		func(ctx context.Context, _ simba.Owner) {
			switch n := runs.Add(1); {
			case n <= 3:
				fmt.Println("cleanup run", n)
			case n == 4:
				close(done)
			}
		})
	if err != nil {
		panic(err)
	}
	_ = sched.Start(ctx)
	<-done
	_ = sched.Stop(ctx) // waits for a running run to return
	// Output:
	// cleanup run 1
	// cleanup run 2
	// cleanup run 3
}

// With FixedDelay, the period counts from the end of one run to the start of the next.
func ExampleScheduler_fixedDelay() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	var last time.Time
	done := make(chan struct{})
	runs := 0
	sched, _ := simba.NewScheduler(b, "compaction",
		simba.Schedule{Period: 20 * time.Millisecond, FixedDelay: true, InitialDelay: 5 * time.Millisecond},
		func(ctx context.Context, _ simba.Owner) {
			if !last.IsZero() {
				fmt.Println("gap at least one period:", time.Since(last) >= 20*time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond) // the run itself
			last = time.Now()
			if runs++; runs == 3 {
				close(done)
			}
		})
	_ = sched.Start(ctx)
	<-done
	_ = sched.Stop(ctx)
	// Output:
	// gap at least one period: true
	// gap at least one period: true
}

// Embedding *simba.Scheduler gives a type of your own the scheduler's lifecycle.
func ExampleScheduler_embedding() {
	type ReportJob struct {
		*simba.Scheduler
		sent atomic.Int32
	}
	b, _ := memory.New(memory.NewStore())
	job := &ReportJob{}
	ran := make(chan struct{})
	s, err := simba.NewScheduler(b, "daily-report", simba.Schedule{Period: 24 * time.Hour},
		func(ctx context.Context, _ simba.Owner) {
			job.sent.Add(1)
			close(ran)
		})
	if err != nil {
		panic(err)
	}
	job.Scheduler = s
	_ = job.Start(context.Background())
	<-ran
	_ = job.Close()
	fmt.Println("reports sent:", job.sent.Load(), "status:", job.Status())
	// Output:
	// reports sent: 1 status: INITIAL
}

// A retriever observes who owns a mutex without contending.
func ExampleNewRetrievalService() {
	ctx := context.Background()
	store := memory.NewStore()
	rb, _ := memory.New(store)
	seen := make(chan simba.State, 4)
	watcher, _ := simba.NewRetrievalService(rb, simba.RetrieverFunc{
		MutexName: "primary",
		Notify:    func(s simba.State) { seen <- s },
	})
	_ = watcher.Start(ctx)

	cb, _ := memory.New(store)
	locker, _ := simba.NewLocker(cb, "primary", simba.WithContenderID("db-1"))
	lease, _ := locker.Acquire(ctx)
	fmt.Println("owner:", (<-seen).After.ID)
	_ = lease.Release(ctx)
	fmt.Println("owner after release:", (<-seen).After)
	_ = watcher.Stop(ctx)
	// Output:
	// owner: db-1
	// owner after release: no owner
}

// Mutexes lets the goroutines of one process share a mutex through one contender: they
// wait in a local FIFO queue, and a hand-over between them costs no store round trip.
// Holds of a named holder are reentrant.
func ExampleNewMutexes() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	mutexes, err := simba.NewMutexes(b)
	if err != nil {
		panic(err)
	}
	defer mutexes.Close()

	outer, _ := mutexes.AcquireAs(ctx, "account-7", "transfer-1")
	inner, _ := mutexes.AcquireAs(ctx, "account-7", "transfer-1") // reentrant
	fmt.Println("same tenure:", outer.Token() == inner.Token())
	_ = inner.Release(ctx)
	_ = outer.Release(ctx) // the last hold: the mutex goes to the next holder

	var wg sync.WaitGroup
	balance := 0
	for range 4 {
		wg.Go(func() {
			lease, err := mutexes.Acquire(ctx, "account-7")
			if err != nil {
				panic(err)
			}
			balance += 10
			_ = lease.Release(ctx)
		})
	}
	wg.Wait()
	fmt.Println("balance:", balance, "entries left:", mutexes.Len())
	// Output:
	// same tenure: true
	// balance: 40 entries left: 0
}

// ExampleHealthHandler serves a readiness probe for a leader-elected service.
func ExampleHealthHandler() {
	b, _ := memory.New(memory.NewStore())
	acquired := make(chan struct{})
	svc, _ := simba.NewService(b, simba.ContenderFuncs{MutexName: "ingest", ID: "pod-a",
		Acquired: func(context.Context, simba.State) { close(acquired) }})
	_ = svc.Start(context.Background())
	defer svc.Close()
	<-acquired

	mux := http.NewServeMux()
	mux.Handle("/readyz", simba.HealthHandler(svc))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?leading", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 [{"mutex":"ingest","contender":"pod-a","leading":true,"owner":"pod-a","status":"RUNNING","healthy":true}]
}

// ExampleObserve follows the leader of a mutex as a channel.
func ExampleObserve() {
	b, _ := memory.New(memory.NewStore())
	l, _ := simba.NewLocker(b, "leader", simba.WithContenderID("pod-a"))
	defer l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	leaders, _ := simba.Observe(ctx, b, "leader")
	lease, _ := l.Acquire(ctx)
	fmt.Println("leader:", (<-leaders).ID)
	_ = lease.Release(ctx)
	fmt.Println("leader:", (<-leaders).ID == "")
	cancel()
	for range leaders {
	}
	// Output:
	// leader: pod-a
	// leader: true
}

// ExampleWithOwnerValue: the leader publishes its address with its tenure; a follower
// that looks the leader up learns where to send its requests.
func ExampleWithOwnerValue() {
	b, _ := memory.New(memory.NewStore())
	ctx := context.Background()
	l, _ := simba.NewLocker(b, "leader", simba.WithContenderID("pod-a"), simba.WithOwnerValue("10.0.0.7:8080"))
	defer l.Close()
	lease, _ := l.Acquire(ctx)

	leader, _ := simba.Lookup(ctx, b, "leader")
	fmt.Println(leader.ID, "at", leader.Value)
	_ = lease.Release(ctx)
	// Output: pod-a at 10.0.0.7:8080
}

// ExampleWithObserver counts tenures with a plain function.
func ExampleWithObserver() {
	b, _ := memory.New(memory.NewStore())
	var mu sync.Mutex
	began := 0
	l, _ := simba.NewLocker(b, "report", simba.WithObserver(observe.Funcs{
		TenureBegan: func(observe.Tenure) { mu.Lock(); began++; mu.Unlock() },
	}))
	defer l.Close()
	ctx := context.Background()
	for range 3 {
		lease, _ := l.Acquire(ctx)
		_ = lease.Release(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("tenures:", began)
	// Output: tenures: 3
}

// ExampleLookup reads who owns a mutex without running a service.
func ExampleLookup() {
	store := memory.NewStore()
	b, _ := memory.New(store)
	ctx := context.Background()
	l, _ := simba.NewLocker(b, "nightly-report", simba.WithContenderID("worker-1"))
	defer l.Close()
	lease, _ := l.Acquire(ctx)

	o, err := simba.Lookup(ctx, b, "nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.ID, o.Token == lease.Token())
	_ = lease.Release(ctx)
	o, _ = simba.Lookup(ctx, b, "nightly-report")
	fmt.Println(o.IsZero())
	// Output:
	// worker-1 true
	// true
}

// A Semaphore lets a fixed number of holders in at once, across processes: here two
// permits, so a third acquisition is told the semaphore is held until a permit comes back.
func ExampleNewSemaphore() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	sem, err := simba.NewSemaphore(b, "report-workers", 2)
	if err != nil {
		panic(err)
	}
	defer sem.Close()
	first, _ := sem.Acquire(ctx)
	second, _ := sem.Acquire(ctx)
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third while two hold:", errors.Is(err, simba.ErrHeld))
	_ = first.Release(ctx)
	third, err := sem.TryAcquire(ctx)
	fmt.Println("third after a release:", err == nil, third.Token() > second.Token())
	_ = second.Release(ctx)
	_ = third.Release(ctx)
	// Output:
	// third while two hold: true
	// third after a release: true true
}

// An RWMutex lets readers in together and a writer in alone; a writer that has written
// downgrades to a reader with no other writer in between.
func ExampleNewRWMutex() {
	ctx := context.Background()
	b, _ := memory.New(memory.NewStore())
	rw, err := simba.NewRWMutex(b, "catalog")
	if err != nil {
		panic(err)
	}
	defer rw.Close()
	w, err := rw.Lock(ctx)
	if err != nil {
		panic(err)
	}
	// ... write, fenced with w.Token() ...
	r, err := w.Downgrade(ctx)
	if err != nil {
		panic(err)
	}
	other, err := rw.RLock(ctx) // readers share the lock
	fmt.Println("a second reader:", err == nil)
	_, err = rw.TryLock(ctx)
	fmt.Println("a writer while two read:", errors.Is(err, simba.ErrHeld))
	fmt.Println("tokens grow:", w.Token() < r.Token() && r.Token() < other.Token())
	_ = r.Release(ctx)
	_ = other.Release(ctx)
	// Output:
	// a second reader: true
	// a writer while two read: true
	// tokens grow: true
}
