package simba

import (
	"sync"
	"time"

	"github.com/simba-go/simba/internal/clock"
)

// rounds runs the store calls of one lifecycle one at a time: after a delay, or at once
// when poked. Between rounds only a timer exists; each round runs on a goroutine of its
// own that exits when the round is over, so an idle contender costs no goroutine and
// stopping one that is idle waits for nobody.
//
// The zero value is idle: pokes are ignored until begin.
type rounds struct {
	mu     sync.Mutex
	clock  clock.Clock                            // sets the timer; nil: the system clock
	do     func() (next time.Duration, more bool) // one round; more false: no more rounds
	timed  bool                                   // rounds follow each other after the delay a round returns
	timer  clock.Timer
	armed  bool // the timer is set and has not fired
	busy   bool // a round is running
	again  bool // poked during a round: run another one right after it
	early  bool // poked before begin: the first round runs at once
	begun  bool
	halted bool
	wg     sync.WaitGroup // one count while armed or busy
}

// begin starts the rounds. Timed, the first runs after delay (or when poked), and each
// sets the delay until the next; otherwise rounds run only when poked.
func (q *rounds) begin(do func() (time.Duration, bool), timed bool, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.halted {
		return
	}
	q.do, q.timed, q.begun = do, timed, true
	switch {
	case timed && q.early:
		q.arm(0)
	case timed:
		q.arm(delay)
	case q.early:
		q.wg.Add(1)
		q.start()
	}
}

// arm sets the timer for the next round. Called with q.mu held, while neither armed nor
// busy; the caller has added the count to q.wg, or passes on the count of the round that
// calls it.
func (q *rounds) arm(delay time.Duration) {
	if !q.busy {
		q.wg.Add(1)
	}
	q.armed = true
	if q.timer == nil {
		c := q.clock
		if c == nil {
			c = clock.System
		}
		q.timer = c.AfterFunc(delay, q.fire)
		return
	}
	q.timer.Reset(delay)
}

// start runs rounds on a goroutine of their own. Called with q.mu held and the round's
// count added to q.wg.
func (q *rounds) start() {
	q.busy = true
	go q.run()
}

// fire is the timer's function.
func (q *rounds) fire() {
	q.mu.Lock()
	q.armed = false
	if q.halted {
		q.mu.Unlock()
		q.wg.Done()
		return
	}
	q.busy = true
	q.mu.Unlock()
	q.run()
}

// run runs rounds until no poke came during the last one, or the rounds are halted or
// done; timed, it then sets the timer for the next. Called with q.busy set.
func (q *rounds) run() {
	for {
		next, more := q.do()
		q.mu.Lock()
		if !more {
			q.do = nil
		}
		switch {
		case q.halted || !more:
		case q.again:
			q.again = false
			q.mu.Unlock()
			continue
		case q.timed:
			q.arm(next) // passes on the count of this round
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.busy, q.again = false, false
		q.mu.Unlock()
		q.wg.Done()
		return
	}
}

// poke asks for a round now. A poke during a round runs another right after it; a poke
// while the timer is set runs one at once instead; a poke before begin has the first round
// run at once; a poke after a round said there are no more is ignored.
func (q *rounds) poke() {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.halted:
	case !q.begun:
		q.early = true
	case q.do == nil:
	case q.busy:
		q.again = true
	case q.armed && q.timer.Stop():
		q.armed = false
		q.start() // takes over the count of the timer
	case !q.armed:
		// Not timed: only pokes run rounds. (A fired timer whose round has not yet
		// begun, armed with Stop false, needs nothing: that round begins after this poke.)
		q.wg.Add(1)
		q.start()
	}
}

// reschedule moves the next round of timed rounds to delay from now, if the timer is set
// for it; a round under way sets the timer itself when it ends. Before begin, whose delay
// was computed before the news that asks for the reschedule, the first round runs at once
// instead.
func (q *rounds) reschedule(delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.halted:
	case !q.begun:
		q.early = true
	case q.timed && q.armed && q.timer.Stop():
		q.timer.Reset(delay)
	}
}

// halt stops the rounds: no round begins after it. It does not wait for the round under
// way; wait does.
func (q *rounds) halt() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.halted = true
	if q.armed && q.timer.Stop() {
		q.armed = false
		q.wg.Done()
	}
}

// wait returns once no round runs and none is due: after halt, once the round under way,
// if any, has returned.
func (q *rounds) wait() { q.wg.Wait() }
