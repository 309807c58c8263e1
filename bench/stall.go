package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A store that stalls (every statement slow at once) shows in the held-mutex runs as
// owners that lost their lease. stallWatch samples PostgreSQL meanwhile, every 100 ms:
// what its active sessions wait for, how long a plain SELECT takes to answer, how busy
// the machine's disks are, and the backend's connection pool; the run logs the seconds
// that look stalled, so that the cause (the WAL's flushes, a checkpoint, the machine, the
// pool) can be told from the backend's doing.

// stallSample is one look at the store.
type stallSample struct {
	at     time.Time
	answer time.Duration  // the sampling SELECT's round trip
	waits  map[string]int // active client sessions by wait event ("CPU" when none)
	diskMS int64          // the disks' milliseconds doing I/O since boot (/proc/diskstats)
	pool   sql.DBStats    // the backend's pool
}

// stallWatch samples until stopped.
type stallWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []stallSample
	ckpt0   [3]int64 // checkpoints, write ms, sync ms (pg_stat_bgwriter) at the start
	ckptOK  bool     // ckpt0 was read
	pool    *sql.DB
}

const pgCheckpoints = "SELECT checkpoints_timed + checkpoints_req, checkpoint_write_time::bigint, checkpoint_sync_time::bigint FROM pg_stat_bgwriter"

// watchStalls starts sampling the store, and pool, the backend's connection pool, when
// the store is PostgreSQL; it returns nil otherwise.
func watchStalls(ctx context.Context, e *env, store string, pool *sql.DB) *stallWatch {
	if store != storePostgres || e.pg == nil || pool == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &stallWatch{cancel: cancel, done: make(chan struct{}), pool: pool}
	w.ckptOK = e.pg.QueryRowContext(ctx, pgCheckpoints).Scan(&w.ckpt0[0], &w.ckpt0[1], &w.ckpt0[2]) == nil
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if s, ok := w.sample(ctx, e); ok {
				w.mu.Lock()
				w.samples = append(w.samples, s)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// end ends the sampling; it may be called more than once.
func (w *stallWatch) end() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

func (w *stallWatch) sample(ctx context.Context, e *env) (stallSample, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := stallSample{at: time.Now(), waits: map[string]int{}, diskMS: diskBusyMS(), pool: w.pool.Stats()}
	rows, err := e.pg.QueryContext(ctx, "SELECT COALESCE(wait_event_type || ':' || wait_event, 'CPU'), count(*) FROM pg_stat_activity "+
		"WHERE datname = current_database() AND backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid() GROUP BY 1")
	if err != nil {
		return s, false
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if rows.Scan(&k, &n) == nil {
			s.waits[k] = n
		}
	}
	s.answer = time.Since(s.at)
	return s, rows.Err() == nil
}

// stop ends the sampling and, when late is not zero, logs the seconds in which the
// sampling SELECT took over 200 ms or ten sessions or more were active, and the
// checkpoints the server made meanwhile.
func (w *stallWatch) stop(ctx context.Context, e *env, late int) {
	if w == nil {
		return
	}
	w.end()
	if late == 0 {
		return
	}
	var ckpt [3]int64
	if err := e.pg.QueryRowContext(ctx, pgCheckpoints).Scan(&ckpt[0], &ckpt[1], &ckpt[2]); err == nil && w.ckptOK {
		logf("    postgres checkpoints meanwhile: %d (write %d ms, sync %d ms)", ckpt[0]-w.ckpt0[0], ckpt[1]-w.ckpt0[1], ckpt[2]-w.ckpt0[2])
	}
	type second struct {
		answer        time.Duration
		active, disks int64
		waits         map[string]int
		inUse         int           // the pool's connections in use, at most
		poolWaits     int64         // waits for a pool connection begun
		poolWaited    time.Duration // and the time they waited
	}
	var (
		order []int64
		secs  = map[int64]*second{}
	)
	for i, s := range w.samples {
		k := s.at.Unix()
		sec := secs[k]
		if sec == nil {
			sec = &second{waits: map[string]int{}}
			secs[k] = sec
			order = append(order, k)
		}
		sec.answer = max(sec.answer, s.answer)
		n := 0
		for ev, c := range s.waits {
			sec.waits[ev] += c
			n += c
		}
		sec.active = max(sec.active, int64(n))
		sec.inUse = max(sec.inUse, s.pool.InUse)
		if i > 0 {
			prev := w.samples[i-1]
			sec.disks += s.diskMS - prev.diskMS
			sec.poolWaits += s.pool.WaitCount - prev.pool.WaitCount
			sec.poolWaited += s.pool.WaitDuration - prev.pool.WaitDuration
		}
	}
	for _, k := range order {
		sec := secs[k]
		if sec.answer < 200*time.Millisecond && sec.active < 10 && sec.poolWaited < time.Second {
			continue
		}
		evs := make([]string, 0, len(sec.waits))
		for ev := range sec.waits {
			evs = append(evs, ev)
		}
		sort.Slice(evs, func(i, j int) bool { return sec.waits[evs[i]] > sec.waits[evs[j]] })
		var top []string
		for _, ev := range evs[:min(len(evs), 4)] {
			top = append(top, fmt.Sprintf("%s %d", ev, sec.waits[ev]))
		}
		logf("    %s: SELECT answered in %v at worst, %d sessions active at most, disks busy %d ms; pool: %d in use at most, %d waits begun, %v waited; waits: %s",
			time.Unix(k, 0).UTC().Format("15:04:05"), sec.answer.Round(time.Millisecond), sec.active, sec.disks,
			sec.inUse, sec.poolWaits, sec.poolWaited.Round(time.Millisecond), strings.Join(top, ", "))
	}
}

// diskBusyMS sums the milliseconds the machine's whole disks (those in /sys/block) spent
// doing I/O since boot, or returns 0.
func diskBusyMS() int64 {
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 {
			continue
		}
		if _, err := os.Stat("/sys/block/" + f[2]); err != nil {
			continue // a partition
		}
		if ms, err := strconv.ParseInt(f[12], 10, 64); err == nil {
			total += ms
		}
	}
	return total
}
