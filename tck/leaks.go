package tck

import (
	"fmt"
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
		baseline, before := goleak.IgnoreCurrent(), goroutinesByCreator()
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

// noneMoreThan reports whether, within wait, no function has more goroutines running that
// it created than before: a backend may replace a goroutine it keeps (an etcd backend
// opens its watch stream again when the member lost its leader, which a loaded CI run's
// cluster did), which goleak counts as new, while a leak adds goroutines at every round.
func noneMoreThan(before map[string]int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !notMore(goroutinesByCreator(), before) {
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

// goroutinesByCreator counts the goroutines running now by the function that created
// each: what a stack says of a goroutine whether or not it has begun to run (one that has
// not shows the go statement's wrapper, not its function).
func goroutinesByCreator() map[string]int {
	counts := map[string]int{}
	for _, g := range goroutine.Stacks() {
		_, creator, ok := strings.Cut(g, "\ncreated by ")
		if !ok {
			continue // the main goroutine
		}
		creator, _, _ = strings.Cut(creator, "\n")
		creator, _, _ = strings.Cut(creator, " in goroutine ")
		counts[creator]++
	}
	return counts
}
