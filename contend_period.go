package simba

import "time"

// Jitter bounds for a non-owner's next attempt, as in JVM Simba.
const (
	jitterLow  = -200 * time.Millisecond // with a transition window; 0 without
	jitterHigh = 1000 * time.Millisecond
)

// contendPeriod decides when a contender tries next.
//
//   - The owner renews a renewal lead before its TTL ends (on a backend that batches
//     renewals, moved back to the latest instant of the renewal grid not after that: see
//     renewal), at once once that has passed, until
//     its transition window ends; from then on, when it can renew no more, it tries as
//     anyone else does.
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
	onGrid     bool // the backend batches renewals (backend.RenewalBatcher): renew on the grid
}

// next returns the delay until the next attempt of contender self, given the owner record
// the last attempt, sent at sent, returned; renewed: that attempt renewed a tenure that
// began before it.
func (p contendPeriod) next(self string, o Owner, sent, now time.Time, renewed bool) time.Duration {
	if o.OwnedBy(self) && now.Before(o.TransitionAt) {
		return nonNegative(until(p.renewal(o.TTLAt, sent, renewed), now))
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

// renewalEpoch places the renewal grid of this process (see renewal): its instants are a
// whole number of renewal periods after it. Processes start at different instants, so
// those renewing with the same settings do not all renew at the same instants.
var renewalEpoch = time.Now()

// renewal returns when an owner renews whose attempt sent at sent found its TTL ending at
// ttlAt: a renewal lead before that, moved back to the latest instant of the renewal grid
// not after it. The grid's instants are 7/8 of a renewal period (ttl - lead) apart, on
// one phase for the whole process, so that from their second renewal on the owners of
// every mutex with the same settings renew at the same instants, and a backend can send
// those renewals together. Renewing earlier is always safe, and the first renewal after
// an acquisition may come up to a period early; a renewal never comes later than it
// would off the grid.
func (p contendPeriod) renewal(ttlAt, sent time.Time, renewed bool) time.Time {
	due := ttlAt.Add(-p.lead)
	if !p.onGrid {
		return due // a renewal costs a request either way: an early one would be one more
	}
	// Instants a whole period apart would have each owner renew exactly when due, and the
	// burst of a grid instant (every owner of the process at once: timers, rounds,
	// replies) would have only the lead to get through: 500 ms for 10,000 owners on 2
	// cores with a lead of ttl/20 was not enough. An eighth of a period before they are
	// due, it has that much more.
	every := (p.ttl - p.lead) - (p.ttl-p.lead)/8
	off := due.Sub(renewalEpoch) % every // monotonic: a step of the wall clock moves no grid
	if off < 0 {
		off += every
	}
	at := due.Add(-off)
	// An instant at or right after the attempt just made is not taken: the attempt was made
	// at that instant, and a store that answers a TTL a little short of the full one (SQL
	// rounds it down by its clock's step) would have its owner renew twice per instant.
	// The owner then renews when due, a little before the next instant, and reaches the
	// grid again once those little steps add up to a quarter of a period.
	spacing := time.Duration(0)
	if renewed {
		spacing = every / 4
	}
	if at.Sub(sent) <= spacing {
		return due
	}
	return at
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
