package simba

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundLog counts rounds and lets a test hold one in the middle.
type roundLog struct {
	n       atomic.Int32
	started chan int32    // receives the number of each round as it starts
	hold    chan struct{} // a held round waits for a value here
	holding atomic.Bool   // every round is held
	held    atomic.Int32  // the number of a round to hold; 0: none
	running atomic.Int32
	overlap atomic.Bool
	next    time.Duration
	last    int32 // the round that says there are no more; 0: never
}

func newRoundLog(next time.Duration) *roundLog {
	return &roundLog{started: make(chan int32, 100), hold: make(chan struct{}), next: next}
}

func (l *roundLog) do() (time.Duration, bool) {
	if l.running.Add(1) > 1 {
		l.overlap.Store(true)
	}
	defer l.running.Add(-1)
	n := l.n.Add(1)
	l.started <- n
	if l.holding.Load() || l.held.Load() == n {
		<-l.hold
	}
	return l.next, l.last == 0 || n < l.last
}

func (l *roundLog) await(t *testing.T, want int32) {
	t.Helper()
	select {
	case n := <-l.started:
		require.Equal(t, want, n)
	case <-time.After(5 * time.Second):
		t.Fatalf("round %d did not start", want)
	}
}

// idle waits until no round runs: the last one has returned and set the timer.
func idle(t *testing.T, q *rounds) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q.mu.Lock()
		busy := q.state == roundsRunning || q.state == roundsRerun
		q.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the round did not end")
		}
		time.Sleep(time.Millisecond)
	}
}

func (l *roundLog) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case n := <-l.started:
		t.Fatalf("round %d started unexpectedly", n)
	case <-time.After(within):
	}
}

func TestRoundsTimed(t *testing.T) {
	l := newRoundLog(20 * time.Millisecond)
	var q rounds
	began := time.Now()
	q.begin(l.do, true, 30*time.Millisecond)
	l.await(t, 1)
	assert.GreaterOrEqual(t, time.Since(began), 30*time.Millisecond, "the first round waits for the delay")
	l.await(t, 2)
	l.await(t, 3)
	q.halt()
	q.wait()
	l.none(t, 100*time.Millisecond)
	assert.False(t, l.overlap.Load(), "rounds overlapped")
}

func TestRoundsPokeRunsAtOnce(t *testing.T) {
	l := newRoundLog(time.Hour)
	var q rounds
	q.begin(l.do, true, time.Hour)
	q.poke()
	l.await(t, 1)
	// A poke during a round runs one more right after it, however many came. (Round 1
	// may still run here: the hold is for round 2 only, so that this test does not hold
	// the round it pokes to start the next.)
	l.held.Store(2)
	q.poke()
	l.await(t, 2)
	q.poke()
	q.poke()
	l.hold <- struct{}{}
	l.await(t, 3)
	l.none(t, 50*time.Millisecond)
	q.halt()
	q.wait()
	assert.False(t, l.overlap.Load(), "rounds overlapped")
}

func TestRoundsEarlyPoke(t *testing.T) {
	l := newRoundLog(time.Hour)
	var q rounds
	q.poke() // before begin: remembered
	q.begin(l.do, true, time.Hour)
	l.await(t, 1)
	q.halt()
	q.wait()

	l2 := newRoundLog(time.Hour)
	var untimed rounds
	untimed.poke()
	untimed.begin(l2.do, false, 0)
	l2.await(t, 1)
	untimed.halt()
	untimed.wait()
}

func TestRoundsUntimedRunOnlyWhenPoked(t *testing.T) {
	l := newRoundLog(0)
	l.last = 2
	var q rounds
	q.begin(l.do, false, 0)
	l.none(t, 50*time.Millisecond)
	q.poke()
	l.await(t, 1)
	l.none(t, 50*time.Millisecond)
	q.poke()
	l.await(t, 2) // says there are no more
	q.poke()
	l.none(t, 50*time.Millisecond)
	q.halt()
	q.wait()
}

func TestRoundsHaltWaitsForTheRoundUnderWay(t *testing.T) {
	l := newRoundLog(0)
	l.holding.Store(true)
	var q rounds
	q.begin(l.do, true, 0)
	l.await(t, 1)
	var (
		mu        sync.Mutex
		cancelled bool
		halted    = make(chan struct{})
	)
	go func() {
		q.halt()
		mu.Lock()
		cancelled = true
		mu.Unlock()
		l.hold <- struct{}{} // the cancelled call returns
		q.wait()
		close(halted)
	}()
	select {
	case <-halted:
	case <-time.After(5 * time.Second):
		t.Fatal("halt did not return")
	}
	mu.Lock()
	assert.True(t, cancelled)
	mu.Unlock()
	assert.Zero(t, l.running.Load(), "halt returned while a round ran")
	q.poke()
	l.none(t, 50*time.Millisecond)
}

func TestRoundsHaltBeforeBegin(t *testing.T) {
	var q rounds
	q.halt()
	q.wait()
	l := newRoundLog(0)
	q.begin(l.do, true, 0)
	q.poke()
	l.none(t, 50*time.Millisecond)
}

func TestRoundsReschedule(t *testing.T) {
	l := newRoundLog(time.Hour)
	var q rounds
	q.begin(l.do, true, time.Hour)
	l.none(t, 50*time.Millisecond)
	q.reschedule(10 * time.Millisecond)
	l.await(t, 1)
	// After the round the timer is set for an hour again; a reschedule while a round
	// runs leaves the timer to that round.
	idle(t, &q)
	l.held.Store(2)
	q.reschedule(0)
	l.await(t, 2)
	q.reschedule(0) // busy: ignored
	l.hold <- struct{}{}
	l.none(t, 100*time.Millisecond)
	q.halt()
	q.wait()
	q.reschedule(0) // halted: ignored
	l.none(t, 50*time.Millisecond)
}

// A reschedule before begin makes the first round run at once: the delay begin is given
// was computed before it.
func TestRoundsRescheduleBeforeBegin(t *testing.T) {
	l := newRoundLog(time.Hour)
	var q rounds
	q.reschedule(time.Millisecond)
	q.begin(l.do, true, time.Hour)
	l.await(t, 1)
	q.halt()
	q.wait()
}

// Rounds halted while their timer is set give it to the next rounds of the same spare,
// which reset it: it then runs the new rounds' rounds, never the old ones'.
func TestRoundsSpareTimerServesTheNextRounds(t *testing.T) {
	var spare spareTimer
	old := newRoundLog(time.Hour)
	first := rounds{spare: &spare}
	first.begin(old.do, true, time.Hour)
	timer := first.timer
	first.halt()
	first.wait()
	require.Same(t, timer, spare.r, "the stopped timer is kept")

	l := newRoundLog(20 * time.Millisecond)
	second := rounds{spare: &spare}
	second.begin(l.do, true, 10*time.Millisecond)
	require.Same(t, timer, second.timer, "the next rounds reset the kept timer")
	l.await(t, 1)
	l.await(t, 2)
	second.halt()
	second.wait()
	old.none(t, 0)
	assert.Equal(t, int32(0), old.n.Load(), "the old rounds ran")
}
