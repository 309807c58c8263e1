package simbaprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe/simbaprom"
)

// Example wires the Observer into a Scheduler.
func Example() {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	if err != nil {
		panic(err)
	}
	b, _ := memory.New(memory.NewStore())
	ran := make(chan struct{})
	s, _ := simba.NewScheduler(b, "nightly-report", simba.Schedule{Period: time.Hour},
		func(context.Context, simba.Owner) { close(ran) }, simba.WithObserver(obs))
	_ = s.Start(context.Background())
	<-ran
	_ = s.Close()
	n, _ := testutil.GatherAndCount(reg, "simba_tenures_started_total", "simba_tenures_ended_total")
	fmt.Println(n)
	// Output: 2
}
