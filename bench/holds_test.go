package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backend/memory"
)

// TestHoldFiguresOnMemory runs the holds figure's measurements on the memory store: the
// permits and the read-write lock keep their rules, and every client gets its turn.
func TestHoldFiguresOnMemory(t *testing.T) {
	ctx := context.Background()
	e := &env{memory: memory.NewStore(), run: "test", names: new(atomic.Int64)}
	lib, ok := holdLibByID("simba-memory-holds")
	if !ok {
		t.Fatal("no simba-memory-holds")
	}
	for _, rw := range []bool{false, true} {
		r, err := measureHoldLoop(ctx, e, lib, 8, rw, 50*time.Millisecond, 300*time.Millisecond)
		if err != nil {
			t.Fatalf("rw %v: %v", rw, err)
		}
		if r.Breaches != 0 || r.Errors != 0 || r.MostInside > holdPermits {
			t.Errorf("rw %v: %d breaches, %d errors (%s), %d inside at most", rw, r.Breaches, r.Errors, r.FirstErr, r.MostInside)
		}
		for i, n := range r.PerClient {
			if n == 0 {
				t.Errorf("rw %v: client %d had no section: %v", rw, i, r.PerClient)
			}
		}
		if rw && (r.Reads == 0 || r.Writes == 0) {
			t.Errorf("reads %d, writes %d", r.Reads, r.Writes)
		}
	}
	h, err := measureHoldHandOver(ctx, e, lib, holdPermits, 2, 20)
	if err != nil {
		t.Fatal(err)
	}
	if h.Samples != 20 {
		t.Errorf("%d hand-overs, want 20", h.Samples)
	}
}

// TestHoldsRunLeavesMutexTables: a run of the holds figure alone rewrites the README's
// holds tables and leaves the mutex figures' section alone; a run without it leaves the
// holds tables alone.
func TestHoldsRunLeavesMutexTables(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	doc := "# x\n" + readmeBegin + "\nmutex tables\n" + readmeEnd + "\n" + holdsBegin + "\nold holds\n" + holdsEnd + "\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	holds := &results{Started: time.Now(), Settings: runSettings{Clients: 8}, Holds: &holdResults{
		Permits: []holdLoopResult{{Store: storeRedis, Library: "simba", ID: "simba-redis-holds", Clients: 8, Permits: 3, Window: time.Second, PerSecond: 1234, PerClient: []int64{1, 2}}},
	}}
	if err := holds.updateReadme(readme, filepath.Join(dir, "results")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(readme)
	if !strings.Contains(string(got), "\nmutex tables\n") {
		t.Errorf("the holds run rewrote the mutex tables:\n%s", got)
	}
	if strings.Contains(string(got), "old holds") || !strings.Contains(string(got), "| 1234 |") {
		t.Errorf("the holds tables were not rewritten:\n%s", got)
	}
	mutexes := &results{Started: time.Now(), Settings: runSettings{Clients: 8}, Uncontended: []cycleResult{{Store: storeRedis, Library: "simba", ID: "simba-redis"}}}
	if err := mutexes.updateReadme(readme, filepath.Join(dir, "results")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(readme)
	if strings.Contains(string(after), "\nmutex tables\n") || !strings.Contains(string(after), "| 1234 |") {
		t.Errorf("a mutex run should rewrite its tables and keep the holds':\n%s", after)
	}
}

// TestHoldsRunLeavesFullResults: a run of the holds figure alone writes its results under
// holds/ of the results directory, not over the full run's results.md, which the README's
// mutex tables link to; the README's holds tables link to it there.
func TestHoldsRunLeavesFullResults(t *testing.T) {
	dir := t.TempDir()
	r := &results{Started: time.Now(), Settings: runSettings{Clients: 8}, Holds: &holdResults{}}
	written, err := r.write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, resultsFile)); !os.IsNotExist(err) {
		t.Errorf("a holds run wrote %s over the full run's (stat: %v); it wrote %v", resultsFile, err, written)
	}
	if _, err := os.Stat(filepath.Join(dir, holdsDir, resultsFile)); err != nil {
		t.Errorf("a holds run's %s: %v", resultsFile, err)
	}
	if md := r.holdsMarkdown("bench/results"); !strings.Contains(md, "(bench/results/"+holdsDir+"/"+resultsFile+")") {
		t.Errorf("the holds tables do not link to %s/%s:\n%s", holdsDir, resultsFile, md)
	}
}
