package chaos

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// writeReport renders the results as one table, writes it to
// $SIMBA_CHAOS_REPORT (if set) and to out when it holds a scenario of TestChaos.
func writeReport(out io.Writer) error {
	resultsMu.Lock()
	list := append([]*Result(nil), results...)
	resultsMu.Unlock()
	ran := false
	for _, r := range list {
		ran = ran || r.Store != "all"
	}
	if !ran {
		return nil
	}
	byStore(list)
	var b strings.Builder
	mode := "short (make test)"
	if full() {
		mode = "full (make chaos)"
	}
	fmt.Fprintf(&b, "# simba fault suite: %s\n\n", mode)
	fmt.Fprintf(&b, "Go %s, %d cores, race detector %v; T %v, G %v, D %v, ZooKeeper session %v.\n\n",
		runtime.Version(), runtime.NumCPU(), raceEnabled, DefaultTiming.TTL, DefaultTiming.Transition,
		DefaultTiming.CallTimeout, DefaultTiming.Session)
	b.WriteString("## Summary\n\n")
	for _, store := range stores(list) {
		b.WriteString(summary(store, list) + "\n\n")
	}
	b.WriteString(failures(list))
	b.WriteString("## Scenarios\n\n")
	b.WriteString("| # | scenario | store | faults | tenures | max overlap | stale accepted | stale rejected | shadow lost | failover p50 / max (bound) | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range list {
		f := r.Findings
		kind := ""
		if r.Out {
			kind = " [out]"
		}
		verdict := "pass"
		if r.Failed {
			verdict = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %d | %s%s | %s | %s | %d | %v | %d | %d | %d | %s | %s |\n",
			r.Scenario, r.Name, kind, r.Store, faults(r.Faults), f.Tenures, f.MaxOverlap.Round(time.Millisecond),
			len(f.Referee), f.WritesRejected, f.ShadowLost, failovers(r), verdict)
	}
	for _, r := range list {
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "\n- %d %s (%s): %s", r.Scenario, r.Name, r.Store, n)
		}
	}
	b.WriteString("\n")
	b.WriteString(mutationTable())
	if path := os.Getenv("SIMBA_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// failures lists why each failed scenario failed, ahead of the tables: a CI log shows a
// part of the report, and this is the part that matters when a run is red.
func failures(list []*Result) string {
	var b strings.Builder
	for _, r := range list {
		if !r.Failed {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("## Failures\n\n")
		}
		for _, f := range r.Failures {
			if len(f) > 400 {
				f = f[:400] + "..."
			}
			fmt.Fprintf(&b, "- %d %s (%s): %s\n", r.Scenario, r.Name, r.Store, strings.ReplaceAll(f, "\n", " / "))
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// mutationTable reports the mutation runs of scenario 27b, when they ran.
func mutationTable() string {
	var b strings.Builder
	caught, ran := 0, 0
	for _, m := range mutations {
		if !m.ran {
			continue
		}
		ran++
		if b.Len() == 0 {
			b.WriteString("\n## Mutations (scenario 27b)\n\n| mutation | store | scenario | must fail | result |\n|---|---|---|---|---|\n")
		}
		verdict := "**not caught**"
		if m.caught {
			verdict = "caught"
			caught++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m.name, m.store, m.scenario, m.expected, verdict)
	}
	if b.Len() > 0 {
		fmt.Fprintf(&b, "\n%d of %d mutations caught.\n", caught, ran)
	}
	return b.String()
}

func stores(list []*Result) []string {
	var out []string
	for _, r := range list {
		if !slices.Contains(out, r.Store) {
			out = append(out, r.Store)
		}
	}
	return out
}

// summary is one line per store.
func summary(store string, list []*Result) string {
	var (
		injections, tenures, rejected, accepted, failed int
		inModelOverlaps, leaks                          int
		took                                            time.Duration
		maxFailover, bound                              time.Duration
	)
	for _, r := range list {
		if r.Store != store {
			continue
		}
		for _, n := range r.Faults {
			injections += n
		}
		tenures += r.Findings.Tenures
		leaks += len(r.Findings.Residue)
		rejected += r.Findings.WritesRejected
		accepted += len(r.Findings.Referee)
		if !r.Out {
			inModelOverlaps += len(r.Findings.Overlaps)
		}
		for _, d := range r.Failovers {
			maxFailover = max(maxFailover, d)
		}
		bound = max(bound, r.Bound)
		took += r.Took
		if r.Failed {
			failed++
		}
	}
	return fmt.Sprintf("**%s**: %d fault injections over %v of contention, %d tenures, %d in-model overlaps, %d stale writes accepted (%d rejected), max failover %v vs bound %v, %d leaks (store residue after Stop; goroutines: %s), %d failed scenarios.",
		store, injections, took.Round(time.Second), tenures, inModelOverlaps, accepted, rejected,
		maxFailover.Round(time.Millisecond), bound, leaks, goroutineLeaks, failed)
}

func faults(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func failovers(r *Result) string {
	if len(r.Failovers) == 0 {
		return "-"
	}
	d := slices.Clone(r.Failovers)
	slices.Sort(d)
	return fmt.Sprintf("%v / %v (%v)", d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), r.Bound)
}
