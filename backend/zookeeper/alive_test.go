package zookeeper

import (
	"testing"
	"time"
)

// TestAliveNeedsAnEarlierHeartbeat checks the rule by which heartbeats prove the session
// alive on the leader: an answered heartbeat proves nothing by itself (a follower cut
// off from its leader may have answered reads and pings); it proves the send time of the
// latest earlier heartbeat answered at least a third of the timeout before it was sent.
func TestAliveNeedsAnEarlierHeartbeat(t *testing.T) {
	const timeout = 600 * time.Millisecond
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := &Backend{}
	// A heartbeat j qualifies for k when j.answered <= k.sent - timeout/3 (200 ms); the
	// proof is the send time of the latest qualifying j.
	steps := []struct {
		sent, answered int // ms after t0
		want           int // ms after t0; -1: no proof
	}{
		{0, 5, -1},      // the first heartbeat of a connection proves nothing
		{100, 105, -1},  // threshold -100: nothing qualifies
		{200, 210, -1},  // threshold 0: the first was answered at 5, after it
		{300, 305, 0},   // threshold 100: the first qualifies, the second (answered 105) not
		{400, 405, 100}, // threshold 200: the second qualifies, the third (answered 210) not
		{900, 950, 400}, // after a gap, the latest one that qualifies
	}
	for i, st := range steps {
		got := b.alive(beat{at(st.sent), at(st.answered)}, timeout)
		switch {
		case st.want < 0 && !got.IsZero():
			t.Errorf("heartbeat %d (sent %d ms): proof at %v, want none", i, st.sent, got.Sub(t0))
		case st.want >= 0 && !got.Equal(at(st.want)):
			t.Errorf("heartbeat %d (sent %d ms): proof at %v, want %d ms", i, st.sent, got.Sub(t0), st.want)
		}
	}
	if n := len(b.beats); n > 4 {
		t.Errorf("%d heartbeats kept; only the latest qualifying one and those after it are needed", n)
	}
}
