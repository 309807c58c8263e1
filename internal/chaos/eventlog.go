// Package chaos is simba's fault suite: contenders as separate processes, fault proxies,
// store faults, a fenced referee, and a checker of the safety contract over the
// recorded history. The fault plan is the numbered list of scenarios that the
// scenarios*_test.go files register, each with the stores it runs on.
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// Kind names an event.
type Kind string

// Event kinds. Contenders log the lifecycle and callbacks; the referee logs writes; the
// harness logs faults.
const (
	KindStart      Kind = "start"       // Start called
	KindStarted    Kind = "started"     // Start returned (Note: error, if any)
	KindAcquired   Kind = "acquired"    // OnAcquired began (Token; Note: NoteEndedBeforeDelivery, if so)
	KindReleased   Kind = "released"    // OnReleased returned (Token of the tenure)
	KindStop       Kind = "stop"        // Stop called
	KindStopped    Kind = "stopped"     // Stop returned (Note: error, if any)
	KindWriteOK    Kind = "write_ok"    // the referee accepted a write (Token, Seq)
	KindWriteStale Kind = "write_stale" // the referee rejected a write (Token, Seq)
	KindIncrement  Kind = "increment"   // a contender incremented the shadow counter
	KindFaultBegin Kind = "fault_begin" // the harness injected a fault (Note: what)
	KindFaultEnd   Kind = "fault_end"   // the harness healed it
	KindKilled     Kind = "killed"      // the harness killed the process (Proc: whom)
	KindError      Kind = "error"       // something the checker must report (Note)
	KindRetry      Kind = "retry"       // a failed start-up that the contender retries (Note)
	KindLost       Kind = "lost"        // the tenure context ended (Token)
	KindWork       Kind = "work"        // a writer checked its context and works before writing
	KindAcquire    Kind = "acquire"     // a hold's Acquire was called (Mode, Deadline)
	KindYield      Kind = "yield"       // Yield called
	KindYielded    Kind = "yielded"     // Yield returned (Note: error, if any)
	KindHandOff    Kind = "handoff"     // HandOff called (Note: to whom)
	KindHandedOff  Kind = "handed_off"  // HandOff returned (Note: error, if any)
	KindSlotRun    Kind = "slot_run"    // a Scheduler's run began (Token; Note: the slot's Unix ns)
)

// NoteEndedBeforeDelivery marks a KindAcquired whose tenure context had ended when
// OnAcquired began: the tenure ended while the callback waited its turn, nobody in the
// process believed, and the checker counts it for alternation only.
const NoteEndedBeforeDelivery = "ended before delivery"

// Event is one line of a log.
type Event struct {
	At    int64  `json:"t"` // CLOCK_MONOTONIC in ns: comparable across processes of one host
	Proc  string `json:"p"` // who: a contender ID, "referee" or "harness"
	Kind  Kind   `json:"k"`
	Token uint64 `json:"tok,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	Note  string `json:"n,omitempty"`
	// Mode is a hold's (see HoldModel): "p" a semaphore's permit, "s" a read hold, "x" a
	// write hold; empty for a mutex.
	Mode string `json:"m,omitempty"`
	// Deadline is the deadline of an Acquire (KindAcquire), on the clock of At.
	Deadline int64 `json:"dl,omitempty"`
}

// Now reads CLOCK_MONOTONIC. Go does not export its own monotonic reading, and this clock
// is the same for every process of the host, so events of several processes order.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux with a valid clock ID
	}
	return ts.Nano()
}

// Log appends events to a file, one JSON line per write(2), so that what was written
// survives the process being killed.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	proc string
}

// CreateLog opens (appending) the log at path for events of proc.
func CreateLog(path, proc string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Log{f: f, proc: proc}, nil
}

// Acquired logs the beginning of a tenure whose context is ctx (KindAcquired, marked
// NoteEndedBeforeDelivery when ctx has ended already) and, when ctx ends, its end
// (KindLost, with the cause: the logs a failed scenario keeps say why belief ended).
func (l *Log) Acquired(ctx context.Context, token uint64) {
	note := ""
	if ctx.Err() != nil {
		note = NoteEndedBeforeDelivery
	}
	l.Add(KindAcquired, token, 0, note)
	context.AfterFunc(ctx, func() { l.Add(KindLost, token, 0, context.Cause(ctx).Error()) })
}

// Add records an event now and returns its time.
func (l *Log) Add(kind Kind, token, seq uint64, note string) int64 {
	e := Event{At: Now(), Proc: l.proc, Kind: kind, Token: token, Seq: seq, Note: note}
	l.Put(e)
	return e.At
}

// Put records an event as given (another Proc, a chosen time).
func (l *Log) Put(e Event) {
	line, err := json.Marshal(e)
	if err != nil {
		panic(err) // Event always marshals
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(line, '\n'))
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// ReadLogs reads and merges logs, ordered by time. A torn last line (a process killed in
// the middle of a write) is skipped.
func ReadLogs(paths ...string) ([]Event, error) {
	var all []Event
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				continue
			}
			all = append(all, e)
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].At < all[j].At })
	return all, nil
}
