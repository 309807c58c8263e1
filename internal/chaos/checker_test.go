package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const ms = int64(time.Millisecond)

// history builds events from (time in ms, proc, kind, token).
type ev struct {
	at    int64
	proc  string
	kind  Kind
	token uint64
}

func history(list ...ev) []Event {
	out := make([]Event, len(list))
	for i, e := range list {
		out[i] = Event{At: e.at * ms, Proc: e.proc, Kind: e.kind, Token: e.token}
	}
	return out
}

func good() []Event {
	return history(
		ev{0, "a", KindStart, 0}, ev{1, "a", KindStarted, 0},
		ev{2, "b", KindStart, 0}, ev{3, "b", KindStarted, 0},
		ev{5, "a", KindAcquired, 1},
		ev{10, "a", KindWriteOK, 1},
		ev{20, "a", KindStop, 0}, ev{21, "a", KindReleased, 1}, ev{22, "a", KindStopped, 0},
		ev{30, "b", KindAcquired, 2},
		ev{31, "b", KindWriteOK, 2},
		ev{40, "b", KindReleased, 2},
		ev{41, "b", KindAcquired, 2}, // belief regained, same store tenure
		ev{50, "b", KindReleased, 2},
	)
}

func TestCheckPassesAGoodHistory(t *testing.T) {
	o := Options{Epsilon: time.Millisecond}
	f := Check(good(), o)
	assert.Empty(t, f.Violations(o))
	assert.Equal(t, 2, f.Tenures)
	assert.Equal(t, 2, f.WritesAccepted)
	assert.True(t, f.LockLinearizable)
	assert.True(t, f.RefereeLinearizable)
	assert.Equal(t, []time.Duration{2 * time.Millisecond}, f.StopDurations)
}

func TestCheckCatchesViolations(t *testing.T) {
	o := Options{Epsilon: time.Millisecond}
	cases := []struct {
		name   string
		events []Event
		want   string
	}{
		{"overlap", history(
			ev{0, "a", KindAcquired, 1}, ev{5, "b", KindAcquired, 2},
			ev{10, "a", KindReleased, 1}, ev{20, "b", KindReleased, 2}), "C2 exclusion"},
		{"double acquire", history(
			ev{0, "a", KindAcquired, 1}, ev{5, "a", KindAcquired, 1}, ev{10, "a", KindReleased, 1}), "C1 alternation"},
		{"release without acquire", history(ev{0, "a", KindReleased, 1}), "C1 alternation"},
		{"acquire after stop", history(
			ev{0, "a", KindStop, 0}, ev{1, "a", KindStopped, 0}, ev{5, "a", KindAcquired, 1}, ev{6, "a", KindReleased, 1}), "C1 alternation"},
		{"stop before release", history(
			ev{0, "a", KindAcquired, 1}, ev{5, "a", KindStop, 0}, ev{6, "a", KindStopped, 0}, ev{7, "a", KindReleased, 1}), "C1 alternation"},
		{"token not increasing", history(
			ev{0, "a", KindAcquired, 5}, ev{5, "a", KindReleased, 5}, ev{10, "b", KindAcquired, 5}, ev{15, "b", KindReleased, 5}), "C3 tokens"},
		{"token going backwards", history(
			ev{0, "a", KindAcquired, 5}, ev{5, "a", KindReleased, 5}, ev{10, "b", KindAcquired, 3}, ev{15, "b", KindReleased, 3}), "C3 tokens"},
		{"stale write accepted", history(
			ev{0, "a", KindAcquired, 1}, ev{1, "a", KindWriteOK, 1},
			ev{100, "b", KindAcquired, 2}, ev{101, "b", KindWriteOK, 2},
			ev{102, "a", KindWriteOK, 1}, // the unfenced resource let the old owner in
			ev{103, "a", KindReleased, 1}, ev{200, "b", KindReleased, 2}), "C4 referee"},
		{"write outside belief", history(
			ev{0, "a", KindAcquired, 1}, ev{5, "a", KindReleased, 1}, ev{50, "a", KindWriteOK, 1}), "C4 referee"},
		{"no token", history(ev{0, "a", KindAcquired, 0}, ev{5, "a", KindReleased, 0}), "C1 alternation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Check(c.events, o).Violations(o)
			if assert.NotEmpty(t, v) {
				assert.Contains(t, v[0]+" "+join(v), c.want)
			}
		})
	}
}

func join(v []string) string {
	s := ""
	for _, x := range v {
		s += x + "\n"
	}
	return s
}

// An unfenced referee's history (a stale write accepted) is not linearizable against a
// fenced register.
func TestRefereeModelCatchesUnfencedAccept(t *testing.T) {
	f := Check(history(ev{0, "b", KindWriteOK, 2}, ev{1, "a", KindWriteOK, 1}), Options{})
	assert.False(t, f.RefereeLinearizable)
	f = Check(history(ev{0, "b", KindWriteOK, 2}, ev{1, "a", KindWriteStale, 1}, ev{2, "b", KindWriteOK, 2}), Options{})
	assert.True(t, f.RefereeLinearizable)
}

// Out of model, overlaps are measured, not forbidden; the shadow counter shows losses.
func TestOutOfModelMeasuresOverlap(t *testing.T) {
	events := history(
		ev{0, "a", KindAcquired, 1}, ev{1, "a", KindIncrement, 0},
		ev{50, "b", KindAcquired, 2}, ev{51, "b", KindIncrement, 0}, ev{52, "a", KindIncrement, 0},
		ev{60, "a", KindKilled, 0}, ev{100, "b", KindReleased, 2})
	shadow := int64(2)
	o := Options{Epsilon: time.Millisecond, OutOfModel: true, Shadow: &shadow}
	f := Check(events, o)
	assert.Empty(t, f.Violations(o))
	assert.Equal(t, 10*time.Millisecond, f.MaxOverlap)
	assert.Equal(t, int64(1), f.ShadowLost)
	assert.True(t, f.Intervals[0].Killed)

	o.OutOfModel = false
	assert.NotEmpty(t, Check(events, o).Violations(o), "the same history in-model is a violation")
}

func TestFailoverHelpers(t *testing.T) {
	events := good()
	e, ok := FirstAcquiredAfter(events, 20*ms, "a")
	assert.True(t, ok)
	assert.Equal(t, "b", e.Proc)
	r, ok := ReleasedAfter(events, 20*ms, "a")
	assert.True(t, ok)
	assert.Equal(t, 21*ms, r.At)
}

// A write with another token than its tenure's is a C3 violation: the token changed
// within the tenure.
func TestCheckCatchesTokenChangeWithinTenure(t *testing.T) {
	o := Options{Epsilon: time.Millisecond}
	v := Check(history(ev{0, "a", KindAcquired, 5}, ev{5, "a", KindWriteOK, 5}, ev{10, "a", KindWriteOK, 6},
		ev{20, "a", KindReleased, 5}), o).Violations(o)
	assert.Contains(t, join(v), "C3 tokens")
}

// In-model, a shadow counter short of the logged increments is a lost update; one ahead
// of them is an increment whose log line a kill cut off, which loses nothing.
func TestShadowLossSign(t *testing.T) {
	events := history(ev{0, "a", KindAcquired, 1}, ev{1, "a", KindIncrement, 0}, ev{2, "a", KindIncrement, 0},
		ev{3, "a", KindKilled, 0})
	o := Options{Epsilon: time.Millisecond}
	for _, c := range []struct {
		shadow int64
		fails  bool
	}{{1, true}, {2, false}, {3, false}} {
		shadow := c.shadow
		o.Shadow = &shadow
		v := Check(events, o).Violations(o)
		assert.Equal(t, c.fails, len(v) > 0, "shadow %d: %v", c.shadow, v)
	}
}

// An OnAcquired delivered after its tenure had ended (its context done on entry: the
// callbacks run behind the service's state) is no belief: a CI run saw p1's, for the
// tenure of token 23, delivered 5 ms after p2 acquired with token 24, and a successor's
// tenure began in between. It counts for the alternation of callbacks, not for
// exclusion or token order; a late delivery with its context still live does.
func TestCheckIgnoresTenuresEndedBeforeDelivery(t *testing.T) {
	o := Options{Epsilon: time.Millisecond, OnContext: true}
	late := history(
		ev{0, "p2", KindAcquired, 24},
		ev{5, "p1", KindAcquired, 23}, ev{5, "p1", KindLost, 23}, ev{8, "p1", KindReleased, 23},
		ev{100, "p2", KindReleased, 24})
	late[1].Note = NoteEndedBeforeDelivery
	f := Check(late, o)
	assert.Empty(t, f.Violations(o))
	assert.Equal(t, 1, f.Tenures)

	live := history(
		ev{0, "p2", KindAcquired, 24},
		ev{5, "p1", KindAcquired, 23}, ev{7, "p1", KindLost, 23}, ev{8, "p1", KindReleased, 23},
		ev{100, "p2", KindReleased, 24})
	v := Check(live, o).Violations(o)
	assert.Contains(t, join(v), "C3 tokens")
	assert.Contains(t, join(v), "C2 exclusion")
}
