package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	costLibs   = flag.String("cost.libs", "", "Redis library ids whose contended cost TestRedisCost measures (comma-separated); empty: the test is skipped")
	costRounds = flag.Int("cost.rounds", 3, "rounds of TestRedisCost: each measures every library once, in turn")
	costWindow = flag.Duration("cost.window", 10*time.Second, "how long each contended measurement of TestRedisCost counts")
)

// TestRedisCost measures what a contended critical section costs the Redis server, for
// the libraries of -cost.libs, 8 clients on one mutex, on one redis-server this test
// starts: sections per second, fairness, commands per section (the contended figure's
// count), the server's CPU time per section (the contended figure's, INFO cpu) and the
// time spent in scripts (INFO commandstats, EVALSHA, EVAL and FCALL, around the whole
// measurement, client set-up included). The libraries take turns, -cost.rounds times, so
// that the machine's load falls on all of them alike; compare within a round.
//
//	go test -run TestRedisCost -v -cost.libs simba-redis,reference-redis,reference-redis-jvm,redislock-tuned
func TestRedisCost(t *testing.T) {
	if *costLibs == "" {
		t.Skip("no -cost.libs")
	}
	var libs []library
	for _, id := range strings.Split(*costLibs, ",") {
		l, err := libraryByID(strings.TrimSpace(id))
		if err != nil || l.store != storeRedis {
			t.Fatalf("%q is not a Redis library", id)
		}
		libs = append(libs, l)
	}
	ctx := t.Context()
	need := map[string]bool{storeRedis: true}
	srv, err := startServers(ctx, need, endpoints{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	e, err := newEnv(srv.endpoints, need)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	for round := 1; round <= *costRounds; round++ {
		var b strings.Builder
		fmt.Fprintf(&b, "round %d (load %s)\n%-18s %10s %9s %14s %14s %17s\n", round, loadAverage(), "library", "sections/s", "fairness", "cmds/section", "cpu µs/section", "script µs/section")
		for _, l := range libs {
			script0 := scriptTime(ctx, t, e)
			r, err := measureContended(ctx, e, l, 8, 0, *costWindow)
			if err != nil {
				t.Fatalf("%s: %v", l.id, err)
			}
			script := scriptTime(ctx, t, e) - script0
			n := float64(max(r.Sections, 1))
			fmt.Fprintf(&b, "%-18s %10.0f %9.2f %14.1f %14.1f %17.1f\n", l.id, r.PerSecond, r.Fairness, r.ServerOpsPerSection,
				r.ServerCPUPerSection, float64(script.Microseconds())/n)
		}
		t.Log(b.String())
	}
}

// scriptTime returns the time the server has spent in scripts so far (EVALSHA, EVAL and
// FCALL, their inner calls included), from INFO commandstats.
func scriptTime(ctx context.Context, t *testing.T, e *env) time.Duration {
	info, err := e.redis.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var usec int64
	for _, name := range []string{"cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall"} {
		stats := infoField(info, name) // calls=...,usec=...,...
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				usec += n
			}
		}
	}
	return time.Duration(usec) * time.Microsecond
}
