package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	costLibs   = flag.String("cost.libs", "", "Redis library ids whose contended cost TestRedisCost measures (comma-separated); empty: the test is skipped")
	costRounds = flag.Int("cost.rounds", 3, "rounds of TestRedisCost: each measures every library once, in turn")
	costWindow = flag.Duration("cost.window", 10*time.Second, "how long each contended measurement of TestRedisCost counts")
)

// TestRedisCost measures what a critical section costs on Redis, for the libraries of
// -cost.libs, on one redis-server this test starts. Contended (8 clients on one mutex):
// sections per second, fairness, commands per section (the contended figure's count), the
// server's CPU time per section (the contended figure's, INFO cpu), the time spent in
// scripts per section (INFO commandstats: EVALSHA, EVAL and FCALL, their inner commands
// included) and the clients' CPU time per section (this process's; the server runs
// apart). Hand-over (two clients, the holder releasing at a random moment within the
// hand-over figure's hold, as there): the hand-over's and the holder's release call's
// p50, and the time a script call took in the server, whose caches a pause leaves cold.
// The libraries take turns, -cost.rounds times, so that the machine's load falls on all
// of them alike; compare within a round.
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
		fmt.Fprintf(&b, "round %d (load %s)\n%-20s %10s %8s %12s %12s %12s %12s %12s %12s %12s\n", round, loadAverage(),
			"library", "sections/s", "fairness", "cmds/sect", "cpu µs/sect", "script µs", "client µs", "hand-over", "release", "µs/script")
		for _, l := range libs {
			script0, client0 := scriptTime(ctx, t, e), processCPU(t)
			r, err := measureContended(ctx, e, l, 8, 0, *costWindow)
			if err != nil {
				t.Fatalf("%s: %v", l.id, err)
			}
			script, client := scriptTime(ctx, t, e)-script0, processCPU(t)-client0
			n := float64(max(r.Sections, 1))
			h, err := measureRedisHandOver(ctx, t, e, l, 100)
			if err != nil {
				t.Fatalf("%s: %v", l.id, err)
			}
			fmt.Fprintf(&b, "%-20s %10.0f %8.2f %12.1f %12.1f %12.1f %12.1f %12v %12v %12.1f\n", l.id, r.PerSecond, r.Fairness, r.ServerOpsPerSection,
				r.ServerCPUPerSection, float64(script.Microseconds())/n, float64(client.Microseconds())/n, h.p50, h.release, h.perScript)
		}
		t.Log(b.String())
	}
}

// redisHandOverCost is what measureRedisHandOver found.
type redisHandOverCost struct {
	p50, release time.Duration // the hand-over's and the holder's release call's
	perScript    float64       // µs of the server's per script call
}

// measureRedisHandOver makes n hand-overs between two clients of lib, as the hand-over
// figure does, and times the holder's release calls and the server's script calls (the
// waiter's acquisitions' and the holder's retakes' among them).
func measureRedisHandOver(ctx context.Context, t *testing.T, e *env, lib library, n int) (redisHandOverCost, error) {
	h, err := newHandOver(ctx, e, lib)
	if err != nil {
		return redisHandOverCost{}, err
	}
	defer h.close()
	calls0, usec0 := scriptCalls(ctx, t, e)
	var took, releases []time.Duration
	for range n {
		// The holder takes the mutex again now if it is due to, so that the release
		// timed below is the hand-over's, not the retake's.
		if err := h.retake(ctx); err != nil {
			return redisHandOverCost{}, err
		}
		var release time.Duration
		held := h.release
		h.release = func(ctx context.Context) error {
			began := time.Now()
			defer func() { release = time.Since(began) }()
			return held(ctx)
		}
		d, err := h.step(ctx)
		if err != nil {
			return redisHandOverCost{}, err
		}
		took, releases = append(took, d), append(releases, release)
	}
	calls1, usec1 := scriptCalls(ctx, t, e)
	slices.Sort(took)
	slices.Sort(releases)
	return redisHandOverCost{p50: took[n/2], release: releases[n/2],
		perScript: float64(usec1-usec0) / float64(max(calls1-calls0, 1))}, nil
}

// processCPU returns the CPU time this process (the clients; the server runs apart) has
// used so far, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptTime returns the time the server has spent in scripts so far (EVALSHA, EVAL and
// FCALL, their inner calls included), from INFO commandstats.
func scriptTime(ctx context.Context, t *testing.T, e *env) time.Duration {
	_, usec := scriptCalls(ctx, t, e)
	return time.Duration(usec) * time.Microsecond
}

// scriptCalls returns the script calls (EVALSHA, EVAL and FCALL) the server has run so
// far, and the µs it spent in them, their inner calls included (INFO commandstats).
func scriptCalls(ctx context.Context, t *testing.T, e *env) (calls, usec int64) {
	info, err := e.redis.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall"} {
		stats := infoField(info, name) // calls=...,usec=...,...
		for _, f := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k != "calls" && k != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if k == "calls" {
				calls += n
			} else {
				usec += n
			}
		}
	}
	return calls, usec
}
