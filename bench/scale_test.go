package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	simbaredis "github.com/simba-go/simba/backend/redis"
)

// TestWholePeriodsIn: a window holds the renewal periods that fit in it, also when the
// period is a ttl's 2/3 that 3 does not divide (6.667s of a 10s ttl).
func TestWholePeriodsIn(t *testing.T) {
	ttl := 10 * time.Second
	for _, c := range []struct {
		window, period time.Duration
		want           int
	}{
		{20 * time.Second, ttl - ttl/3, 3},
		{2 * time.Minute, ttl - ttl/3, 18},
		{2 * time.Minute, ttl - ttl/20, 12},
		{time.Second, ttl - ttl/3, 1}, // at least one
	} {
		if got := wholePeriodsIn(c.window, c.period); got != c.want {
			t.Errorf("wholePeriodsIn(%v, %v) = %d, want %d", c.window, c.period, got, c.want)
		}
	}
}

// TestHeldGoalNamesLateOwners: a held-mutex run whose owners lost their lease counts
// fewer requests than N because the store fell behind, not because renewals were
// batched; the goal's measured cell says so.
func TestHeldGoalNamesLateOwners(t *testing.T) {
	r := &results{Held: []scaleResult{{
		Store: storeSQL, Contenders: 10000, Connections: 10, Late: 6089,
		PerPeriod: map[string]float64{countUpdates: 4028},
	}}}
	gs := r.heldGoals()
	if len(gs) != 1 {
		t.Fatalf("%d goals, want 1", len(gs))
	}
	if !strings.Contains(gs[0].measured, "6089 late") {
		t.Errorf("measured %q does not name the late owners", gs[0].measured)
	}
}

// TestCountingKeepsRenewalBatching: the wrapper that counts a simba client's calls answers
// for a backend that batches renewals and keeps deadlines as the backend does, so that
// the scale figure's owners renew on the renewal grid, and a Locker makes its calls on its
// caller's goroutine, as with an unwrapped backend.
func TestCountingKeepsRenewalBatching(t *testing.T) {
	rc := newRedisClient("127.0.0.1:1") // New does no I/O
	defer rc.Close()
	rb, err := simbaredis.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	var wrapped simba.Backend = &counting{Backend: rb}
	batcher, ok := wrapped.(backend.RenewalBatcher)
	if !ok || !batcher.BatchesRenewals() {
		t.Fatalf("the wrapped Redis backend batches no renewals (backend.RenewalBatcher: %v)", ok)
	}
	keeper, ok := wrapped.(backend.DeadlineKeeper)
	if !ok || !keeper.KeepsDeadlines() {
		t.Fatalf("the wrapped Redis backend keeps no deadlines (backend.DeadlineKeeper: %v)", ok)
	}
}

// TestHeapBaselineHoldsGoroutineDescriptors: n goroutines at once after the scale
// figure's baseline add nothing to the heap it measures, as every owner's renewal at one
// grid instant does; the runtime keeps a goroutine's descriptor for good, so without the
// reservation the figure counted one per owner, or none if an earlier run of the process
// had had as many goroutines at once.
func TestHeapBaselineHoldsGoroutineDescriptors(t *testing.T) {
	const n = 10000
	m0, _ := heapBaseline(n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() { <-gate })
	}
	close(gate)
	wg.Wait()
	m1, _ := heapNow()
	// A descriptor is about 450 bytes; what else the test allocates and keeps is
	// a few bytes per goroutine at most.
	if per := (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / n; per > 100 {
		t.Errorf("%.0f heap bytes per goroutine started after the baseline, want at most 100", per)
	}
}
