package chaos

import (
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hev is an event of a hold's history: time in ms, proc, kind, token, mode.
type hev struct {
	at    int64
	proc  string
	kind  Kind
	token uint64
	mode  string
}

func holdHistory(list ...hev) []Event {
	out := make([]Event, len(list))
	for i, e := range list {
		out[i] = Event{At: e.at * ms, Proc: e.proc, Kind: e.kind, Token: e.token, Mode: e.mode}
		if e.kind == KindAcquire {
			out[i].Deadline = (e.at + 1000) * ms
		}
	}
	return out
}

// hold is the events of one hold of proc: Acquire called at call, believed from from to
// to, acting at each of acts.
func hold(proc, mode string, token uint64, call, from, to int64, acts ...int64) []hev {
	list := []hev{{call, proc, KindAcquire, 0, mode}, {from, proc, KindAcquired, token, mode}}
	for _, a := range acts {
		list = append(list, hev{a, proc, KindWriteOK, token, mode})
	}
	return append(list, hev{to, proc, KindReleased, token, mode})
}

func holds(lists ...[]hev) []Event {
	var all []hev
	for _, l := range lists {
		all = append(all, l...)
	}
	events := holdHistory(all...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	return events
}

var (
	twoPermits = HoldModel{Permits: 2}
	rwLock     = HoldModel{}
)

func TestCheckPassesGoodHolds(t *testing.T) {
	sem := holds(
		hold("a", modePermit, 1, 0, 5, 50, 10, 40),
		hold("b", modePermit, 2, 1, 6, 60, 11, 55),
		hold("c", modePermit, 3, 2, 51, 90, 52, 80), // admitted as a gave back
		hold("a", modePermit, 4, 55, 61, 99, 62),
	)
	o := Options{Epsilon: time.Millisecond, Hold: &twoPermits, WakeBound: 100 * time.Millisecond}
	f := Check(sem, o)
	assert.Empty(t, f.Violations(o))
	assert.Equal(t, 4, f.Tenures)
	assert.True(t, f.LockLinearizable)

	rw := holds(
		hold("a", modeRead, 1, 0, 5, 50, 10),
		hold("b", modeRead, 2, 1, 6, 40, 11),
		hold("c", modeWrite, 3, 2, 51, 70, 60), // after both readers
		hold("a", modeRead, 4, 55, 71, 90, 72),
	)
	o.Hold = &rwLock
	f = Check(rw, o)
	assert.Empty(t, f.Violations(o))
	assert.True(t, f.LockLinearizable)
}

func TestCheckCatchesHoldViolations(t *testing.T) {
	cases := []struct {
		name   string
		model  HoldModel
		events []Event
		want   string
	}{
		{"a third holder of two permits", twoPermits, holds(
			hold("a", modePermit, 1, 0, 5, 50),
			hold("b", modePermit, 2, 1, 6, 50),
			hold("c", modePermit, 3, 2, 20, 50)), "C2 capacity"},
		{"a reader beside a writer", rwLock, holds(
			hold("a", modeWrite, 1, 0, 5, 50),
			hold("b", modeRead, 2, 1, 20, 60)), "C2 capacity"},
		{"two writers", rwLock, holds(
			hold("a", modeWrite, 1, 0, 5, 50),
			hold("b", modeWrite, 2, 1, 20, 60)), "C2 capacity"},
		{"a token handed out twice", twoPermits, holds(
			hold("a", modePermit, 1, 0, 5, 50),
			hold("b", modePermit, 1, 1, 6, 50)), "C3 tokens"},
		{"a token below an earlier hold's", twoPermits, holds(
			hold("a", modePermit, 5, 0, 5, 50),
			hold("b", modePermit, 4, 10, 12, 50)), "C3 tokens"},
		{"a stale write accepted (read-write lock)", rwLock, holds(
			hold("a", modeRead, 1, 0, 5, 20, 10, 80), // acts after b, a writer, acted
			hold("b", modeWrite, 2, 1, 30, 60, 40)), "C4 referee"},
		{"a stale act accepted (semaphore)", twoPermits, holds(
			hold("a", modePermit, 1, 0, 5, 20, 10, 80), // acts after 2 and 3 acted together
			hold("b", modePermit, 2, 1, 30, 60, 31, 50),
			hold("c", modePermit, 3, 2, 32, 60, 40, 45)), "C4 referee"},
		{"a fresh act rejected", twoPermits, holds(
			hold("a", modePermit, 1, 0, 5, 90, 10),
			hold("b", modePermit, 2, 1, 30, 60, 31),
			hold("c", modePermit, 3, 62, 63, 80, 64), // b and c never acted together
			[]hev{{85, "a", KindWriteStale, 1, modePermit}}), "C4 referee"},
		{"an Acquire past its deadline", twoPermits, holds(
			hold("a", modePermit, 1, 0, 1600, 1700)), "C9 deadline"},
		{"a waiter asleep beside a free permit", twoPermits, holds(
			hold("a", modePermit, 1, 0, 5, 50),
			hold("b", modePermit, 2, 10, 400, 450)), "C6 wake-up"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Epsilon: time.Millisecond, Hold: &c.model, WakeBound: 200 * time.Millisecond}
			v := Check(c.events, o).Violations(o)
			assert.Contains(t, join(v), c.want)
		})
	}
}

// Out of model, a crowd is measured, not forbidden.
func TestOutOfModelMeasuresCrowd(t *testing.T) {
	events := holds(
		hold("a", modePermit, 1, 0, 5, 50),
		hold("b", modePermit, 2, 1, 6, 50),
		hold("c", modePermit, 3, 2, 20, 60))
	o := Options{Epsilon: time.Millisecond, Hold: &twoPermits, OutOfModel: true}
	f := Check(events, o)
	assert.Empty(t, f.Violations(o))
	assert.Equal(t, 30*time.Millisecond, f.MaxOverlap)
}

func TestHoldFenceOfASemaphore(t *testing.T) {
	f := newHoldFence(2)
	assert.True(t, f.admit(1, modePermit, 1))
	assert.True(t, f.admit(2, modePermit, 2))
	assert.True(t, f.admit(3, modePermit, 10))
	assert.True(t, f.admit(4, modePermit, 20))
	assert.True(t, f.admit(1, modePermit, 21), "3 and 4 have not acted together: 1 may still hold")
	assert.True(t, f.admit(3, modePermit, 30), "3 acted at 10 and 30, 4 at 20: both held at 20")
	assert.False(t, f.admit(2, modePermit, 31), "2 is superseded by 3 and 4")
	assert.False(t, f.admit(1, modePermit, 32))
	assert.True(t, f.admit(3, modePermit, 33), "3 is not superseded: only 4 is later")
}

func TestHoldFenceOfAReadWriteLock(t *testing.T) {
	f := newHoldFence(0)
	assert.True(t, f.admit(5, modeRead, 1))
	assert.True(t, f.admit(3, modeRead, 2), "readers do not supersede readers")
	assert.False(t, f.admit(4, modeWrite, 3), "a writer is superseded by any later hold")
	assert.True(t, f.admit(6, modeWrite, 4))
	assert.False(t, f.admit(5, modeRead, 5), "a reader is superseded by a later writer")
	assert.True(t, f.admit(7, modeRead, 6))
}

func TestRefereeFencesHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "referee.log")
	log, err := CreateLog(path, "referee")
	require.NoError(t, err)
	r, err := NewReferee(log, true)
	require.NoError(t, err)
	c, err := DialReferee(r.Addr())
	require.NoError(t, err)
	for _, a := range []struct {
		name, mode string
		token      uint64
		ok         bool
	}{{"rw", modeWrite, 5, true}, {"rw", modeRead, 4, false}, {"rw", modeRead, 6, true}, {"rw", modeWrite, 5, false},
		{"sem", modePermit, 1, true}, {"sem", modePermit, 9, true}} {
		ok, err := c.Hold(a.name, a.mode, map[string]int{"sem": 1}[a.name], a.token, "p", 1)
		require.NoError(t, err)
		assert.Equal(t, a.ok, ok, "%s %s %d", a.name, a.mode, a.token)
	}
	ok, err := c.Hold("sem", modePermit, 1, 1, "p", 2)
	require.NoError(t, err)
	assert.False(t, ok, "a semaphore of one permit fences as a mutex")
	require.NoError(t, c.Close())
	require.NoError(t, r.Close())
	require.NoError(t, log.Close())
	events, err := ReadLogs(path)
	require.NoError(t, err)
	require.Len(t, events, 7)
	assert.Equal(t, KindWriteStale, events[1].Kind)
	assert.Equal(t, modeRead, events[1].Mode)
}
