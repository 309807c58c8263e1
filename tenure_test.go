package simba

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/internal/clock"
)

// expiries receives the tenures whose timer called expire.
type expiries chan *tenure

func (e expiries) expire(t *tenure) { e <- t }

// A tenure ended before its timer fired gives the timer to the next tenure of the same
// spare, which resets it: it then ends the new tenure, never the old one.
func TestTenureSpareTimerServesTheNextTenure(t *testing.T) {
	var spare spareTimer
	got := make(expiries, 2)
	now := time.Now()
	first := newTenure(clock.System, Owner{ID: "a", Token: 1}, now.Add(time.Hour), now, got, &spare)
	timer := first.timer
	first.end(context.Canceled)
	require.Same(t, timer, spare.r, "the stopped timer is kept")

	now = time.Now()
	second := newTenure(clock.System, Owner{ID: "a", Token: 2}, now.Add(10*time.Millisecond), now, got, &spare)
	require.Same(t, timer, second.timer, "the next tenure resets the kept timer")
	select {
	case e := <-got:
		require.Same(t, second, e, "the timer ended another tenure than the one that set it")
	case <-time.After(5 * time.Second):
		t.Fatal("the second tenure's timer did not fire")
	}
}
