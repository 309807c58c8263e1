package simbagocron_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/simbagocron"
)

// Example runs a gocron job on the leader only.
func Example() {
	b, _ := memory.New(memory.NewStore())
	leading := make(chan struct{})
	svc, _ := simba.NewService(b, simba.ContenderFuncs{MutexName: "nightly-report", ID: simba.HostContenderID(),
		Acquired: func(context.Context, simba.State) { close(leading) }})
	_ = svc.Start(context.Background())
	defer svc.Close()
	elector, _ := simbagocron.NewElector(svc)
	<-leading // only so that the example shows a run: a follower's scheduler runs nothing

	ran := make(chan struct{}, 1)
	s, _ := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	_, _ = s.NewJob(gocron.DurationJob(time.Millisecond), gocron.NewTask(func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	}), gocron.WithName("nightly-report"))
	s.Start()
	<-ran
	_ = s.Shutdown()
	fmt.Println("ran on the leader")
	// Output: ran on the leader
}

// ExampleNewLocker runs a job every minute on whichever instance takes the slot first.
func ExampleNewLocker() {
	b, _ := memory.New(memory.NewStore()) // each instance: a backend on the store they share
	locker, _ := simbagocron.NewLocker(b,
		simbagocron.WithMinHold(10*time.Second), // a slot stays taken 10s: longer than clocks differ, shorter than a minute
		simbagocron.WithLogger(slog.Default()))
	s, _ := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	_, _ = s.NewJob(gocron.CronJob("* * * * *", false), gocron.NewTask(func() {
		fmt.Println("report")
	}), gocron.WithName("report"))
	s.Start()

	// when the process ends:
	_ = s.Shutdown()
	_ = locker.Close()
}

// Example_cronTimetable runs simba's own Scheduler on a cron schedule: a robfig/cron
// schedule is a simba.Timetable, so runs start at the same instants whichever instance
// leads, and a new leader does not run again an instant its predecessor ran.
func Example_cronTimetable() {
	b, _ := memory.New(memory.NewStore()) // each instance: a backend on the store they share
	quarterly, err := cron.ParseStandard("*/15 * * * *")
	if err != nil {
		panic(err) // a malformed spec: the parser's error says where
	}
	s, _ := simba.NewScheduler(b, "billing-sync", simba.Schedule{Timetable: quarterly},
		func(ctx context.Context, leader simba.Owner) {
			fmt.Println("sync, fenced by token", leader.Token)
		})
	_ = s.Start(context.Background())

	// when the process ends:
	_ = s.Close()
}
