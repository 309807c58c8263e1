package tck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/goroutine"
	"go.uber.org/goleak"
)

// checkLeaks: after a warm-up round, rounds of every way of use leave no goroutine behind.
// The backends are made before the baseline: they live until the test ends.
func checkLeaks(e *env) error {
	backends := [4]*probe{e.backend(), e.backend(), e.backend(), e.backend()}
	if err := useEveryWay(e, backends); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	// A backend may start goroutines of its own, kept until it is closed, the first time
	// it needs them (a Redis backend's subscription connection, when one of its
	// contentions first waits or renews), which timing decides: one round may need them
	// and the warm-up not. What a lifecycle leaks, it leaks at every round: the check
	// passes when two rounds leave nothing, or else when two more rounds leave nothing
	// beyond what the first two left.
	var err error
	for range 2 {
		e.runCleanups()
		baseline, before := goleak.IgnoreCurrent(), goroutinesByStart()
		for range 2 {
			if err := useEveryWay(e, backends); err != nil {
				return err
			}
		}
		e.runCleanups()
		if err = goleak.Find(baseline); err == nil || noneMoreThan(before, e.cfg.d(5*time.Second)) {
			return nil
		}
	}
	return fmt.Errorf("goroutines left after Stop: %w", err)
}

// noneMoreThan reports whether, within wait, no function runs in more goroutines begun
// by it than before: a backend may replace a goroutine it keeps (an etcd backend opens
// its watch stream again when the member lost its leader, which a loaded CI run's
// cluster did), which goleak counts as new, while a leak adds goroutines at every round.
func noneMoreThan(before map[string]int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !notMore(goroutinesByStart(), before) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // goroutines that end tell nobody
	}
	return true
}

// notMore reports whether no function has more goroutines in now than in before.
func notMore(now, before map[string]int) bool {
	for f, n := range now {
		if n > before[f] {
			return false
		}
	}
	return true
}

// goroutinesByStart counts the goroutines running now by the function each began in.
func goroutinesByStart() map[string]int {
	counts := map[string]int{}
	for _, g := range goroutine.Stacks() {
		// A goroutine's stack ends with the function it began in (a line of its name and
		// arguments, then one of its file), then "created by" and the creator's file.
		lines := strings.Split(strings.TrimSpace(g), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "created by ") })
		if i < 2 {
			continue // the main goroutine, or a stack cut short
		}
		start := lines[i-2]
		if cut := strings.LastIndex(start, "("); cut > 0 {
			start = start[:cut]
		}
		counts[start]++
	}
	return counts
}
