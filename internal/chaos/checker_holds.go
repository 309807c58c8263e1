package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker's parts for semaphores and read-write locks. A holder holds one hold at a
// time, so its belief intervals are its holds; several holders believe at once by design,
// and what is checked is the capacity: never more than N believed holders of a semaphore
// of N permits at once, never a writer beside anyone else.

// crowded reports whether holders of the modes in active exceed m's capacity.
func crowded(m HoldModel, active []Interval) bool {
	if m.Permits > 0 {
		return len(active) > m.Permits
	}
	return len(active) > 1 && slices.ContainsFunc(active, func(in Interval) bool { return exclusive(in.Mode) })
}

// checkCapacity measures the stretches in which the believed holders exceed the
// capacity (C2): the longest is MaxOverlap, and each longer than epsilon is a crowd.
func (f *Findings) checkCapacity(m HoldModel, o Options) {
	type edge struct {
		at    int64
		begin bool
		i     int
	}
	var edges []edge
	for i, in := range f.Intervals {
		edges = append(edges, edge{in.From, true, i}, edge{in.To, false, i})
	}
	// At one instant, ends go first: a hold given back as another is admitted is no crowd.
	sort.SliceStable(edges, func(a, b int) bool {
		if edges[a].at != edges[b].at {
			return edges[a].at < edges[b].at
		}
		return !edges[a].begin && edges[b].begin
	})
	active := map[int]bool{}
	list := func() []Interval {
		var out []Interval
		for i := range active {
			out = append(out, f.Intervals[i])
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Token < out[b].Token })
		return out
	}
	var since int64
	var crowd []Interval
	for _, e := range edges {
		before := crowd != nil
		if e.begin {
			active[e.i] = true
		} else {
			delete(active, e.i)
		}
		now := list()
		switch after := crowded(m, now); {
		case !before && after:
			since, crowd = e.at, now
		case before && after && len(now) > len(crowd):
			crowd = now
		case before && !after:
			d := time.Duration(e.at - since)
			f.MaxOverlap = max(f.MaxOverlap, d)
			if d > o.Epsilon {
				f.Crowds = append(f.Crowds, fmt.Sprintf("%s: %s believed at once for %v", m, describeHolds(crowd), d))
			}
			crowd = nil
		}
	}
}

func describeHolds(list []Interval) string {
	var parts []string
	for _, in := range list {
		parts = append(parts, fmt.Sprintf("%s (%s, token %d)", in.Proc, in.Mode, in.Token))
	}
	return strings.Join(parts, ", ")
}

// checkHoldTokens checks the holds' tokens (C3): each hold has a token of its own, and
// tokens grow with admission. Admissions are not seen, but a hold whose Acquire was
// called after another hold began to be believed was admitted after it, and must have
// the greater token; holds acquired concurrently may come in either order.
func (f *Findings) checkHoldTokens() {
	f.Tenures = len(f.Intervals)
	seen := map[uint64]Interval{}
	for _, in := range f.Intervals {
		if prev, ok := seen[in.Token]; ok {
			f.Tokens = append(f.Tokens, fmt.Sprintf("%s and %s both held with token %d", prev.Proc, in.Proc, in.Token))
		}
		seen[in.Token] = in
	}
	// Intervals are sorted by From; top[i] is the greatest token of the first i+1.
	top := make([]Interval, len(f.Intervals))
	for i, in := range f.Intervals {
		top[i] = in
		if i > 0 && top[i-1].Token > in.Token {
			top[i] = top[i-1]
		}
	}
	for _, in := range f.Intervals {
		if in.Call == 0 {
			continue
		}
		n := sort.Search(len(f.Intervals), func(i int) bool { return f.Intervals[i].From >= in.Call })
		if n > 0 && top[n-1].Token >= in.Token {
			f.TokenRegressions++
			f.Tokens = append(f.Tokens, fmt.Sprintf("%s acquired with token %d, asked for after %s held with token %d",
				in.Proc, in.Token, top[n-1].Proc, top[n-1].Token))
		}
	}
}

// checkHoldFence replays the referee's fence over its decisions (C4): an act it accepted
// must not have been superseded, and an act it rejected must have been, by the rule that
// holdFence documents. This replay computes it afresh from the history, its own way.
func (f *Findings) checkHoldFence(events []Event, m HoldModel) {
	type acts struct {
		first, last int64
		mode        string
	}
	spans := map[uint64]acts{} // of the accepted acts, by token
	superseded := func(e Event) bool {
		if m.Permits == 0 {
			for t, sp := range spans {
				if t > e.Token && sp.first < e.At && (exclusive(e.Mode) || exclusive(sp.mode)) {
					return true
				}
			}
			return false
		}
		for u, at := range spans {
			if u <= e.Token {
				continue
			}
			n := 0
			for v, sp := range spans {
				if v > e.Token && sp.first <= at.first && at.first <= sp.last {
					n++
				}
			}
			if n >= m.Permits {
				return true
			}
		}
		return false
	}
	for _, e := range events {
		if e.Kind != KindWriteOK && e.Kind != KindWriteStale {
			continue
		}
		stale := superseded(e)
		switch {
		case e.Kind == KindWriteOK && stale:
			f.Referee = append(f.Referee, fmt.Sprintf("%s acted (%s) with token %d after later holds had superseded it: a stale act was accepted", e.Proc, e.Mode, e.Token))
		case e.Kind == KindWriteStale && !stale:
			f.Referee = append(f.Referee, fmt.Sprintf("%s acted (%s) with token %d, rejected though no later hold had superseded it", e.Proc, e.Mode, e.Token))
		}
		if e.Kind == KindWriteOK {
			sp, ok := spans[e.Token]
			if !ok {
				sp = acts{first: e.At, mode: e.Mode}
			}
			sp.last = e.At
			spans[e.Token] = sp
		}
	}
}

// checkDeadlines checks that every Acquire returned by its deadline, give or take the
// scheduling slack of a loaded machine (C9).
func (f *Findings) checkDeadlines(events []Event, o Options) {
	slack := max(10*o.Epsilon, 500*time.Millisecond)
	calls := map[string]Event{}
	for _, e := range events {
		switch e.Kind {
		case KindAcquire:
			calls[e.Proc] = e
		case KindAcquired, KindRetry, KindKilled:
			c, ok := calls[e.Proc]
			if !ok {
				continue
			}
			delete(calls, e.Proc)
			if e.Kind != KindKilled && c.Deadline != 0 && e.At > c.Deadline+int64(slack) {
				f.Deadlines = append(f.Deadlines, fmt.Sprintf("%s: an Acquire (%s) returned %v after its deadline", e.Proc, c.Mode, time.Duration(e.At-c.Deadline)))
			}
		}
	}
}

// checkFreeWaits measures how long a holder waited while the capacity was free in
// belief, beside it (C6): a semaphore with fewer believed holders than permits, a
// read-write lock believed by nobody. Each wait that began after the free stretch did is
// counted from its call.
func (f *Findings) checkFreeWaits(events []Event, m HoldModel, o Options) {
	waiting := map[string]int64{} // proc -> Acquire called
	believed := map[string]bool{}
	var freeSince int64 = -1
	free := func() bool {
		if m.Permits > 0 {
			return len(believed) < m.Permits
		}
		return len(believed) == 0
	}
	check := func(now int64) {
		if freeSince < 0 {
			return
		}
		for p, since := range waiting {
			d := time.Duration(now - max(since, freeSince))
			f.MaxFreeWait = max(f.MaxFreeWait, d)
			if o.WakeBound > 0 && d > o.WakeBound {
				f.FreeWaits = append(f.FreeWaits, fmt.Sprintf("%s waited %v while the %s had room (bound %v)", p, d, m, o.WakeBound))
				waiting[p] = now // once per stretch
			}
		}
	}
	for _, e := range events {
		check(e.At)
		switch e.Kind {
		case KindAcquire:
			waiting[e.Proc] = e.At
		case KindAcquired:
			delete(waiting, e.Proc)
			believed[e.Proc] = true
		case KindRetry, KindStop:
			delete(waiting, e.Proc)
		case KindReleased:
			delete(believed, e.Proc)
		case KindKilled:
			delete(waiting, e.Proc)
			delete(believed, e.Proc)
		}
		switch {
		case free() && freeSince < 0:
			freeSince = e.At
		case !free():
			freeSince = -1
		}
	}
}

// holdLinearizable checks the belief intervals against a model of the capacity: an
// admission when the hold fits beside the holders, a release by a holder (C10).
func holdLinearizable(iv []Interval, m HoldModel, eps time.Duration) bool {
	type input struct {
		proc, mode string
		acquire    bool
	}
	var ops []porcupine.Operation
	clients := map[string]int{}
	for _, in := range iv {
		id, ok := clients[in.Proc]
		if !ok {
			id = len(clients)
			clients[in.Proc] = id
		}
		ops = append(ops,
			porcupine.Operation{ClientId: id, Input: input{in.Proc, in.Mode, true}, Call: in.From, Return: in.From + int64(eps)},
			porcupine.Operation{ClientId: id, Input: input{in.Proc, in.Mode, false}, Call: in.To - int64(eps), Return: in.To})
	}
	// The state is the holders, "proc:mode" sorted and joined, comparable as porcupine needs.
	model := porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, in, _ any) (bool, any) {
			op := in.(input)
			var holders []string
			if s := state.(string); s != "" {
				holders = strings.Split(s, ",")
			}
			me := op.proc + ":" + op.mode
			if !op.acquire {
				i := slices.Index(holders, me)
				if i < 0 {
					return false, state
				}
				return true, strings.Join(slices.Delete(holders, i, i+1), ",")
			}
			var active []Interval
			for _, h := range holders {
				active = append(active, Interval{Mode: h[strings.LastIndexByte(h, ':')+1:]})
			}
			if crowded(m, append(active, Interval{Mode: op.mode})) {
				return false, state
			}
			holders = append(holders, me)
			slices.Sort(holders)
			return true, strings.Join(holders, ",")
		},
	}
	return porcupine.CheckOperationsTimeout(model, ops, time.Minute) != porcupine.Illegal
}
