package simba

import (
	"sync"
	"time"

	"github.com/simba-go/simba/internal/clock"
)

// rounds runs the store calls of one lifecycle one at a time: after a delay, or at once
// when poked. Between rounds only a timer exists; each round runs on a goroutine of its
// own that exits when the round is over, so an idle contender costs no goroutine.
//
// Its states, and what moves it (enter is the one place the state changes):
//
//	new      -> poked     poke before begin: the first round runs at once
//	new      -> armed     begin, timed: the first round after the delay
//	new      -> idle      begin, not timed: rounds run only when poked
//	idle     -> running   poke
//	armed    -> running   the timer fires, or poke (the timer stopped)
//	running  -> rerun     poke: another round right after this one
//	running  -> armed     the round is over and set the delay until the next (timed)
//	running  -> idle      the round is over (not timed)
//	rerun    -> running   the round is over: the next one begins
//	any      -> done      halt, or a round said there are no more; final
//	running, rerun, armed (timer already fired) -> halting -> done
//	                      halt while a round runs or is about to: done when it is over
//
// The zero value is new.
type rounds struct {
	mu    sync.Mutex
	clock clock.Clock                            // sets the timer; nil: the system clock
	do    func() (next time.Duration, more bool) // one round; more false: no more rounds
	timed bool                                   // rounds follow each other after the delay a round returns
	timer *relay
	spare *spareTimer // if set, where timer comes from and goes back to (a service's)
	state roundsState
	over  chan struct{} // closed on entering done; made by the first to wait for it (ended)
}

type roundsState uint8

const (
	roundsNew roundsState = iota
	roundsPoked
	roundsIdle
	roundsArmed
	roundsRunning
	roundsRerun
	roundsHalting
	roundsDone
)

// enter moves the rounds to state s. Called with q.mu held.
func (q *rounds) enter(s roundsState) {
	if s == roundsDone && q.state != roundsDone && q.over != nil {
		close(q.over)
	}
	q.state = s
}

// begin starts the rounds. Timed, the first runs after delay (or at once if poked
// before), and each sets the delay until the next; otherwise rounds run only when poked.
func (q *rounds) begin(do func() (time.Duration, bool), timed bool, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.do, q.timed = do, timed
	switch {
	case q.state == roundsDone: // halted before it began
	case q.state == roundsPoked && timed:
		q.arm(0)
	case q.state == roundsPoked:
		q.start()
	case timed:
		q.arm(delay)
	default:
		q.enter(roundsIdle)
	}
}

// arm sets the timer for the next round. Called with q.mu held.
func (q *rounds) arm(delay time.Duration) {
	q.enter(roundsArmed)
	if q.timer == nil {
		q.timer = q.spare.take(q.clock, delay, q)
		return
	}
	q.timer.Reset(delay)
}

// start runs a round on a goroutine of its own. Called with q.mu held.
func (q *rounds) start() {
	q.enter(roundsRunning)
	go q.run()
}

// fire is the timer's function.
func (q *rounds) fire() {
	q.mu.Lock()
	switch q.state {
	case roundsArmed:
		q.enter(roundsRunning)
		q.mu.Unlock()
		q.run()
		return
	case roundsHalting: // halted as the timer fired
		q.enter(roundsDone)
	}
	q.mu.Unlock()
}

// run runs rounds until no poke came during the last one, or the rounds are halted or
// over; timed, it then sets the timer for the next. Called in state running.
func (q *rounds) run() {
	for {
		next, more := q.do()
		q.mu.Lock()
		switch {
		case q.state == roundsHalting || !more:
			q.enter(roundsDone)
		case q.state == roundsRerun:
			q.enter(roundsRunning)
			q.mu.Unlock()
			continue
		case q.timed:
			q.arm(next)
		default:
			q.enter(roundsIdle)
		}
		q.mu.Unlock()
		return
	}
}

// poke asks for a round now. A poke during a round runs another right after it; a poke
// while the timer is set runs one at once instead; a poke before begin has the first round
// run at once; a poke once the rounds are over is ignored.
func (q *rounds) poke() {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.state {
	case roundsNew:
		q.enter(roundsPoked)
	case roundsIdle:
		q.start()
	case roundsArmed:
		// A timer that has fired already (Stop false) runs its round right after this.
		if q.timer.Stop() {
			q.start()
		}
	case roundsRunning:
		q.enter(roundsRerun)
	}
}

// reschedule moves the next round of timed rounds to delay from now, if the timer is set
// for it; a round under way sets the timer itself when it ends. Before begin, whose delay
// was computed before the news that asks for the reschedule, the first round runs at once
// instead.
func (q *rounds) reschedule(delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.state {
	case roundsNew:
		q.enter(roundsPoked)
	case roundsArmed:
		if q.timer.Stop() {
			q.timer.Reset(delay)
		}
	}
}

// halt stops the rounds: no round begins after it. It does not wait for the round under
// way; wait does.
func (q *rounds) halt() {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.state {
	case roundsRunning, roundsRerun:
		q.enter(roundsHalting)
	case roundsArmed:
		if q.timer.Stop() {
			q.enter(roundsDone)
			q.spare.keep(q.timer) // stopped before it fired: nothing of these rounds runs on it
			q.timer = nil
		} else {
			q.enter(roundsHalting) // fire is about to run: it ends the rounds
		}
	case roundsHalting, roundsDone:
	default:
		q.enter(roundsDone)
	}
}

// ended returns a channel closed once the rounds are over: after halt, once the round
// under way, if any, has returned.
func (q *rounds) ended() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.over != nil:
	case q.state == roundsDone: // final: enter closes no channel from now on
		q.over = closedChan
	default:
		q.over = make(chan struct{})
	}
	return q.over
}

// closedChan is a closed channel: what ended returns for rounds over already (a Locker's
// release after a halt), which makes none.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// wait returns once the rounds are over (ended).
func (q *rounds) wait() { <-q.ended() }
