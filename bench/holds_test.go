package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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

// TestHoldFiguresOnEtcd runs the holds figure's measurements of simba and of etcd's recipe
// RWMutex on a private etcd member: the holds keep their rules, every client gets its
// turn, and the permit's hand-over sees its waiter waiting.
func TestHoldFiguresOnEtcd(t *testing.T) {
	ctx := context.Background()
	e := serverEnv(t, storeEtcd)
	for _, id := range []string{"simba-etcd-holds", "etcd-recipes-rwmutex"} {
		lib, ok := holdLibByID(id)
		if !ok {
			t.Fatalf("no %s", id)
		}
		for _, rw := range []bool{false, true} {
			if !slices.Contains(lib.modes, modePermit) && !rw {
				continue
			}
			r, err := measureHoldLoop(ctx, e, lib, 8, rw, 300*time.Millisecond, time.Second)
			if err != nil {
				t.Fatalf("%s rw %v: %v", id, rw, err)
			}
			if r.Breaches != 0 || r.Errors != 0 || r.MostInside > holdPermits {
				t.Errorf("%s rw %v: %d breaches, %d errors (%s), %d inside at most", id, rw, r.Breaches, r.Errors, r.FirstErr, r.MostInside)
			}
			for i, n := range r.PerClient {
				if n == 0 {
					t.Errorf("%s rw %v: client %d had no section: %v", id, rw, i, r.PerClient)
				}
			}
		}
	}
	lib, _ := holdLibByID("simba-etcd-holds")
	h, err := measureHoldHandOver(ctx, e, lib, holdPermits, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if h.Samples != 5 {
		t.Errorf("%d hand-overs, want 5", h.Samples)
	}
}

// TestEtcdWaitingForgetsTheLastWait: once armed, the waiting check asks for its keys to
// stand for etcdCatchUp again, although as many keys stood when the last wait was seen:
// after a hand-over the new holder's key and the releaser's next place are as many.
func TestEtcdWaitingForgetsTheLastWait(t *testing.T) {
	ctx := context.Background()
	e := serverEnv(t, storeEtcd)
	dir := e.mutex("ew", "t") + "/"
	for _, k := range []string{"a", "b"} {
		if _, err := e.etcd.Put(ctx, dir+k, ""); err != nil {
			t.Fatal(err)
		}
	}
	arm, check := etcdWaiting(e, dir, 2)
	if err := arm(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 10*time.Second, time.Millisecond, "keys standing", check); err != nil {
		t.Fatal(err)
	}
	if err := arm(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := check(ctx); err != nil || ok {
		t.Errorf("check right after arming: %v, %v; want false: the keys have not stood for %v since", ok, err, etcdCatchUp)
	}
}

// serverEnv starts a private server of store for the test and returns an env on it.
func serverEnv(t *testing.T, store string) *env {
	t.Helper()
	need := map[string]bool{store: true}
	srv, err := startServers(context.Background(), need, endpoints{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	e, err := newEnv(srv.endpoints, need)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}
