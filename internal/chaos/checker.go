package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Interval is one belief interval of a contender: from the moment OnAcquired began to the
// moment OnReleased returned, or to the kill of its process (a paused process's interval
// goes on through the pause).
type Interval struct {
	Proc     string
	Token    uint64
	From, To int64  // CLOCK_MONOTONIC ns
	Killed   bool   // ended by the kill of its process
	Open     bool   // had not ended when the history ended
	Mode     string // a hold's mode (modePermit, modeRead, modeWrite); empty for a mutex
	Call     int64  // when the hold's Acquire was called; zero for a mutex
}

// Overlap is the time two contenders both believed they owned the mutex.
type Overlap struct {
	A, B     Interval
	Duration time.Duration
}

// Options are what a scenario tells the checker.
type Options struct {
	// Epsilon is the scheduling slack tolerated in time comparisons.
	Epsilon time.Duration
	// OutOfModel marks scenarios whose faults exceed what leases can handle (long pauses,
	// data loss): overlaps are measured, not forbidden, and fencing carries the weight.
	OutOfModel bool
	// Shadow is the final value of the shadow counter, if the scenario used it.
	Shadow *int64
	// OnContext ends a belief interval when the tenure context ended rather than when
	// OnReleased returned: exclusion measured on ownership, for callbacks that block.
	OnContext bool
	// Hold, for a semaphore's or read-write lock's holders, checks capacity rather than
	// exclusion (see checkCapacity) and the fence of the holds (holdFence).
	Hold *HoldModel
	// WakeBound, if set, bounds how long a holder may wait while capacity is free in
	// belief (C6): a hold that ended still keeps its permit in the store until it lapses
	// if it was not released, so the bound is a failover bound.
	WakeBound time.Duration
}

// Findings are what the checker found over one history.
type Findings struct {
	Tenures             int
	Intervals           []Interval
	Alternation         []string  // C1
	Overlaps            []Overlap // C2
	MaxOverlap          time.Duration
	Tokens              []string // C3
	TokenRegressions    int
	Referee             []string // C4
	WritesAccepted      int
	WritesRejected      int
	Increments          int
	ShadowLost          int64
	Stops               []string        // C7
	StopDurations       []time.Duration // C7
	LockLinearizable    bool            // C10, over the belief intervals
	RefereeLinearizable bool            // C10, over the referee's writes
	Residue             []string        // C8: what the store still held after every contender stopped
	Errors              []string
	Crowds              []string // C2 for holds: more believed holders than the capacity
	Deadlines           []string // C9: an Acquire that returned after its deadline
	FreeWaits           []string // C6: a waiter asleep beside free capacity
	MaxFreeWait         time.Duration
}

// Check runs C1, C2, C3, C4, C7 and C10 over the events of one mutex.
func Check(events []Event, o Options) Findings {
	var f Findings
	end := int64(0)
	if len(events) > 0 {
		end = events[len(events)-1].At
	}
	// A holder's belief ends when it stops acting (KindReleased), after the act it had
	// begun when its lease ended, as a mutex owner's OnReleased waits for its writer.
	f.Intervals = intervals(events, end, o.OnContext, &f)
	if o.Hold != nil {
		f.checkCapacity(*o.Hold, o)
		f.checkHoldTokens()
		f.checkHoldFence(events, *o.Hold)
		f.checkDeadlines(events, o)
		f.checkFreeWaits(events, *o.Hold, o)
		f.LockLinearizable = holdLinearizable(f.Intervals, *o.Hold, o.Epsilon)
		// The referee's holds are judged by checkHoldFence, which replays their fence.
		f.RefereeLinearizable = true
	} else {
		f.checkOverlaps(o)
		f.checkTokens()
		f.checkMutexFence(events)
		f.LockLinearizable = lockLinearizable(f.Intervals, o.Epsilon)
		f.RefereeLinearizable = refereeLinearizable(events)
	}
	f.checkReferee(events, o)
	f.checkStops(events)
	for _, e := range events {
		if e.Kind == KindError {
			f.Errors = append(f.Errors, e.Proc+": "+e.Note)
		}
	}
	return f
}

// Violations lists what breaks the contract, by assertion.
func (f Findings) Violations(o Options) []string {
	var v []string
	add := func(tag string, list []string) {
		for _, s := range list {
			v = append(v, tag+": "+s)
		}
	}
	add("C1 alternation", f.Alternation)
	if !o.OutOfModel {
		for _, ov := range f.Overlaps {
			v = append(v, fmt.Sprintf("C2 exclusion: %s (token %d) and %s (token %d) both believed for %v",
				ov.A.Proc, ov.A.Token, ov.B.Proc, ov.B.Token, ov.Duration))
		}
		// Overlapping read-pause-write increments leave the counter short: a loss is
		// positive. A counter one ahead is a contender killed (SIGKILL) between its
		// increment and the log line that records it, no loss.
		if f.ShadowLost > 0 {
			v = append(v, fmt.Sprintf("C4 shadow counter lost %d increments in an in-model scenario", f.ShadowLost))
		}
		if !f.LockLinearizable {
			v = append(v, "C10 the lock history is not linearizable")
		}
		add("C2 capacity", f.Crowds)
		add("C9 deadline", f.Deadlines)
		add("C6 wake-up", f.FreeWaits)
	}
	add("C3 tokens", f.Tokens)
	add("C4 referee", f.Referee)
	add("C7 stop", f.Stops)
	if !f.RefereeLinearizable {
		v = append(v, "C10 the referee history is not linearizable against a fenced register")
	}
	add("error", f.Errors)
	return v
}

// intervals pairs acquired and released events per process and checks alternation (C1).
// A tenure that had ended before its OnAcquired began (NoteEndedBeforeDelivery) is no
// belief: it is paired, and left out of the intervals.
func intervals(events []Event, end int64, onContext bool, f *Findings) []Interval {
	type state struct {
		open    *Interval
		late    bool  // open ended before its OnAcquired was delivered
		call    int64 // when the last Acquire of a hold was called
		lostAt  int64 // when the open interval's tenure context ended
		stopped bool  // between Stop returning and the next Start
	}
	procs := map[string]*state{}
	var out []Interval
	keep := func(s *state) {
		if !s.late {
			out = append(out, *s.open)
		}
		s.open = nil
	}
	get := func(p string) *state {
		s := procs[p]
		if s == nil {
			s = &state{}
			procs[p] = s
		}
		return s
	}
	for _, e := range events {
		switch e.Kind {
		case KindStart:
			get(e.Proc).stopped = false
		case KindAcquire:
			get(e.Proc).call = e.At
		case KindStopped:
			s := get(e.Proc)
			if s.open != nil {
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: Stop returned before OnReleased (token %d)", e.Proc, s.open.Token))
			}
			s.stopped = true
		case KindAcquired:
			s := get(e.Proc)
			switch {
			case s.stopped:
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: OnAcquired after Stop returned", e.Proc))
			case s.open != nil:
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: OnAcquired twice without OnReleased", e.Proc))
				continue
			}
			if e.Token == 0 {
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: OnAcquired without a fencing token", e.Proc))
			}
			s.open, s.lostAt = &Interval{Proc: e.Proc, Token: e.Token, From: e.At, Mode: e.Mode, Call: s.call}, 0
			s.late = e.Note == NoteEndedBeforeDelivery
		case KindLost:
			if s := get(e.Proc); s.open != nil && s.lostAt == 0 {
				s.lostAt = e.At
			}
		case KindReleased:
			s := get(e.Proc)
			if s.stopped {
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: OnReleased after Stop returned", e.Proc))
			}
			if s.open == nil {
				f.Alternation = append(f.Alternation, fmt.Sprintf("%s: OnReleased without OnAcquired", e.Proc))
				continue
			}
			s.open.To = e.At
			if onContext && s.lostAt != 0 {
				s.open.To = s.lostAt
			}
			keep(s)
		case KindKilled:
			s := get(e.Proc)
			if s.open != nil {
				s.open.To, s.open.Killed = e.At, true
				keep(s)
			}
			s.stopped = false
		}
	}
	for _, s := range procs {
		if s.open != nil {
			s.open.To, s.open.Open = end, true
			keep(s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// checkOverlaps measures belief overlaps between different contenders (C2).
func (f *Findings) checkOverlaps(o Options) {
	iv := f.Intervals
	for i := range iv {
		for j := i + 1; j < len(iv) && iv[j].From < iv[i].To; j++ {
			if iv[i].Proc == iv[j].Proc {
				continue
			}
			d := time.Duration(min(iv[i].To, iv[j].To) - iv[j].From)
			f.MaxOverlap = max(f.MaxOverlap, d)
			if d > o.Epsilon {
				f.Overlaps = append(f.Overlaps, Overlap{A: iv[i], B: iv[j], Duration: d})
			}
		}
	}
}

// checkTokens checks that tokens strictly increase from tenure to tenure in the order the
// tenures began (C3). Consecutive intervals of one contender with one token are one
// tenure (belief lost and regained while the store kept the tenure).
func (f *Findings) checkTokens() {
	var last *Interval
	for i := range f.Intervals {
		in := &f.Intervals[i]
		if last != nil && in.Proc == last.Proc && in.Token == last.Token {
			last = in
			continue
		}
		f.Tenures++
		if last != nil && in.Token <= last.Token {
			f.TokenRegressions++
			f.Tokens = append(f.Tokens, fmt.Sprintf("%s acquired with token %d after %s had %d", in.Proc, in.Token, last.Proc, last.Token))
		}
		last = in
	}
}

// checkMutexFence checks that a tenure's write after the first accepted write of a later
// tenure was rejected (C4).
func (f *Findings) checkMutexFence(events []Event) {
	firstOK := map[uint64]int64{} // token -> first accepted write
	var tokens []uint64
	for _, e := range events {
		if _, ok := firstOK[e.Token]; e.Kind == KindWriteOK && !ok {
			firstOK[e.Token] = e.At
			tokens = append(tokens, e.Token)
		}
	}
	sort.Slice(tokens, func(i, j int) bool { return tokens[i] < tokens[j] })
	for _, e := range events {
		if e.Kind != KindWriteOK {
			continue
		}
		// A later tenure (greater token) had written already: this write is stale.
		i := sort.Search(len(tokens), func(i int) bool { return tokens[i] > e.Token })
		for _, t := range tokens[i:] {
			if firstOK[t] < e.At {
				f.Referee = append(f.Referee, fmt.Sprintf("%s wrote with token %d after token %d had written: a stale write was accepted", e.Proc, e.Token, t))
				break
			}
		}
	}
}

// checkReferee checks the referee's accepted writes (C4): in-model, every accepted write
// lies within its writer's belief, with the token of that belief. It also counts the
// writes and the shadow counter's losses.
func (f *Findings) checkReferee(events []Event, o Options) {
	for _, e := range events {
		switch e.Kind {
		case KindWriteOK:
			f.WritesAccepted++
		case KindWriteStale:
			f.WritesRejected++
		case KindIncrement:
			f.Increments++
		}
	}
	for _, e := range events {
		if e.Kind != KindWriteOK {
			continue
		}
		in, ok := f.covering(e, o.Epsilon)
		switch {
		case ok && in.Token != e.Token:
			f.Tokens = append(f.Tokens, fmt.Sprintf("%s wrote with token %d within its tenure of token %d: the token changed within a tenure", e.Proc, e.Token, in.Token))
		case !ok && !o.OutOfModel:
			f.Referee = append(f.Referee, fmt.Sprintf("%s wrote with token %d outside its belief", e.Proc, e.Token))
		}
	}
	if o.Shadow != nil {
		f.ShadowLost = int64(f.Increments) - *o.Shadow
	}
}

// covering returns the belief interval of the writer of e that covers its time, if any.
func (f *Findings) covering(e Event, eps time.Duration) (Interval, bool) {
	for _, in := range f.Intervals {
		if in.Proc == e.Proc && e.At >= in.From-int64(eps) && e.At <= in.To+int64(eps) {
			return in, true
		}
	}
	return Interval{}, false
}

// checkStops checks that Stop delivered OnReleased before it returned (checked with
// alternation) and records how long each Stop took (C7).
func (f *Findings) checkStops(events []Event) {
	began := map[string]int64{}
	for _, e := range events {
		switch e.Kind {
		case KindStop:
			began[e.Proc] = e.At
		case KindStopped:
			if b, ok := began[e.Proc]; ok {
				f.StopDurations = append(f.StopDurations, time.Duration(e.At-b))
				delete(began, e.Proc)
			}
		case KindKilled:
			delete(began, e.Proc)
		}
	}
}

// lockLinearizable checks the belief intervals against a mutex model (Jepsen's lock
// workload): an acquisition when free, a release by the holder.
func lockLinearizable(iv []Interval, eps time.Duration) bool {
	type input struct {
		proc    string
		acquire bool
	}
	var ops []porcupine.Operation
	clients := map[string]int{}
	for _, in := range iv {
		id, ok := clients[in.Proc]
		if !ok {
			id = len(clients)
			clients[in.Proc] = id
		}
		// The acquisition took effect no later than OnAcquired began and the release no
		// earlier than OnReleased returned; epsilon widens both for scheduling slack.
		ops = append(ops,
			porcupine.Operation{ClientId: id, Input: input{in.Proc, true}, Call: in.From, Return: in.From + int64(eps)},
			porcupine.Operation{ClientId: id, Input: input{in.Proc, false}, Call: in.To - int64(eps), Return: in.To})
	}
	model := porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, in, _ any) (bool, any) {
			holder, op := state.(string), in.(input)
			if op.acquire {
				return holder == "", op.proc
			}
			return holder == op.proc, ""
		},
		DescribeOperation: func(in, _ any) string {
			op := in.(input)
			if op.acquire {
				return op.proc + " acquires"
			}
			return op.proc + " releases"
		},
	}
	return porcupine.CheckOperationsTimeout(model, ops, time.Minute) != porcupine.Illegal
}

// refereeLinearizable checks the referee's writes against a fenced register: a write is
// accepted exactly when its token is at least the highest accepted so far.
func refereeLinearizable(events []Event) bool {
	var ops []porcupine.Operation
	for _, e := range events {
		if e.Kind != KindWriteOK && e.Kind != KindWriteStale {
			continue
		}
		ops = append(ops, porcupine.Operation{Input: e.Token, Output: e.Kind == KindWriteOK, Call: e.At, Return: e.At})
	}
	model := porcupine.Model{
		Init: func() any { return uint64(0) },
		Step: func(state, in, out any) (bool, any) {
			high, tok, ok := state.(uint64), in.(uint64), out.(bool)
			if tok >= high {
				return ok, tok
			}
			return !ok, high
		},
	}
	return porcupine.CheckOperationsTimeout(model, ops, time.Minute) != porcupine.Illegal
}

// FirstAcquiredAfter returns the first OnAcquired after t by a contender other than
// except, for failover times (C6).
func FirstAcquiredAfter(events []Event, t int64, except string) (Event, bool) {
	for _, e := range events {
		if e.At > t && e.Kind == KindAcquired && e.Proc != except {
			return e, true
		}
	}
	return Event{}, false
}

// ReleasedAfter returns proc's first OnReleased after t, for loss detection times (C5).
func ReleasedAfter(events []Event, t int64, proc string) (Event, bool) {
	for _, e := range events {
		if e.At > t && e.Kind == KindReleased && e.Proc == proc {
			return e, true
		}
	}
	return Event{}, false
}

// Summary is a one-line description of findings for logs.
func (f Findings) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tenures, max overlap %v, writes %d accepted / %d rejected, %d increments (%d lost)",
		f.Tenures, f.MaxOverlap, f.WritesAccepted, f.WritesRejected, f.Increments, f.ShadowLost)
	return b.String()
}
