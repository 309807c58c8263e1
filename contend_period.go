package simba

import "time"

// Jitter bounds for a non-owner's next attempt, as in JVM Simba.
const (
	jitterLow  = -200 * time.Millisecond // with a transition window; 0 without
	jitterHigh = 1000 * time.Millisecond
)

// contendPeriod decides when a contender tries next.
//
//   - The owner renews a renewal lead before its TTL ends: TTLAt - now - lead, at once once
//     that has passed, until its transition window ends; from then on, when it can renew no
//     more, it tries as anyone else does.
//   - Anyone else tries after the transition window, with jitter so that waiters do not
//     all try at once: TransitionAt - now + jitter, jitter uniform in [-200ms, 1s), or in
//     [0, 1s) when the transition window is zero.
//   - After a store error, an owner retries promptly with a short, growing backoff (it
//     keeps believing until its local TTL end), anyone else with a longer one, at most the
//     TTL.
//
// Negative delays clamp to zero.
type contendPeriod struct {
	ttl        time.Duration
	transition time.Duration
	lead       time.Duration
	jitter     func(lo, hi time.Duration) time.Duration
}

// next returns the delay until the next attempt of contender self, given the owner record
// the last attempt returned.
func (p contendPeriod) next(self string, o Owner, now time.Time) time.Duration {
	if o.OwnedBy(self) && now.Before(o.TransitionAt) {
		return nonNegative(until(o.TTLAt, now) - p.lead)
	}
	lo := jitterLow
	if p.transition == 0 {
		lo = 0
	}
	base := time.Duration(0)
	if o.ID != "" {
		base = until(o.TransitionAt, now)
	}
	return nonNegative(base + p.jitter(lo, jitterHigh))
}

// retry returns the delay before retrying after the given number of consecutive failed
// attempts (1 for the first failure). Owners start at 1% of the TTL and grow to at most
// 10%; others start at 10% and grow to at most the TTL. Both are jittered by up to a
// quarter of the delay so that contenders that failed together do not retry together.
func (p contendPeriod) retry(failures int, owner bool) time.Duration {
	base, ceiling := p.ttl/10, p.ttl
	if owner {
		base, ceiling = p.ttl/100, p.ttl/10
	}
	base = max(base, time.Millisecond)
	ceiling = max(ceiling, base)
	d := base
	for i := 1; i < failures && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d + p.jitter(0, d/4+1)
}

// until returns t - now, bounded to ±maxLease so that sums with it cannot overflow (t may
// be the zero Time).
func until(t, now time.Time) time.Duration {
	return min(max(t.Sub(now), -maxLease), maxLease)
}

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }
