package simba

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestContendPeriod(t *testing.T) {
	now := onGrid(7 * time.Second) // the owner's renewal, 7s from now, falls on the grid
	p := contendPeriod{ttl: 10 * time.Second, transition: 6 * time.Second, lead: 3 * time.Second,
		jitter: func(lo, hi time.Duration) time.Duration { return lo }}
	mine := Owner{ID: "me", TTLAt: now.Add(10 * time.Second), TransitionAt: now.Add(16 * time.Second)}
	other := Owner{ID: "x", TTLAt: now.Add(10 * time.Second), TransitionAt: now.Add(16 * time.Second)}
	assert.Equal(t, 7*time.Second, p.next("me", mine, now, now, false), "owner: ttlAt - now - lead, on the grid")
	assert.Equal(t, 16*time.Second-200*time.Millisecond, p.next("me", other, now, now, false), "other: transitionAt - now + jitter")
	assert.Equal(t, time.Duration(0), p.next("me", Owner{}, now, now, false), "no owner: jitter only, clamped")
	assert.Equal(t, time.Duration(0), p.next("me", mine, now, now.Add(12*time.Second), true), "in the transition window: renew at once")

	// At the end of its transition window (the store's answer names the contender, but it
	// can renew no more), it waits like anyone else: found by the simulation, where
	// contending again at once, on a frozen clock, saw the same answer forever.
	p.jitter = func(_, hi time.Duration) time.Duration { return hi / 2 }
	assert.Equal(t, 500*time.Millisecond, p.next("me", mine, now, now.Add(16*time.Second), true), "at transitionAt: jitter, not at once")
	assert.Equal(t, time.Duration(0), p.next("me", mine, now, now.Add(time.Hour), true), "long after: at once (the store will say it is free)")
	p.jitter = func(lo, hi time.Duration) time.Duration { return lo }

	p.transition = 0
	var lo time.Duration = -1
	p.jitter = func(l, hi time.Duration) time.Duration { lo = l; return l }
	p.next("me", other, now, now, false)
	assert.Equal(t, time.Duration(0), lo, "no transition window: jitter from 0")
}

// gridEvery is the spacing of the renewal grid for a ttl of 10s and a lead of 3s: 7/8 of
// the 7s renewal period.
const gridEvery = 7*time.Second - 7*time.Second/8

// onGrid returns an instant d before an instant of the renewal grid of gridEvery.
func onGrid(d time.Duration) time.Time {
	return renewalEpoch.Add(250_000*gridEvery - d)
}

// Owners renew on the instants of one grid, 7/8 of a period apart, whenever they acquired:
// the first renewal comes early, up to a period, to reach the grid; none comes after it is
// due.
func TestRenewalGrid(t *testing.T) {
	p := contendPeriod{ttl: 10 * time.Second, transition: 6 * time.Second, lead: 3 * time.Second, onGrid: true}
	const every = gridEvery
	grid := onGrid(0)
	// renewals returns the instants of an owner's first n renewals, each attempt sent
	// delay after its instant and answered with a TTL short by short.
	renewals := func(acquired time.Time, delay, short time.Duration, n int) []time.Time {
		var at []time.Time
		sent, renewed := acquired, false
		for range n {
			next := p.renewal(sent.Add(p.ttl-short), sent, renewed)
			if due := sent.Add(p.ttl - short - p.lead); next.After(due) {
				t.Fatalf("renewal at %v, after it is due (%v)", next, due)
			}
			at = append(at, next)
			sent, renewed = next.Add(delay), true
		}
		return at
	}
	for _, acquired := range []time.Duration{-6 * time.Second, -time.Second, 0, 3 * time.Second} {
		at := renewals(grid.Add(acquired), 300*time.Microsecond, 0, 5)
		assert.Equal(t, 0*time.Second, at[0].Sub(grid)%every, "acquired at %v: the first renewal on the grid", acquired)
		for i := 1; i < len(at); i++ {
			assert.Equal(t, every, at[i].Sub(at[i-1]), "acquired at %v: renewal %d a grid spacing after the one before", acquired, i)
		}
	}
	// A store that answers a TTL a millisecond short (SQL) has its owners renew a little
	// before the grid's instants, once per period, not twice.
	at := renewals(grid, 200*time.Microsecond, time.Millisecond, 2000)
	early := 0
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < every-time.Millisecond {
			early++
			assert.GreaterOrEqual(t, gap, every/4, "renewal %d: %v after the one before", i, gap)
		}
	}
	assert.LessOrEqual(t, early, 2, "renewals that came early to reach the grid again")

	// On a backend that does not batch renewals an early renewal would be one request
	// more: the owner renews when due.
	p.onGrid = false
	acquired := grid.Add(-time.Second)
	assert.Equal(t, acquired.Add(7*time.Second), p.renewal(acquired.Add(p.ttl), acquired, false), "off the grid: when due")
}

// An owner on the grid renews before its renewal falls due, by an eighth of a period, from
// its second renewal on: every owner of the process renews at the grid's instants, and
// that burst gets the lead and that much to get through. With the grid a period apart,
// each renewed exactly when due, and with a lead of ttl/20 (500 ms at a ttl of 10s) 2,000
// of 10,000 Redis owners lost their lease on 2 cores.
func TestGridLeavesTheBurstTime(t *testing.T) {
	for _, lead := range []time.Duration{500 * time.Millisecond, 3 * time.Second} {
		p := contendPeriod{ttl: 10 * time.Second, transition: 6 * time.Second, lead: lead, onGrid: true}
		sent, renewed := onGrid(0).Add(-time.Second), false
		for i := range 6 {
			next := p.renewal(sent.Add(p.ttl), sent, renewed)
			if margin := sent.Add(p.ttl).Sub(next); i > 0 && margin < lead+(p.ttl-lead)/8 {
				t.Errorf("lead %v, renewal %d: %v before the TTL end, want at least the lead and an eighth of %v", lead, i, margin, p.ttl-lead)
			}
			sent, renewed = next.Add(time.Millisecond), true
		}
	}
}

func TestRetryBackoff(t *testing.T) {
	p := contendPeriod{ttl: 10 * time.Second, jitter: func(lo, _ time.Duration) time.Duration { return lo }}
	assert.Equal(t, 100*time.Millisecond, p.retry(1, true))
	assert.Equal(t, 200*time.Millisecond, p.retry(2, true))
	assert.Equal(t, time.Second, p.retry(20, true), "owner backoff stops at ttl/10")
	assert.Equal(t, time.Second, p.retry(1, false))
	assert.Equal(t, 10*time.Second, p.retry(20, false), "non-owner backoff stops at the ttl")
	tiny := contendPeriod{ttl: time.Millisecond, jitter: p.jitter}
	assert.Equal(t, time.Millisecond, tiny.retry(1, true), "never below a millisecond")
}

// The contend-period arithmetic never panics, never returns a negative delay and never
// overflows, whatever the owner record and the clock say.
func FuzzContendPeriod(f *testing.F) {
	f.Add(int64(10e9), int64(6e9), int64(3e9), int64(5e9), int64(11e9), int64(0), true, int64(0), 1, false)
	f.Add(int64(1e6), int64(0), int64(2e5), int64(-1<<62), int64(1<<62), int64(1<<62), false, int64(999), 64, true)
	f.Fuzz(func(t *testing.T, ttl, transition, lead, ttlIn, transIn, nowOff int64, mine bool, jitter int64, failures int, renewed bool) {
		if ttl <= 0 || transition < 0 || lead <= 0 || lead >= ttl {
			t.Skip()
		}
		base := time.Unix(1_700_000_000, 0)
		now := base.Add(time.Duration(nowOff))
		p := contendPeriod{ttl: time.Duration(ttl), transition: time.Duration(transition), lead: time.Duration(lead), onGrid: true,
			jitter: func(lo, hi time.Duration) time.Duration {
				if hi <= lo {
					return lo
				}
				return lo + time.Duration(uint64(jitter)%uint64(hi-lo))
			}}
		o := Owner{ID: "x", TTLAt: base.Add(time.Duration(ttlIn)), TransitionAt: base.Add(time.Duration(transIn))}
		if mine {
			o.ID = "me"
		}
		d := p.next("me", o, now, now, renewed)
		if d < 0 {
			t.Fatalf("negative delay %v", d)
		}
		if mine && now.Before(o.TransitionAt) && d > max(until(o.TTLAt, now)-time.Duration(lead), 0) {
			t.Fatalf("owner delay %v after its renewal is due (%v)", d, until(o.TTLAt, now)-time.Duration(lead))
		}
		if mine && d > max(until(o.TTLAt, now), 0) {
			t.Fatalf("owner delay %v beyond its ttlAt %v", d, until(o.TTLAt, now))
		}
		if !mine && d > max(until(o.TransitionAt, now), 0)+jitterHigh {
			t.Fatalf("non-owner delay %v beyond transitionAt + jitter", d)
		}
		r := p.retry(failures, mine)
		if r < time.Millisecond || r > time.Duration(ttl)+time.Duration(ttl)/4+time.Millisecond {
			t.Fatalf("retry delay %v out of range for ttl %v", r, time.Duration(ttl))
		}
	})
}

// Name validation never panics and accepts exactly the names without blank, invalid UTF-8,
// control characters or surrounding white space.
func FuzzValidateMutex(f *testing.F) {
	for _, s := range []string{"", " ", "m", " m", "m ", "a\x00b", "a\xffb", "ü", "a b", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateMutex(s)
		if err == nil && (s == "" || s != trimSpace(s)) {
			t.Fatalf("accepted %q", s)
		}
	})
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\v' || s[0] == '\f') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r' || s[len(s)-1] == '\v' || s[len(s)-1] == '\f') {
		s = s[:len(s)-1]
	}
	return s
}
