package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	Quick       bool              `json:"quick"`
	Started     time.Time         `json:"started"`
	Took        time.Duration     `json:"took_ns"`
	Machine     machine           `json:"machine"`
	Settings    runSettings       `json:"settings"`
	Floors      []cycleResult     `json:"floors"`
	Uncontended []cycleResult     `json:"uncontended"`
	HandOver    []handOverResult  `json:"hand_over"`
	Contended   []contendedResult `json:"contended"`
	Failover    []failoverResult  `json:"failover"`
	Scale       []scaleResult     `json:"scale"` // the goal runs: the most contenders, whole minutes
	Curve       []scaleResult     `json:"curve"` // fewer contenders, one renewal period
	LostLock    []lostLockResult  `json:"lost_lock,omitempty"`
	Held        []scaleResult     `json:"held,omitempty"` // the SQL stores' many held mutexes (default lead)
	// Network is the uncontended, hand-over, contended and failover figures again through
	// a proxy that delays every chunk by Settings.Delay each way.
	Network *results `json:"network,omitempty"`
	// Holds is the holds figure: semaphores and read-write locks.
	Holds    *holdResults `json:"holds,omitempty"`
	Failures []string     `json:"failures,omitempty"`
	// FigureLoad is the 1-minute load average when each figure began.
	FigureLoad []figureLoad `json:"figure_load"`
}

type figureLoad struct {
	Figure string `json:"figure"`
	Load   string `json:"load"`
}

// runSettings are the sizes of a run's figures.
type runSettings struct {
	Cycles        int           `json:"cycles"`
	CycleWarm     int           `json:"cycle_warm"`
	HandOvers     int           `json:"hand_overs"`
	HandOverWarm  int           `json:"hand_over_warm"`
	Clients       int           `json:"clients"`
	ContendWarm   time.Duration `json:"contend_warm_ns"`
	ContendWindow time.Duration `json:"contend_window_ns"`
	Failovers     int           `json:"failovers"`
	ScaleN        int           `json:"scale_n"`
	ScaleTTL      time.Duration `json:"scale_ttl_ns"`
	ScaleFor      time.Duration `json:"scale_for_ns"`
	CurveN        []int         `json:"curve_n"`
	HeldFor       time.Duration `json:"held_for_ns,omitempty"`  // how long the SQL stores' held-mutex runs count
	CountCycles   int           `json:"count_cycles,omitempty"` // uncontended cycles counted on the store's counters
	Delay         time.Duration `json:"delay_ns,omitempty"`     // the network figure's proxy delay, each way
	Cuts          int           `json:"cuts,omitempty"`         // owners cut off per library in the lostlock figure
}

// network returns the settings of the network figure: the delay of s, and smaller
// samples, since every operation there takes round trips of a millisecond or more.
func (s runSettings) network() runSettings {
	n := s
	n.Cycles, n.CycleWarm = max(s.Cycles/4, 1), max(s.CycleWarm/4, 1)
	n.HandOvers = max(s.HandOvers/3, 1)
	n.ContendWindow = s.ContendWindow / 2
	n.Failovers = max(s.Failovers/2, 1)
	return n
}

func isSimba(id string) bool { return strings.HasPrefix(id, "simba-") }

// isReference reports whether a library id is a reference lock of the bench's own (see
// reference_redis.go), a floor to compare with and no peer.
func isReference(id string) bool { return strings.HasPrefix(id, "reference-") }

// Files of a run under the results directory. The .md and .svg files are the latest full
// run's; runs/ keeps the raw data of every run; a quick run writes all of its files under
// quick/ instead, leaving the full run's, which the README links to, alone.
const (
	resultsFile = "results.md"
	scaleSVG    = "scale.svg"
	runsDir     = "runs"
	quickDir    = "quick"
)

func handOverSVG(store string) string { return "handover-" + store + ".svg" }

// write writes the results file, the plots and the raw data under dir.
func (r *results) write(dir string) ([]string, error) {
	if r.Quick {
		dir = filepath.Join(dir, quickDir)
	}
	if r.holdsOnly() {
		dir = filepath.Join(dir, holdsDir)
	}
	if err := os.MkdirAll(filepath.Join(dir, runsDir), 0o755); err != nil {
		return nil, err
	}
	var written []string
	put := func(name, content string) error {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	for _, store := range allStores {
		if rs := r.handOversOn(store); len(rs) > 0 {
			if err := put(handOverSVG(store), cdfPlot(store, rs).svg()); err != nil {
				return written, err
			}
		}
	}
	if pts := r.scalePoints(); len(pts) > 0 {
		if err := put(scaleSVG, scalePlot(pts).svg()); err != nil {
			return written, err
		}
	}
	if err := put(resultsFile, r.markdown("")); err != nil {
		return written, err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return written, err
	}
	kind := "full"
	if r.Quick {
		kind = "quick"
	}
	name := filepath.Join(runsDir, r.Started.UTC().Format("20060102T150405Z")+"-"+kind+".json")
	return written, put(name, string(raw)+"\n")
}

func (r *results) handOversOn(store string) []handOverResult {
	var out []handOverResult
	for _, h := range r.HandOver {
		if h.Store == store {
			out = append(out, h)
		}
	}
	return out
}

// scalePoints returns the curve and the goal runs with simba's default lead, by store and
// number of contenders.
func (r *results) scalePoints() []scaleResult {
	var pts []scaleResult
	pts = append(pts, r.Curve...)
	for _, s := range r.Scale {
		if s.Lead == s.TTL/3 {
			pts = append(pts, s)
		}
	}
	slices.SortStableFunc(pts, func(a, b scaleResult) int {
		if a.Store != b.Store {
			return slices.Index(allStores, a.Store) - slices.Index(allStores, b.Store)
		}
		return a.Contenders - b.Contenders
	})
	return pts
}

// markdown renders the results. links is the path from the document to the results
// directory ("" for the results file itself).
func (r *results) markdown(links string) string {
	var b bytes.Buffer
	inReadme := links != ""
	if !inReadme {
		fmt.Fprintf(&b, "# simba side by side: benchmark results\n\n")
	}
	if r.Quick {
		fmt.Fprintf(&b, "> **Quick smoke run** (`-quick`): small samples and short windows. Not for comparison.\n\n")
	}
	r.writeMachine(&b)
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, "\n**Measurements that failed in this run:**\n\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", oneLine(f))
		}
	}
	h := "##"
	if inReadme {
		h = "###"
	}
	if r.holdsOnly() {
		fmt.Fprintf(&b, "\n%s Semaphores and read-write locks\n\n", h)
		r.Holds.write(&b, h+"#", r.Settings)
		return b.String()
	}
	fmt.Fprintf(&b, "\n%s Goals\n\n", h)
	b.WriteString("Issue 35's goals, and those of earlier issues it left standing (the hand-overs of #14, #15 and #18 and of the first round's design card; the first round's memory per contender), on this run.\n\n")
	r.writeGoals(&b)
	var plots strings.Builder
	for _, store := range allStores {
		if len(r.handOversOn(store)) > 0 {
			fmt.Fprintf(&plots, "![hand-over latency on %s](%s)\n", storeTitle(store), filepath.Join(links, handOverSVG(store)))
		}
	}
	r.writeFigures(&b, h, plots.String())
	if n := r.Network; n != nil {
		fmt.Fprintf(&b, "\n%s Over a network: %s each way\n\n", h, ms(n.Settings.Delay))
		r.writeNetwork(&b)
		n.writeFigures(&b, h+"#", "")
	}
	if len(r.LostLock) > 0 {
		fmt.Fprintf(&b, "\n%s Time to notice a lost lock\n\n", h)
		r.writeLostLock(&b)
	}
	fmt.Fprintf(&b, "\n%s Scale: contenders held by one process\n\n", h)
	r.writeScale(&b, links)
	if len(r.heldRuns()) > 0 {
		fmt.Fprintf(&b, "\n%s Many held mutexes: store requests per renewal period\n\n", h)
		r.writeHeld(&b)
	}
	if inReadme {
		fmt.Fprintf(&b, "\nMethod, settings of every library and the raw data: [%s](%s).\n", filepath.Join(links, resultsFile), filepath.Join(links, resultsFile))
		return b.String()
	}
	if r.Holds != nil {
		fmt.Fprintf(&b, "\n%s Semaphores and read-write locks\n\n", h)
		r.Holds.write(&b, h+"#", r.Settings)
	}
	fmt.Fprintf(&b, "\n## Method\n\n")
	r.writeMethod(&b)
	fmt.Fprintf(&b, "\n## Settings of each library\n\n| store | library | settings |\n|---|---|---|\n")
	for _, l := range libraries() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", storeTitle(l.store), l.name, l.settings)
	}
	return b.String()
}

// writeFigures writes the tables of the uncontended, hand-over, contended and failover
// figures that r has, each under a heading of level h, and plots (markdown) after the
// hand-overs.
func (r *results) writeFigures(b *bytes.Buffer, h, plots string) {
	if len(r.Floors)+len(r.Uncontended) > 0 {
		fmt.Fprintf(b, "\n%s Uncontended acquire + release\n\n", h)
		r.writeUncontended(b)
	}
	if len(r.HandOver) > 0 {
		fmt.Fprintf(b, "\n%s Hand-over between two clients\n\n", h)
		r.writeHandOver(b)
		if plots != "" {
			b.WriteString("\n" + plots)
		}
	}
	if len(r.Contended) > 0 {
		fmt.Fprintf(b, "\n%s %d clients contending\n\n", h, r.Settings.Clients)
		r.writeContended(b)
	}
	if len(r.Failover) > 0 {
		fmt.Fprintf(b, "\n%s Crash failover\n\n", h)
		r.writeFailover(b)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (r *results) writeMachine(b *bytes.Buffer) {
	m := r.Machine
	fmt.Fprintf(b, "Run of %s UTC, %s, on %s (%d cores), Linux %s, loopback. Load average (1/5/15 min) %s at the start, %s at the end.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04"), r.Took.Round(time.Second), m.CPU, m.Cores, m.Kernel, m.LoadStart, m.LoadEnd)
	var servers []string
	if m.Redis != "" {
		servers = append(servers, "Redis "+m.Redis+" (no persistence)")
	}
	if m.MariaDB != "" {
		servers = append(servers, "MariaDB "+m.MariaDB+" (InnoDB defaults: a commit is flushed to the log)")
	}
	if m.Postgres != "" {
		servers = append(servers, "PostgreSQL "+m.Postgres+" (defaults: a commit is flushed to the WAL)")
	}
	if m.ZooKeeper != "" {
		servers = append(servers, fmt.Sprintf("ZooKeeper %s (standalone, tickTime %v, forceSync=no, as the tests run it)", m.ZooKeeper, zkTick))
	}
	if m.Etcd != "" {
		servers = append(servers, "etcd "+m.Etcd+" (one member, defaults: a commit is flushed to its WAL)")
	}
	if len(r.FigureLoad) > 0 {
		var parts []string
		for _, f := range r.FigureLoad {
			parts = append(parts, f.Figure+" "+f.Load)
		}
		fmt.Fprintf(b, "1-minute load average as each figure began: %s.\n\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(b, "%s; simba at %s; servers: %s.", m.Go, m.Simba, strings.Join(servers, ", "))
	if len(m.Modules) > 0 {
		var mods []string
		for _, p := range slices.Sorted(mapKeys(m.Modules)) {
			mods = append(mods, fmt.Sprintf("%s %s", strings.TrimPrefix(p, "github.com/"), m.Modules[p]))
		}
		fmt.Fprintf(b, " Modules: %s.", strings.Join(mods, ", "))
	}
	b.WriteString("\n")
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// goal is one goal of an issue with what this run measured.
type goal struct {
	issue    string // where it was set: "#14", or "round 1" (the first round's design card)
	text     string
	measured string
	met      int // 1 met, 0 missed, -1 not measured
}

func verdict(ok bool) int {
	if ok {
		return 1
	}
	return 0
}

func (r *results) writeGoals(b *bytes.Buffer) {
	b.WriteString("| issue | goal | measured | |\n|---|---|---|---|\n")
	for _, g := range r.goals() {
		mark := "–"
		switch g.met {
		case 1:
			mark = "✅"
		case 0:
			mark = "❌"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", g.issue, g.text, g.measured, mark)
	}
}

func (r *results) cycle(id string) (cycleResult, bool) {
	for _, c := range r.Uncontended {
		if c.ID == id {
			return c, true
		}
	}
	return cycleResult{}, false
}

func (r *results) handOver(id string) (handOverResult, bool) {
	for _, h := range r.HandOver {
		if h.ID == id {
			return h, true
		}
	}
	return handOverResult{}, false
}

func (r *results) contended(id string) (contendedResult, bool) {
	for _, c := range r.Contended {
		if c.ID == id {
			return c, true
		}
	}
	return contendedResult{}, false
}

// ratioGoal compares simba's p50 cycle or hand-over (of: "cycle" or "handover") with a
// peer's: met when simba's over the peer's is at most limit.
func (r *results) ratioGoal(issue, text, of, mine, peer, peerName string, limit float64) goal {
	p50 := func(id string) (time.Duration, bool) {
		if of == "cycle" {
			c, ok := r.cycle(id)
			return c.P50, ok
		}
		h, ok := r.handOver(id)
		return h.P50, ok
	}
	s, sok := p50(mine)
	p, pok := p50(peer)
	if !sok || !pok || p <= 0 {
		return missing(issue, text)
	}
	ratio := float64(s) / float64(p)
	return goal{issue, text, fmt.Sprintf("simba %s, %s %s: %.2f ×", ms(s), peerName, ms(p), ratio), verdict(ratio <= limit)}
}

// throughputGoal is a goal for simba's library mine with 8 clients: met when its sections
// per second reach ratio × the peer's (ratio 0: perSecond), with at least the given
// fairness and no overlap.
func (r *results) throughputGoal(issue, text, mine, peer, peerName string, ratio, perSecond, fairness float64) goal {
	c, ok := r.contended(mine)
	if !ok {
		return missing(issue, text)
	}
	if ratio == 0 {
		return goal{issue, text, fmt.Sprintf("simba %.0f/s, fairness %.2f", c.PerSecond, c.Fairness),
			verdict(c.PerSecond >= perSecond && c.Fairness >= fairness && c.Overlaps == 0)}
	}
	p, ok := r.contended(peer)
	if !ok || p.PerSecond <= 0 {
		return missing(issue, text)
	}
	got := c.PerSecond / p.PerSecond
	return goal{issue, text, fmt.Sprintf("simba %.0f/s, fairness %.2f; %s %.0f/s, fairness %.2f: %.2f ×",
		c.PerSecond, c.Fairness, peerName, p.PerSecond, p.Fairness, got),
		verdict(got >= ratio && c.Fairness >= fairness && c.Overlaps == 0)}
}

// bestPeer returns the id and the name of the peer with the most sections per second on
// store (the reference lock is none), and false when none ran.
func (r *results) bestPeer(store string) (id, name string, ok bool) {
	var best *contendedResult
	for i := range r.Contended {
		c := &r.Contended[i]
		if c.Store == store && !isSimba(c.ID) && !isReference(c.ID) && (best == nil || c.PerSecond > best.PerSecond) {
			best = c
		}
	}
	if best == nil {
		return "", "", false
	}
	return best.ID, "best peer " + best.Library, true
}

// missing is a goal this run did not measure.
func missing(issue, text string) goal {
	return goal{issue: issue, text: text, measured: "not measured", met: -1}
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (r *results) floor(store string) (cycleResult, bool) {
	for _, f := range r.Floors {
		if f.Store == store {
			return f, true
		}
	}
	return cycleResult{}, false
}

func (r *results) writeUncontended(b *bytes.Buffer) {
	fmt.Fprintf(b, "One client, acquire then release, %d times after %d untimed cycles. \"Round trips\" is the p50 over the store's floor, one raw round trip. Store work per cycle: the server's counters over %d more cycles after the timed ones: Redis commands (those run inside scripts included; INFO commandstats) and the server's CPU time (INFO cpu); MariaDB statements (Questions) and fsyncs (Innodb_data_fsyncs); PostgreSQL statements (pg_stat_statements); ZooKeeper packets received; etcd gRPC calls and streams begun, and raft proposals committed.\n\n",
		r.Settings.Cycles, r.Settings.CycleWarm, r.Settings.CountCycles)
	b.WriteString("| store | library | p50 | p99 | cycles/s | round trips (p50) | store work / cycle |\n|---|---|---|---|---|---|---|\n")
	for _, store := range allStores {
		f, hasFloor := r.floor(store)
		for _, g := range r.Floors {
			if g.Store == store {
				fmt.Fprintf(b, "| %s | *%s* | %s | %s | %.0f | %.1f | %s |\n", storeTitle(store), g.Library, ms(g.P50), ms(g.P99), g.PerSecond, float64(g.P50)/float64(f.P50), storeWork(store, g.PerCycle))
			}
		}
		for _, c := range r.Uncontended {
			if c.Store != store {
				continue
			}
			trips := "–"
			if hasFloor {
				trips = fmt.Sprintf("%.1f", float64(c.P50)/float64(f.P50))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %.0f | %s | %s |\n", storeTitle(store), bold(c.Library, c.ID), ms(c.P50), ms(c.P99), c.PerSecond, trips, storeWork(store, c.PerCycle))
		}
	}
}

// storeWork describes the store's work per operation (per: counts per operation).
func storeWork(store string, per map[string]float64) string {
	if len(per) == 0 {
		return "–"
	}
	switch store {
	case storeRedis:
		return fmt.Sprintf("%.1f commands, %.1f µs CPU", per[countRequests], per[countCPU])
	case storeSQL:
		return fmt.Sprintf("%.1f statements, %.1f fsyncs", per[countRequests], per[countFsyncs])
	case storePostgres:
		if v, ok := per[countRequests]; ok {
			return fmt.Sprintf("%.1f statements", v)
		}
		return "–"
	case storeZooKeeper:
		return fmt.Sprintf("%.1f requests", per[countRequests])
	case storeEtcd:
		return fmt.Sprintf("%.1f requests, %.1f commits", per[countRequests], per[countCommits])
	}
	return "–"
}

func bold(name, id string) string {
	if isSimba(id) {
		return "**" + name + "**"
	}
	return name
}

func (r *results) writeHandOver(b *bytes.Buffer) {
	fmt.Fprintf(b, "From the holder's release call to the waiter's acquire returning; the waiter was already waiting, and the holder released at a random moment after that (\"hold\": uniform below it). %d hand-overs per library after %d untimed.\n\n",
		r.Settings.HandOvers, r.Settings.HandOverWarm)
	b.WriteString("| store | library | p50 | p99 | max | hold | gave up |\n|---|---|---|---|---|---|---|\n")
	for _, h := range r.HandOver {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %d |\n", storeTitle(h.Store), bold(h.Library, h.ID), ms(h.P50), ms(h.P99), ms(h.Max), ms(h.Hold), h.GiveUps)
	}
}

func (r *results) writeContended(b *bytes.Buffer) {
	fmt.Fprintf(b, "%d clients, each with a connection of its own, loop acquire, empty critical section, release on one mutex for %v (after %v of warm-up). Fairness is the fewest sections of a client over the most; an overlap is a client entering while another was between its acquire's return and its release call. Server ops per section: Redis commands processed (those run inside scripts included) and the server's CPU time (INFO cpu), MariaDB statements, PostgreSQL statements (pg_stat_statements) or ZooKeeper packets received, from the server's counters; lost attempts: simba's acquire calls that found the mutex owned by another client.\n\n",
		r.Settings.Clients, r.Settings.ContendWindow, r.Settings.ContendWarm)
	b.WriteString("| store | library | sections/s | per client (min–max) | fairness | overlaps | gave up | errors | server ops / section | Redis CPU / section | lost attempts / section |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Contended {
		lo, hi := int64(0), int64(0)
		if len(c.PerClient) > 0 {
			lo, hi = slices.Min(c.PerClient), slices.Max(c.PerClient)
		}
		errs := fmt.Sprint(c.Errors)
		if c.FirstErr != "" {
			errs += " (" + oneLine(c.FirstErr) + ")"
		}
		ops, cpu, lost := "–", "–", "–"
		if c.ServerOpsPerSection > 0 {
			ops = fmt.Sprintf("%.1f", c.ServerOpsPerSection)
		}
		if c.ServerCPUPerSection > 0 {
			cpu = fmt.Sprintf("%.1f µs", c.ServerCPUPerSection)
		}
		if isSimba(c.ID) && c.Store != storeZooKeeper {
			lost = fmt.Sprintf("%.2f", c.LostPerSection)
		}
		fmt.Fprintf(b, "| %s | %s | %.0f | %d–%d | %.2f | %d | %d | %s | %s | %s | %s |\n", storeTitle(c.Store), bold(c.Library, c.ID), c.PerSecond, lo, hi, c.Fairness, c.Overlaps, c.GiveUps, errs, ops, cpu, lost)
	}
}

func (r *results) writeFailover(b *bytes.Buffer) {
	fmt.Fprintf(b, "The owner, a process of its own, is killed (SIGKILL) at a random moment of its lease; the time runs from the kill to the waiter's acquire returning. Every library gets the same lease: %v (simba ttl 2s + transition 1s; the peers' lock expiry; ZooKeeper's session timeout). The bound is what the design allows at most.\n\n", failoverLease)
	b.WriteString("| store | library | kills | median | max | bound | within bound |\n|---|---|---|---|---|---|---|\n")
	for _, f := range r.Failover {
		name := bold(f.Library, f.ID)
		if f.Simulated {
			name += " (backend closed in-process)"
		}
		bound, within := ms(f.Bound), "–"
		if f.Bound == 0 {
			bound = "the dead owner's connection closing"
		} else if len(f.Takeovers) > 0 {
			within = map[bool]string{true: "✅", false: "❌"}[f.Takeovers.max() <= f.Bound+50*time.Millisecond]
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", storeTitle(f.Store), name, len(f.Takeovers), ms(f.Takeovers.quantile(0.5)), ms(f.Takeovers.max()), bound, within)
	}
}

func (r *results) writeScale(b *bytes.Buffer, links string) {
	fmt.Fprintf(b, "Lockers in one process, each holding a mutex of its own, on one backend, ttl %v. Memory per contender after GC, once every owner has renewed; goroutines per contender then, and the most at once during the renewals; store calls counted around the backend (and, on Redis, by the server's commandstats) over whole renewal periods; an owner is late if its lease context ended.\n\n", r.Settings.ScaleTTL)
	b.WriteString("| store | renewal lead | contenders | heap | heap + stacks | goroutines (most at once) | store calls/s | N/ttl | ratio | renewal interval mean / p99 / max (expected) | late |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Scale {
		server := ""
		if s.ServerOps > 0 {
			server = fmt.Sprintf(" (server: %.0f)", s.ServerOps)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f KB | %.2f KB | %s | %.0f%s | %.0f | %.3f | %s / %s / %s (%s) | %d |\n",
			storeTitle(s.Store), s.LeadLabel, thousands(s.Contenders), s.HeapBytes/1024, (s.HeapBytes+s.StackBytes)/1024, s.goroutines(),
			s.OpsPerSecond, server, s.Ideal, s.OpsPerSecond/s.Ideal,
			ms(s.IntervalMean), ms(s.IntervalP99), ms(s.IntervalMax), ms(s.Period), s.Late)
	}
	if len(r.Curve) > 0 {
		b.WriteString("\nBy number of contenders (default lead; the smaller runs hold for one renewal period, the largest is the run above):\n\n| store | contenders | heap | heap + stacks | goroutines |\n|---|---|---|---|---|\n")
		for _, s := range r.scalePoints() {
			fmt.Fprintf(b, "| %s | %s | %.2f KB | %.2f KB | %.2f |\n", storeTitle(s.Store), thousands(s.Contenders), s.HeapBytes/1024, (s.HeapBytes+s.StackBytes)/1024, s.Goroutines)
		}
	}
	if len(r.scalePoints()) > 0 {
		fmt.Fprintf(b, "\n![memory per contender](%s)\n", filepath.Join(links, scaleSVG))
	}
}

func (r *results) writeMethod(b *bytes.Buffer) {
	st := r.Settings
	fmt.Fprintf(b, `Everything runs in one process of this program (bench/, a Go module of its own), against servers it starts on free loopback ports with private data directories, the same server programs simba's tests use, one after the other: no two measurements overlap. ZooKeeper's JVM is warmed up with 3,000 create/list/read/delete cycles before anything is timed, and every measurement has untimed warm-up of its own. Every client has a connection (pool, session, backend) of its own, as separate processes would. Times are taken with Go's monotonic clock in this process.

- **Floor**: one raw round trip on a connection of its own: Redis PING, MariaDB and PostgreSQL SELECT 1 on a pinned connection, ZooKeeper exists("/"), etcd a linearizable Get of one key; on the SQL stores also one autocommitted UPDATE of a one-row table on a pinned connection (a round trip and a commit). It is the unit to read the other figures in, since the machine's load moves them all.
- **Uncontended**: one client acquires and releases %d times after %d untimed cycles; p50 and p99 of a cycle, and cycles per second (the inverse of the mean cycle). The libraries of a store and its floors take turns in blocks of 100 cycles, so that changes of the machine's load fall on all of them alike. simba uses a Locker (Acquire, then Lease.Release), as an application would.
- **Hand-over**: two clients take turns. The waiter starts acquiring; the run waits until the waiter is seen waiting the way its library waits: for simba on Redis, an attempt has found the mutex owned and PUBSUB NUMSUB shows its inbox channel subscribed (a stale subscription of its previous wait is first seen gone); on MariaDB (simba and GET_LOCK) an attempt has found it owned and the server's process list shows a session in GET_LOCK ("User lock"); on PostgreSQL (simba and pg_advisory_lock) pg_stat_activity shows a session waiting for an advisory lock; on ZooKeeper (simba and zk.Lock) the server's wchc list shows the waiter's session watching the holder's node, or for simba the mutex node (its queue watch, persistent and recursive); on etcd (simba and concurrency.Mutex) the holder's and the waiter's keys have been under the mutex's prefix for 150 ms and the member's etcd_debugging_mvcc_slow_watcher_total is 0 (a watch that starts at a revision already written, as concurrency.Mutex's always does, waits for the server's catch-up loop, every 100 ms, and etcd does not say whose watches it holds); on memory an attempt has found it owned (the store then queues the waiter); for the polling libraries (redsync, redislock), the client has completed its first attempt. The holder then holds on for a random time, uniform below %v for libraries woken by the store and below the longest retry delay for polling ones (250 ms, 100 ms, 5 ms), so that the release falls at a random phase of the poll. The time runs from the holder's release call to the waiter's acquire returning. %d hand-overs per library after %d untimed; the libraries of a store take turns in blocks of 10. The CDF plots show every sample.
- **Contended**: %d clients loop acquire, an empty critical section, release, on one mutex, for %v after %v of warm-up. A client's section runs from its acquire's return to its release call; an atomic counter of clients in their section counts overlaps. A polling library that gives up (redsync after its tries, redislock after its retries) is asked again at once, as an application would; that is counted as "gave up".
- **Crash failover**: a holder process (this program re-run in a holder role) acquires the mutex with the library and holds it, renewing where the library does not on its own (redsync Extend, redislock Refresh, each every third of the lease); the waiter is waiting, verified as above; the holder is killed with SIGKILL after a random time, uniform below the lease, so that it dies at a random point of its renewal cycle. The time runs from the kill to the waiter's acquire returning. All libraries get the same lease of %v, so that the figure compares designs, not defaults: simba ttl 2s and transition 1s (a successor may acquire only after both; the waiter's contend period adds up to 1s of jitter), redsync and redislock an expiry of 3s, ZooKeeper a session timeout of 3s (expiry is checked every tick, %v). With their defaults the lease is longer (simba 10s + 6s, redsync 8s) and the figure scales with it. GET_LOCK has no lease: the server frees the lock when the dead process's connection closes, which it does at once on a crash of the process (not on a network partition or a frozen host, where simba's lease and ZooKeeper's session still bound the wait). %d kills per library.
- **Scale**: %s Lockers in this process, each acquiring a mutex of its own, on one backend (memory; Redis with one go-redis client), ttl %v. Heap (HeapAlloc after two GCs), heap + goroutine stacks (StackInuse) and goroutines per contender are measured against a baseline taken before the Lockers were made (the Redis client's connection pool is dialed before the baseline, and the runtime holds a goroutine descriptor for each contender beyond those running: it never frees one, and every owner renewing at one instant would otherwise leave one per owner in the heap, or none if an earlier run had as many goroutines at once), after the load window, so every owner has renewed at least once (on Redis, that is when an owner subscribes its channels). Renewals come in waves, one per renewal period (ttl − lead), each as wide as the acquisitions took; the load window starts in the quiet middle after the first wave (every owner has renewed once) and lasts a whole number of periods, up to %v, so that every owner renews exactly as often within it: calls/window is the steady rate, compared with the ideal N/ttl (one renewal per TTL). It is run with simba's default lead (ttl/3: a renewal every 2/3 ttl, so 1.5 × N/ttl by construction) and with WithRenewalLead(ttl/20). Calls are counted by a wrapper around the backend's contention; on Redis the server's INFO commandstats (EVALSHA, EVAL and FCALL) confirms them. A renewal interval is the time between two renewal calls of one owner; an owner is late when its lease context has ended (it stopped believing it owns). On MariaDB and PostgreSQL (a pool of %d connections) the same %s Lockers run once, with the default lead, for whole periods up to %v: the store's load (Many held mutexes).
- **Store work**: the servers' own counters, read before and after: Redis INFO commandstats (calls of every command, scripts' inner calls included; EVAL, EVALSHA and FCALL calls as scripts) and INFO cpu (the main thread's CPU time, user and system: commandstats' usec would count a script's inner commands twice), MariaDB SHOW GLOBAL STATUS (Questions, Com_update and Com_update_multi, Com_commit, Innodb_data_fsyncs), PostgreSQL pg_stat_statements (loaded by this program into the server it starts; BEGIN and COMMIT included) and pg_stat_database's xact_commit, ZooKeeper mntr's zk_packets_received (pings of every open session included), etcd's /metrics (grpc_server_started_total: calls and streams begun, a keep-alive or watch stream once however many messages it carries; etcd_server_proposals_committed_total). Reading them is left out of them. The uncontended figure counts over %d cycles of each library after its timed ones, the contended one over its window.
- **Over a network**: the uncontended, hand-over, contended and failover figures again, with a proxy in front of each store that holds every chunk %v each way (see that section), with smaller samples.
- **Time to notice a lost lock**: an owner behind a proxy of its own is cut off by it (every byte swallowed both ways, connections open) at a random moment of its lease while a waiter, connected directly, waits (see that section); %d cuts per library.

Load: the machine has %d cores and is shared with other work; the load average at start and end is in the header. Ratios between libraries of one store are more reliable than absolute values: in the uncontended and hand-over figures they take turns, and the contended and failover runs of a store follow each other within minutes.
`,
		st.Cycles, st.CycleWarm, eventHold, st.HandOvers, st.HandOverWarm,
		st.Clients, st.ContendWindow, st.ContendWarm,
		failoverLease, zkTick, st.Failovers,
		thousands(st.ScaleN), st.ScaleTTL, st.ScaleFor, heldPool, thousands(st.ScaleN), st.HeldFor,
		st.CountCycles, st.Delay, st.Cuts, r.Machine.Cores)
}

// Markers of the README's performance section.
const (
	readmeBegin = "<!-- bench:begin -->"
	readmeEnd   = "<!-- bench:end -->"
)

// updateReadme replaces the text between the markers of the README at path with the
// results, linking to the results directory.
func (r *results) updateReadme(path, resultsDir string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	absReadme, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	absResults, err := filepath.Abs(resultsDir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(absReadme, absResults)
	if err != nil {
		return err
	}
	updated := old
	if r.hasMutexFigures() {
		if updated, err = replaceSection(updated, readmeBegin, readmeEnd, r.markdown(filepath.ToSlash(rel))); err != nil {
			return err
		}
	}
	if r.Holds != nil {
		if updated, err = replaceSection(updated, holdsBegin, holdsEnd, r.holdsMarkdown(filepath.ToSlash(rel))); err != nil {
			return err
		}
	}
	return os.WriteFile(path, updated, 0o644)
}

// replaceSection replaces the text between the markers begin and end of doc.
func replaceSection(doc []byte, begin, end, text string) ([]byte, error) {
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, errors.New("README has no " + begin + " ... " + end + " section")
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteString("\n")
	b.WriteString(text)
	b.Write(doc[j:])
	return b.Bytes(), nil
}
