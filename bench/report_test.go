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
