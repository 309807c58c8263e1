package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The best peer of a goal is a library users would pick instead of simba: the reference
// lock, which only measures a floor, is not one, however fast it is.
func TestBestPeerLeavesTheReferenceOut(t *testing.T) {
	r := &results{Contended: []contendedResult{
		{Store: storeRedis, ID: "simba-redis", Library: "simba", PerSecond: 2000},
		{Store: storeRedis, ID: "redislock-tuned", Library: "redislock (tuned)", PerSecond: 3000},
		{Store: storeRedis, ID: "reference-redis", Library: "reference (not a product)", PerSecond: 4000},
	}}
	if id, _, ok := r.bestPeer(storeRedis); !ok || id != "redislock-tuned" {
		t.Fatalf("best peer %q (%v), want redislock-tuned", id, ok)
	}
}

// TestQuickRunLeavesCommittedResults: a quick run writes its results, plots and raw data
// under quick/ of the results directory, not over the last full run's results.md and
// plots, which the README links to.
func TestQuickRunLeavesCommittedResults(t *testing.T) {
	dir := t.TempDir()
	r := &results{Quick: true, Started: time.Now(), Settings: runSettings{Clients: 8}}
	written, err := r.write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, resultsFile)); !os.IsNotExist(err) {
		t.Errorf("a quick run wrote %s over the full run's (stat: %v); it wrote %v", resultsFile, err, written)
	}
	if _, err := os.Stat(filepath.Join(dir, quickDir, resultsFile)); err != nil {
		t.Errorf("a quick run's %s: %v", resultsFile, err)
	}
}

// The Redis goals compare simba with each reference lock by its id: the JVM-format one,
// listed before the other here, is neither the best peer nor the reference of the
// original rows, and it has a row of its own.
func TestRedisGoalsTellTheReferencesApart(t *testing.T) {
	r := &results{Settings: runSettings{Clients: 8}, Contended: []contendedResult{
		{Store: storeRedis, ID: "simba-redis", PerSecond: 3000, Fairness: 1, ServerOpsPerSection: 18, ServerCPUPerSection: 120},
		{Store: storeRedis, ID: "reference-redis-jvm", PerSecond: 3200, ServerOpsPerSection: 12, ServerCPUPerSection: 100},
		{Store: storeRedis, ID: "reference-redis", PerSecond: 4000, ServerOpsPerSection: 9, ServerCPUPerSection: 60},
		{Store: storeRedis, ID: "redislock-tuned", PerSecond: 2000},
	}}
	if ref, ok := r.reference(); !ok || ref.ID != "reference-redis" {
		t.Errorf("the reference lock is %q (%v), want reference-redis", ref.ID, ok)
	}
	if id, _, ok := r.bestPeer(storeRedis); !ok || id != "redislock-tuned" {
		t.Errorf("best peer %q (%v), want redislock-tuned", id, ok)
	}
	g := r.jvmFloorGoal()
	if want := "simba 3000/s, 18.0 commands, 120.0 µs per section; JVM-format reference 3200/s, 12.0 commands, 100.0 µs: 0.94 ×, CPU 1.20 ×"; g.measured != want || g.met != 1 {
		t.Errorf("JVM-format row: %q, met %d; want %q, met 1", g.measured, g.met, want)
	}
}
