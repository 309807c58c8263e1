package simbaprom_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe/simbaprom"
)

// Example wires the Observer into a Scheduler and scrapes the registry's handler.
func Example() {
	reg := prometheus.NewRegistry()
	obs, err := simbaprom.New(reg)
	if err != nil {
		panic(err)
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) // serve it at /metrics
	b, _ := memory.New(memory.NewStore())
	ran := make(chan struct{})
	s, _ := simba.NewScheduler(b, "nightly-report", simba.Schedule{Period: time.Hour},
		func(context.Context, simba.Owner) { close(ran) }, simba.WithObserver(obs))
	_ = s.Start(context.Background())
	<-ran
	_ = s.Close()
	scrape := httptest.NewRecorder()
	metrics.ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(scrape.Body.String(), "\n") {
		if strings.HasPrefix(line, "simba_leader") {
			fmt.Println(line)
		}
	}
	// Output:
	// simba_leader{mutex="nightly-report"} 0
	// simba_leader_tenures_started_total{mutex="nightly-report"} 1
}
