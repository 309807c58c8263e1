package main

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Markers of the README's holds tables, apart from the mutex figures' section: a run of
// the holds figure alone replaces these and leaves that section alone.
const (
	holdsBegin = "<!-- bench-holds:begin -->"
	holdsEnd   = "<!-- bench-holds:end -->"
	// holdsDir is where, under the results directory, a run of the holds figure alone
	// writes its files, apart from the full run's.
	holdsDir = "holds"
)

// hasMutexFigures reports whether the run measured any figure but holds.
func (r *results) hasMutexFigures() bool {
	return len(r.Floors)+len(r.Uncontended)+len(r.HandOver)+len(r.Contended)+len(r.Failover)+
		len(r.Scale)+len(r.Curve)+len(r.LostLock)+len(r.Held) > 0 || r.Network != nil
}

// holdsOnly reports whether the run measured the holds figure alone.
func (r *results) holdsOnly() bool { return r.Holds != nil && !r.hasMutexFigures() }

// holdsMarkdown renders the holds figure for the README: the run, then the tables.
func (r *results) holdsMarkdown(links string) string {
	var b bytes.Buffer
	if r.Quick {
		fmt.Fprintf(&b, "> **Quick smoke run** (`-quick`): small samples and short windows. Not for comparison.\n\n")
	}
	r.writeMachine(&b)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\n- failed: %s", oneLine(f))
	}
	b.WriteString("\n")
	r.Holds.write(&b, "####", r.Settings)
	full := links + "/" + resultsFile
	if r.holdsOnly() {
		full = links + "/" + holdsDir + "/" + resultsFile
	}
	fmt.Fprintf(&b, "\nSettings of every library and the raw data: [%s](%s).\n", full, full)
	return b.String()
}

// holdPeers says, for each store, which peers there are.
var holdPeers = map[string]string{
	storeMemory:    "none: in-process only",
	storeRedis:     "none in Go: redsync and redislock keep mutexes only",
	storeSQL:       "none in Go: GET_LOCK is exclusive only, and keeps no count",
	storePostgres:  "semaphore: none in Go; read-write: PostgreSQL's shared advisory locks",
	storeZooKeeper: "none in Go: go-zookeeper's only recipe is zk.Lock (Curator's are Java)",
	storeEtcd:      "semaphore: none in Go (concurrency.Mutex is a mutex); read-write: etcd's client/v3/experimental/recipes RWMutex",
}

// write writes the holds tables under headings of level hd.
func (h *holdResults) write(b *bytes.Buffer, hd string, s runSettings) {
	fmt.Fprintf(b, "Semaphores of %d permits and read-write locks, every client with a backend (and connection, pool or session) of its own unless it says \"one backend\". Peers: %s.\n",
		h.Settings.Permits, "no Go library this bench reaches keeps a semaphore on Redis, MariaDB, PostgreSQL, ZooKeeper or etcd (redsync, redislock, go-zookeeper, GET_LOCK, pg_advisory_lock and etcd's concurrency.Mutex are mutexes); PostgreSQL's shared advisory locks and etcd's recipes' RWMutex (client/v3/experimental/recipes, whose RLock and Lock take no context) are read-write locks and are measured")
	if len(h.Cycles) > 0 {
		fmt.Fprintf(b, "\n%s Acquire + release, one client\n\n", hd)
		fmt.Fprintf(b, "A permit, a read hold and a write hold taken and released %d times after %d untimed cycles; simba's mutex (a Locker) on the same store to compare, the holds taking turns with it in blocks of 100. Store work per cycle over %d more cycles, as in the mutex figures.\n\n",
			s.Cycles, s.CycleWarm, s.CountCycles)
		b.WriteString("| store | library, hold | p50 | p99 | cycles/s | × mutex (p50) | store work / cycle |\n|---|---|---|---|---|---|---|\n")
		for _, store := range allStores {
			var mutex *cycleResult
			for i, c := range h.Cycles {
				if c.Store == store && c.ID == "simba-"+store+"/mutex" {
					mutex = &h.Cycles[i]
				}
			}
			rows := 0
			for _, c := range h.Cycles {
				if c.Store != store {
					continue
				}
				rows++
				ratio := "–"
				if mutex != nil && mutex.P50 > 0 && isSimba(c.ID) {
					ratio = fmt.Sprintf("%.2f", float64(c.P50)/float64(mutex.P50))
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %.0f | %s | %s |\n", storeTitle(store), bold(c.Library, c.ID), ms(c.P50), ms(c.P99), c.PerSecond, ratio, storeWork(store, c.PerCycle))
			}
			if rows > 0 {
				fmt.Fprintf(b, "| %s | *peer: %s* | | | | | |\n", storeTitle(store), holdPeers[store])
			}
		}
	}
	if len(h.HandOver) > 0 {
		fmt.Fprintf(b, "\n%s Hand-over of a permit\n\n", hd)
		fmt.Fprintf(b, "%d clients hold the %d permits and one more waits; once the store shows it waiting (a lease store answered its attempt with no room; on ZooKeeper its session watches a node of the semaphore), a holder, each in turn, releases after a random time below %v, and the time runs from that release call to the waiter's acquire returning; the releaser waits next. %d hand-overs after %d untimed. On MariaDB and PostgreSQL a release wakes the waiters of other backends (processes) too, by ending the statement each has parked on the server.\n\n",
			h.Settings.Permits, h.Settings.Permits, eventHold, s.HandOvers, s.HandOverWarm)
		b.WriteString("| store | library | samples | p50 | p99 | max |\n|---|---|---|---|---|---|\n")
		for _, store := range allStores {
			rows := 0
			for _, r := range h.HandOver {
				if r.Store == store {
					rows++
					fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", storeTitle(store), bold(r.Library, r.ID), r.Samples, ms(r.P50), ms(r.P99), ms(r.Max))
				}
			}
			if rows > 0 && store != storeMemory {
				fmt.Fprintf(b, "| %s | *peer: none in Go* | | | | |\n", storeTitle(store))
			}
		}
	}
	if len(h.Permits) > 0 {
		fmt.Fprintf(b, "\n%s %d clients on %d permits\n\n", hd, s.Clients, h.Settings.Permits)
		fmt.Fprintf(b, "%d clients loop acquire, an empty section, release on one semaphore of %d permits for %v after %v of warm-up. Fairness is the fewest sections of a client over the most; \"most inside\" the most clients seen between their acquire's return and their release call at once, a breach a client entering while all permits were held that way. Server ops per section from the store's counters, as in the mutex figures.\n\n",
			s.Clients, h.Settings.Permits, s.ContendWindow, s.ContendWarm)
		b.WriteString("| store | library | window | sections/s | per client (min–max) | fairness | most inside | breaches | errors | server ops / section |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, store := range allStores {
			rows := 0
			for _, r := range h.Permits {
				if r.Store == store {
					rows++
					writeHoldLoopRow(b, r, false)
				}
			}
			if rows > 0 && store != storeMemory {
				fmt.Fprintf(b, "| %s | *peer: none in Go* | | | | | | | | |\n", storeTitle(store))
			}
		}
	}
	if len(h.RW) > 0 {
		fmt.Fprintf(b, "\n%s Readers and writers\n\n", hd)
		fmt.Fprintf(b, "%d clients on one read-write lock, %d of them writing and the others reading, loop acquire, an empty section, release for %v after %v of warm-up. Fairness is among the readers; \"most inside\" the most readers at once; a breach a reader entering beside a writer or a writer beside anyone.\n\n",
			s.Clients, h.Settings.Writers, s.ContendWindow, s.ContendWarm)
		b.WriteString("| store | library | window | reads/s | writes/s | per reader (min–max) | fairness | most inside | breaches | errors | server ops / section |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, store := range allStores {
			rows, peers := 0, 0
			for _, r := range h.RW {
				if r.Store == store {
					rows++
					if !isSimba(r.ID) {
						peers++
					}
					writeHoldLoopRow(b, r, true)
				}
			}
			if rows > 0 && peers == 0 && store != storeMemory {
				fmt.Fprintf(b, "| %s | *peer: %s* | | | | | | | | | |\n", storeTitle(store), holdPeers[store])
			}
		}
	}
	fmt.Fprintf(b, "\n%s Settings of the holds' libraries\n\n| store | library | settings |\n|---|---|---|\n", hd)
	for _, l := range holdLibs() {
		fmt.Fprintf(b, "| %s | %s | %s |\n", storeTitle(l.store), l.name, l.settings)
	}
}

// writeHoldLoopRow writes one row of the permits (rw false) or read-write table.
func writeHoldLoopRow(b *bytes.Buffer, r holdLoopResult, rw bool) {
	var counted []int64
	for i, v := range r.PerClient {
		if !rw || i < r.Clients-r.Writers {
			counted = append(counted, v)
		}
	}
	spread := "–"
	if len(counted) > 0 {
		spread = fmt.Sprintf("%d–%d", slices.Min(counted), slices.Max(counted))
	}
	ops := "–"
	if r.ServerOpsPerSection > 0 {
		ops = fmt.Sprintf("%.1f", r.ServerOpsPerSection)
	}
	errs := fmt.Sprint(r.Errors)
	if r.FirstErr != "" {
		errs += " (" + oneLine(r.FirstErr) + ")"
	}
	window := r.Window.Round(100 * time.Millisecond)
	if rw {
		secs := r.Window.Seconds()
		fmt.Fprintf(b, "| %s | %s | %v | %s | %s | %s | %.2f | %d | %d | %s | %s |\n", storeTitle(r.Store), bold(r.Library, r.ID), window,
			rate(float64(r.Reads)/secs), rate(float64(r.Writes)/secs), spread, r.Fairness, r.MostInside, r.Breaches, errs, ops)
		return
	}
	fmt.Fprintf(b, "| %s | %s | %v | %s | %s | %.2f | %d | %d | %s | %s |\n", storeTitle(r.Store), bold(r.Library, r.ID), window,
		rate(r.PerSecond), spread, r.Fairness, r.MostInside, r.Breaches, errs, ops)
}

// rate formats a rate per second: two decimals below 10, none from 10 on.
func rate(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
