package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clock"
)

// Config says what one run does.
type Config struct {
	Seed      uint64
	Steps     int // operations the seed makes
	Processes int
	// WithClock is simba's option that gives a simba object a clock of its own, exported
	// to tests only (the root package's export_test.go).
	WithClock func(clock.Clock) simba.Option
	// Keep, when not nil, runs only these of the seed's operations (by index).
	Keep []int
	// Trace, when not nil, is told every operation and event.
	Trace func(format string, args ...any)
}

// Result is what a run found.
type Result struct {
	Seed       uint64
	Ran        []int    // the indices of the operations run
	Step       int      // the index of the operation after which a check failed; -1: at the end
	Violations []string // empty: the run passed
}

// Failed reports whether a check failed.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Deadlocked reports whether goroutines were left blocked at the end: the bubble of the
// run panics as it ends.
func (r Result) Deadlocked() bool {
	for _, v := range r.Violations {
		if strings.Contains(v, leftoverNote) {
			return true
		}
	}
	return false
}

const leftoverNote = "goroutines left after everything was closed"

// Run runs one simulation. It must be called inside a synctest bubble, whose time it uses.
func Run(cfg Config) Result {
	ops := Ops(cfg.Seed, cfg.Steps, cfg.Processes)
	keep := cfg.Keep
	if keep == nil {
		keep = make([]int, len(ops))
		for i := range keep {
			keep[i] = i
		}
	}
	w := newWorld(cfg)
	res := Result{Seed: cfg.Seed, Step: -1}
	for _, i := range keep {
		if i < 0 || i >= len(ops) {
			continue
		}
		res.Ran = append(res.Ran, i)
		for _, p := range w.procs {
			if p.paused() && !time.Now().Before(p.resumeAt) {
				w.resume(p, synctest.Wait)
			}
		}
		w.trace("op %d: %v", i, ops[i])
		w.apply(ops[i])
		synctest.Wait()
		w.check(i)
		if v := w.takeViolations(); len(v) > 0 {
			res.Step, res.Violations = i, v
			w.end()
			w.takeViolations()
			return res
		}
	}
	w.end()
	res.Violations = w.takeViolations()
	return res
}

func (w *world) takeViolations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.violations
	w.violations = nil
	return v
}

func (w *world) trace(format string, args ...any) {
	if w.cfg.Trace != nil {
		w.cfg.Trace("%v "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// end closes everything and checks that nothing is left: every call returned, no owner on
// the store once the leases of the crashed lapsed, no goroutine.
func (w *world) end() {
	for _, p := range w.procs {
		if p.paused() {
			w.resume(p, synctest.Wait)
		}
		p.link.heal()
	}
	synctest.Wait()
	for _, p := range w.procs {
		w.closeAll(p)
	}
	synctest.Wait()
	time.Sleep(calm) // the leases of crashed incarnations lapse
	synctest.Wait()
	w.mu.Lock()
	for _, c := range w.calls {
		if !c.done {
			w.violate("%s never returned", c.what)
		}
	}
	w.mu.Unlock()
	for _, m := range w.names {
		if o := w.storeOwner(m); o != "" {
			w.mu.Lock()
			w.violate("after everything was closed, the store still names %s the owner of %s", o, m)
			w.mu.Unlock()
		}
	}
	for _, left := range w.holdsLeft() {
		w.mu.Lock()
		w.violate("after everything was closed, the store still keeps a hold: %s", left)
		w.mu.Unlock()
	}
	for _, c := range w.watch {
		_ = c.StopContend(context.Background())
	}
	synctest.Wait()
	if left := leftovers(); len(left) > 0 {
		w.mu.Lock()
		w.violate("%d %s:\n%s", len(left), leftoverNote, strings.Join(left, "\n\n"))
		w.mu.Unlock()
	}
}

// Shrink looks for a shorter history that still fails: it drops chunks of the failing
// run's operations, then single ones, keeping every cut after which replay still reports
// a failure. replay runs the seed's operations keep (each in a bubble of its own) and
// reports whether it failed. It stops after budget replays.
func Shrink(failed Result, budget int, replay func(keep []int) bool) []int {
	keep := slices.Clone(failed.Ran)
	if failed.Step >= 0 { // nothing after the failing step matters
		keep = keep[:slices.Index(keep, failed.Step)+1]
	}
	for chunk := len(keep) / 2; chunk >= 1 && budget > 0; chunk /= 2 {
		for start := 0; start < len(keep) && budget > 0; {
			end := min(start+chunk, len(keep))
			candidate := slices.Concat(keep[:start], keep[end:])
			budget--
			if len(candidate) > 0 && replay(candidate) {
				keep = candidate
				continue
			}
			start = end
		}
	}
	return keep
}

// FormatKeep writes keep as the -sim.keep flag reads it ("1,4,7-9").
func FormatKeep(keep []int) string {
	var parts []string
	for i := 0; i < len(keep); {
		j := i
		for j+1 < len(keep) && keep[j+1] == keep[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", keep[i], keep[j]))
		} else {
			parts = append(parts, strconv.Itoa(keep[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseKeep reads the -sim.keep flag.
func ParseKeep(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var keep []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("sim: keep %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("sim: keep %q: %w", s, err)
			}
		}
		for i := a; i <= b; i++ {
			keep = append(keep, i)
		}
	}
	return keep, nil
}

// History writes the operations keep of seed, one per line.
func History(seed uint64, steps, procs int, keep []int) string {
	ops := Ops(seed, steps, procs)
	var b strings.Builder
	for _, i := range keep {
		fmt.Fprintf(&b, "  %3d  %v\n", i, ops[i])
	}
	return b.String()
}
