// Command bench measures simba against the lock libraries its users would otherwise
// pick, side by side, in one run, on the same real servers: every simba backend (memory,
// Redis, MariaDB, PostgreSQL, ZooKeeper, etcd) through its Locker, go-redsync/redsync,
// bsm/redislock, go-zookeeper's lock recipe, etcd's concurrency.Mutex, MariaDB's GET_LOCK
// and PostgreSQL's pg_advisory_lock, and one raw round trip per store as the floor.
//
// It starts redis-server, MariaDB, PostgreSQL, ZooKeeper and etcd on free loopback ports
// with private directories (internal/testserver, as simba's tests do), or uses the ones
// given with -redis, -mysql, -postgres, -zookeeper and -etcd, and stops what it started when it ends or is
// interrupted. It prints the results, writes them with SVG plots to the results
// directory (results.md, handover-<store>.svg, scale.svg; runs/ keeps the raw data of
// every run), and, with -readme, replaces the README's performance section.
//
//	make bench                   # everything, several minutes
//	go run . -quick              # a smoke run, seconds per figure
//	go run . -stores redis -figures handover,contended
//	go run . -stores etcd -quick -figures uncontended,handover,contended,failover
//
// A module of its own, so that the peers never become dependencies of the library.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Figures, in the order they run.
const (
	figUncontended = "uncontended"
	figHandOver    = "handover"
	figContended   = "contended"
	figFailover    = "failover"
	figNetwork     = "network"  // the four above again, with a delay proxy in front of each store
	figLostLock    = "lostlock" // time to notice a lost lock
	figScale       = "scale"    // many contenders, and many held mutexes, in one process
)

var allFigures = []string{figUncontended, figHandOver, figContended, figFailover, figNetwork, figLostLock, figScale, figHolds}

// options are the command line.
type options struct {
	results string
	readme  string
	quick   bool
	stores  []string
	figures []string
	libs    []string // library ids; empty: all
	profile string   // directory for CPU profiles of each measurement and heap profiles of scale
	from    string   // raw data of an earlier run to render instead of measuring
	reuse   endpoints
	sizes   runSettings
}

func main() {
	if id := os.Getenv(holderEnv); id != "" {
		os.Exit(runHolder(id))
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var stores, figures, libs string
	fs.StringVar(&o.results, "results", "results", "directory for the results file, the plots and the raw data")
	fs.StringVar(&o.readme, "readme", "", "README whose performance section (between the bench markers) is replaced; empty: none. Not with -quick")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run: small samples, short windows, 1,000 contenders with ttl 2s")
	fs.StringVar(&stores, "stores", strings.Join(allStores, ","), "stores to measure")
	fs.StringVar(&figures, "figures", strings.Join(allFigures, ","), "figures to measure")
	fs.StringVar(&libs, "libs", "", "library ids to measure (simba-memory, simba-redis, redsync, redsync-tuned, redislock, redislock-tuned, reference-redis, reference-redis-jvm, simba-sql, getlock, simba-postgres, advisory, simba-zookeeper, zklock, simba-etcd, etcd-mutex; the holds figure's: simba-<store>-holds, simba-sql-holds-1b, simba-postgres-holds-1b, advisory-shared, etcd-recipes-rwmutex); empty: all")
	fs.StringVar(&o.from, "from", "", "render the results, plots and README section from the raw data of an earlier run instead of measuring (results/runs/*.json; a quick run's: results/quick/runs/*.json)")
	fs.StringVar(&o.profile, "profile", "", "directory for a CPU profile of every measurement and heap profiles of the scale runs (profiling slows the run down)")
	fs.StringVar(&o.reuse.Redis, "redis", "", "use this Redis (host:port) instead of starting one")
	fs.StringVar(&o.reuse.DSN, "mysql", "", "use this MySQL/MariaDB (go-sql-driver DSN, with interpolateParams=true) instead of starting one")
	fs.StringVar(&o.reuse.PgDSN, "postgres", "", "use this PostgreSQL (pgx DSN of a database simba's role may create its table in) instead of starting one")
	fs.StringVar(&o.reuse.ZooKeeper, "zookeeper", "", "use this ZooKeeper (host:port) instead of starting one")
	fs.StringVar(&o.reuse.Etcd, "etcd", "", "use this etcd member (host:port of its client URL) instead of starting one")
	s := &o.sizes
	fs.IntVar(&s.Cycles, "cycles", 2000, "uncontended cycles per library")
	fs.IntVar(&s.HandOvers, "handovers", 300, "hand-overs per library")
	fs.DurationVar(&s.ContendWindow, "contend", 10*time.Second, "how long the contended figure counts")
	fs.IntVar(&s.Failovers, "failovers", 4, "owner kills per library")
	fs.IntVar(&s.ScaleN, "scale", 10000, "contenders of the scale figure")
	fs.DurationVar(&s.ScaleFor, "scale-for", 2*time.Minute, "how long the scale figure holds (whole renewal periods up to it)")
	fs.DurationVar(&s.ScaleTTL, "scale-ttl", 10*time.Second, "ttl of the scale figure")
	fs.DurationVar(&s.HeldFor, "held-for", 20*time.Second, "how long the scale figure's runs on MariaDB and PostgreSQL count (whole renewal periods up to it)")
	fs.DurationVar(&s.Delay, "delay", 500*time.Microsecond, "how long the network figure's proxies hold the bytes, each way")
	fs.IntVar(&s.Cuts, "cuts", 4, "owners cut off per library in the lostlock figure")
	fs.IntVar(&s.CountCycles, "count-cycles", 100, "uncontended cycles counted on the store's counters, after the timed ones")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	s.Clients, s.CycleWarm, s.HandOverWarm, s.ContendWarm = 8, 200, 10, time.Second
	if o.quick {
		s.Cycles, s.CycleWarm, s.HandOvers, s.HandOverWarm = 200, 50, 30, 3
		s.ContendWindow, s.ContendWarm, s.Failovers = 2*time.Second, 500*time.Millisecond, 1
		s.Cuts, s.CountCycles, s.HeldFor = 1, 20, 4*time.Second
		s.ScaleN, s.ScaleTTL, s.ScaleFor = 1000, 2*time.Second, 4*time.Second
		if o.readme != "" {
			fmt.Fprintln(os.Stderr, "bench: -quick: the README is left alone")
			o.readme = ""
		}
	}
	s.CurveN = nil
	for _, n := range []int{s.ScaleN / 10, s.ScaleN * 3 / 10} {
		if n > 0 {
			s.CurveN = append(s.CurveN, n)
		}
	}
	var err error
	if o.stores, err = listFlag("stores", stores, allStores); err != nil {
		return o, err
	}
	if o.figures, err = listFlag("figures", figures, allFigures); err != nil {
		return o, err
	}
	if libs != "" {
		for _, id := range strings.Split(libs, ",") {
			if _, err := libraryByID(strings.TrimSpace(id)); err != nil {
				if _, ok := holdLibByID(strings.TrimSpace(id)); !ok {
					return o, err
				}
			}
			o.libs = append(o.libs, strings.TrimSpace(id))
		}
	}
	return o, nil
}

// listFlag splits a comma-separated flag and checks its values.
func listFlag(name, v string, valid []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(valid, s) {
			return nil, fmt.Errorf("-%s: unknown %q (known: %s)", name, s, strings.Join(valid, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// run measures every figure asked for, then writes and prints the results.
func run(ctx context.Context, o options) error {
	if o.from != "" {
		raw, err := os.ReadFile(o.from)
		if err != nil {
			return err
		}
		var res results
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("%s: %w", o.from, err)
		}
		if res.Quick {
			o.readme = ""
		}
		return publish(&res, o)
	}
	began := time.Now()
	res := &results{Quick: o.quick, Started: began, Machine: describeMachine(), Settings: o.sizes}
	var libs []library
	need := map[string]bool{}
	for _, l := range libraries() {
		if slices.Contains(o.stores, l.store) && (len(o.libs) == 0 || slices.Contains(o.libs, l.id)) {
			libs = append(libs, l)
			need[l.store] = true
		}
	}
	if slices.Contains(o.figures, figHolds) {
		for _, l := range holdLibs() {
			if slices.Contains(o.stores, l.store) && (len(o.libs) == 0 || slices.Contains(o.libs, l.id)) {
				need[l.store] = true
			}
		}
	}
	if slices.Contains(o.figures, figScale) {
		for _, st := range []string{storeMemory, storeRedis, storeSQL, storePostgres} {
			if slices.Contains(o.stores, st) {
				need[st] = true
			}
		}
	}
	logf("load average %s; starting servers", res.Machine.LoadStart)
	srv, err := startServers(ctx, need, o.reuse)
	if err != nil {
		return err
	}
	defer srv.stop()
	res.Machine.Redis, res.Machine.MariaDB, res.Machine.Postgres, res.Machine.ZooKeeper = srv.redisVersion, srv.mariaVersion, srv.pgVersion, srv.zkVersion
	res.Machine.Etcd = srv.etcdVersion
	e, err := newEnv(srv.endpoints, need)
	if err != nil {
		return err
	}
	defer e.close()

	m := measurer{o: o, e: e, res: res}
	s := o.sizes
	var stores []string // those of o.stores this run serves
	for _, st := range o.stores {
		if need[st] {
			stores = append(stores, st)
		}
	}
	for _, fig := range o.figures {
		res.FigureLoad = append(res.FigureLoad, figureLoad{fig, strings.Fields(loadAverage())[0]})
		switch fig {
		case figUncontended, figHandOver, figContended, figFailover:
			m.figure(ctx, fig, fig, e, res, libs, stores, s)
		case figNetwork:
			m.network(ctx, e, res, libs, stores, s)
		case figLostLock:
			m.lostLocks(ctx, e, res, libs, stores, s)
		case figHolds:
			m.holds(ctx, e, res, stores, s)
		case figScale:
			for _, st := range []string{storeMemory, storeRedis} {
				if !slices.Contains(o.stores, st) {
					continue
				}
				// One-time costs of the first contenders in the process (timers, pools)
				// are not a cost per contender: an unrecorded round first.
				m.do(fig, st+"-warm-up", func() error {
					_, err := measureScale(ctx, e, scalePlan{store: st, n: max(s.ScaleN/10, 1), ttl: s.ScaleTTL})
					return err
				})
				for _, n := range s.CurveN {
					m.do(fig, fmt.Sprintf("%s-%d", st, n), func() error {
						r, err := measureScale(ctx, e, scalePlan{store: st, n: n, ttl: s.ScaleTTL, periods: 1})
						if err == nil {
							res.Curve = append(res.Curve, r)
							logf("  %s %d: heap %.2f KB, goroutines %.2f", st, n, r.HeapBytes/1024, r.Goroutines)
						}
						return err
					})
				}
				for _, lead := range []time.Duration{0, s.ScaleTTL / 20} {
					periodLen := s.ScaleTTL - lead
					if lead == 0 {
						periodLen = s.ScaleTTL - s.ScaleTTL/3
					}
					plan := scalePlan{store: st, n: s.ScaleN, ttl: s.ScaleTTL, lead: lead, periods: wholePeriodsIn(s.ScaleFor, periodLen)}
					name := fmt.Sprintf("%s-lead-%v", st, lead)
					if o.profile != "" {
						plan.profile = filepath.Join(o.profile, "scale-"+name+".heap.pprof")
					}
					m.do(fig, name, func() error {
						r, err := measureScale(ctx, e, plan)
						if err == nil {
							res.Scale = append(res.Scale, r)
							logf("  %s lead %s: heap %.2f KB, %.0f calls/s (N/ttl %.0f), late %d", st, r.LeadLabel, r.HeapBytes/1024, r.OpsPerSecond, r.Ideal, r.Late)
						}
						return err
					})
				}
			}
			// Many held mutexes on the SQL stores: the store's load with simba's
			// default lead (the heap curve and the other lead are memory's and Redis's).
			for _, st := range []string{storeSQL, storePostgres} {
				if !slices.Contains(o.stores, st) {
					continue
				}
				period := s.ScaleTTL - s.ScaleTTL/3
				plan := scalePlan{store: st, n: s.ScaleN, ttl: s.ScaleTTL, periods: wholePeriodsIn(s.HeldFor, period)}
				m.do(fig, st+"-held", func() error {
					r, err := measureScale(ctx, e, plan)
					if err == nil {
						res.Held = append(res.Held, r)
						logf("  %s: %.0f calls/s (N/ttl %.0f), %v per period, %d connections, late %d", st, r.OpsPerSecond, r.Ideal, r.PerPeriod, r.Connections, r.Late)
						for cause, n := range r.LateCauses {
							logf("    %d late: %s", n, cause)
						}
					}
					return err
				})
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	res.Machine.LoadEnd = loadAverage()
	res.Took = time.Since(began)
	if err := publish(res, o); err != nil {
		return err
	}
	if len(res.Failures) > 0 {
		return fmt.Errorf("%d measurements failed (see the results)", len(res.Failures))
	}
	return nil
}

// publish writes the results and the plots, prints the results and updates the README.
func publish(res *results, o options) error {
	written, err := res.write(o.results)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	fmt.Println()
	fmt.Print(res.markdown(""))
	fmt.Println()
	for _, w := range written {
		logf("wrote %s", w)
	}
	if o.readme != "" {
		if err := res.updateReadme(o.readme, o.results); err != nil {
			return fmt.Errorf("update %s: %w", o.readme, err)
		}
		logf("updated %s", o.readme)
	}
	return nil
}

// measurer runs the measurements of a run one after the other, profiling each when asked,
// and records failures without stopping the run.
type measurer struct {
	o   options
	e   *env
	res *results
}

func (m *measurer) do(figure, name string, f func() error) {
	logf("%s: %s", figure, name)
	stop := func() {}
	if m.o.profile != "" && figure != figScale {
		stop = m.cpuProfile(figure + "-" + name)
	}
	err := f()
	stop()
	if err != nil {
		logf("  failed: %v", err)
		m.res.Failures = append(m.res.Failures, fmt.Sprintf("%s %s: %v", figure, name, err))
	}
}

func (m *measurer) cpuProfile(name string) func() {
	if err := os.MkdirAll(m.o.profile, 0o755); err != nil {
		logf("profile: %v", err)
		return func() {}
	}
	f, err := os.Create(filepath.Join(m.o.profile, name+".cpu.pprof"))
	if err != nil {
		logf("profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		logf("profile: %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// figure measures one figure of the side-by-side comparison (uncontended, hand-over,
// contended, failover) on the stores through e, into res; name labels it in the log.
func (m *measurer) figure(ctx context.Context, fig, name string, e *env, res *results, libs []library, stores []string, s runSettings) {
	switch fig {
	case figUncontended:
		for _, st := range stores {
			m.do(name, st, func() error { return uncontendedOn(ctx, e, res, st, libsOn(libs, st), s) })
		}
	case figHandOver:
		for _, st := range stores {
			m.do(name, st, func() error { return handOversOn(ctx, e, res, libsOn(libs, st), s) })
		}
	case figContended:
		for _, l := range libs {
			if !slices.Contains(stores, l.store) {
				continue
			}
			m.do(name, l.id, func() error {
				c, err := measureContended(ctx, e, l, s.Clients, s.ContendWarm, s.ContendWindow)
				if err == nil {
					res.Contended = append(res.Contended, c)
					logf("  %-16s %.0f/s fairness %.2f overlaps %d", l.id, c.PerSecond, c.Fairness, c.Overlaps)
				}
				return err
			})
		}
	case figFailover:
		for _, l := range libs {
			if !slices.Contains(stores, l.store) {
				continue
			}
			m.do(name, l.id, func() error {
				f, err := measureFailover(ctx, e, l, s.Failovers)
				if len(f.Takeovers) > 0 {
					res.Failover = append(res.Failover, f)
					logf("  %-16s median %s max %s (bound %s)", l.id, ms(f.Takeovers.quantile(0.5)), ms(f.Takeovers.max()), ms(f.Bound))
				}
				return err
			})
		}
	}
}

// network measures the figures again with a delay proxy in front of every store but
// memory, into res.Network, with the smaller samples of s.Network.
func (m *measurer) network(ctx context.Context, e *env, res *results, libs []library, stores []string, s runSettings) {
	ns := s.network()
	res.Network = &results{Settings: ns}
	var far []string
	for _, st := range stores {
		if st != storeMemory {
			far = append(far, st)
		}
	}
	ep, closeProxies, err := delayProxies(e.endpoints, far, ns.Delay)
	if err != nil {
		m.do(figNetwork, "proxies", func() error { return err })
		return
	}
	defer closeProxies()
	ne := e.via(ep)
	for _, fig := range []string{figUncontended, figHandOver, figContended, figFailover} {
		if ctx.Err() != nil {
			return
		}
		m.figure(ctx, fig, figNetwork+"-"+fig, ne, res.Network, libs, far, ns)
	}
}

// logf prints progress to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// libsOn returns the libraries of store.
func libsOn(libs []library, store string) []library {
	var out []library
	for _, l := range libs {
		if l.store == store {
			out = append(out, l)
		}
	}
	return out
}

// uncontendedOn measures the floors of store and the uncontended cycles of its libraries,
// taking turns in blocks of 100.
func uncontendedOn(ctx context.Context, e *env, res *results, store string, libs []library, s runSettings) error {
	type entry struct {
		floor    bool
		name, id string
	}
	var (
		turns   []*turn
		entries []entry
		errs    []error
	)
	defer func() {
		for _, t := range turns {
			t.s.close()
		}
	}()
	if store != storeMemory {
		name, f, err := newFloor(ctx, e, store)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		turns, entries = append(turns, &turn{name: "floor-" + store, s: f}), append(entries, entry{true, "floor: " + name, "floor-" + store})
		if store == storeSQL || store == storePostgres {
			w, err := newWriteFloor(ctx, e, store)
			if err != nil {
				return err
			}
			id := "floor-" + store + "-write"
			turns, entries = append(turns, &turn{name: id, s: w}), append(entries, entry{true, "floor: UPDATE (commit)", id})
		}
	}
	for _, l := range libs {
		c, err := newCycler(ctx, e, l)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.id, err))
			continue
		}
		turns, entries = append(turns, &turn{name: l.id, s: c}), append(entries, entry{false, l.name, l.id})
	}
	interleave(ctx, turns, s.CycleWarm, s.Cycles, 100)
	for i, t := range turns {
		if t.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, t.err))
			continue
		}
		r, err := cycleTurnResult(ctx, e, store, entries[i].name, entries[i].id, t, s.CountCycles)
		if err != nil {
			errs = append(errs, err)
		}
		if entries[i].floor {
			res.Floors = append(res.Floors, r)
		} else {
			res.Uncontended = append(res.Uncontended, r)
		}
		logf("  %-16s p50 %s p99 %s %.0f/s", t.name, ms(r.P50), ms(r.P99), r.PerSecond)
	}
	return errors.Join(errs...)
}

// cycleTurnResult summarises the cycles of t and, when it is a cycler, counts the
// store's work per cycle over count more cycles.
func cycleTurnResult(ctx context.Context, e *env, store, name, id string, t *turn, count int) (cycleResult, error) {
	r := cycleResultOf(store, name, id, t.times)
	y, ok := t.s.(*cycler)
	if !ok || count <= 0 {
		return r, nil
	}
	per, err := y.countCycles(ctx, e, store, count)
	if per != nil {
		r.Counted, r.PerCycle = count, per
	}
	if err != nil {
		return r, fmt.Errorf("%s: count: %w", t.name, err)
	}
	return r, nil
}

// handOversOn measures the hand-overs of the libraries of one store, taking turns in
// blocks of 10.
func handOversOn(ctx context.Context, e *env, res *results, libs []library, s runSettings) error {
	var (
		turns []*turn
		hs    []*handOver
		errs  []error
	)
	defer func() {
		for _, t := range turns {
			t.s.close()
		}
	}()
	for _, l := range libs {
		h, err := newHandOver(ctx, e, l)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.id, err))
			continue
		}
		turns, hs = append(turns, &turn{name: l.id, s: h}), append(hs, h)
	}
	interleave(ctx, turns, s.HandOverWarm, s.HandOvers, 10)
	for i, t := range turns {
		if t.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, t.err))
			continue
		}
		h := hs[i]
		res.HandOver = append(res.HandOver, handOverResult{
			Store: h.lib.store, Library: h.lib.name, ID: h.lib.id, Samples: len(t.times),
			P50: t.times.quantile(0.5), P99: t.times.quantile(0.99), Max: t.times.max(),
			Hold: h.hold, GiveUps: h.giveUps(), Times: t.times,
		})
		logf("  %-16s p50 %s p99 %s", t.name, ms(t.times.quantile(0.5)), ms(t.times.quantile(0.99)))
	}
	return errors.Join(errs...)
}
