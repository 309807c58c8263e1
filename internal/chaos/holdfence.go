package chaos

import (
	"maps"
	"slices"
)

// holdFence is the referee's fence for the holds of one semaphore or read-write lock.
// The store hands every hold of a name a token at its admission, greater than every
// token of the name before it, so tokens order the holds by admission. A hold is
// superseded (its lease must have ended, so an act of it is stale) once the referee has
// seen proof that it cannot be held any more:
//
//   - Read-write lock: an act of a write hold with a greater token supersedes every
//     hold before it (the write hold was admitted alone, so they had ended), and an act
//     of any hold with a greater token supersedes a write hold (nothing is admitted beside
//     a write hold; a downgrade's read hold, admitted beside it, acts only once the write
//     hold is given back).
//   - Semaphore of N permits: a hold is superseded once N holds with greater tokens were
//     all acting at one instant, each having acted at or before it and again at or after
//     it (between two acts of one hold the hold lived: a token is one hold). Those N
//     were admitted after the hold, so with it they would be N+1 holders at that instant.
//     A mutex is the case N = 1: any act of a later token supersedes. This is sound but not
//     complete: a stale act is rejected only once N later holds have overlapped, so the
//     scenarios keep holds short and their holders many, to fill every permit again soon.
//
// Tokens of a semaphore at or below floor are superseded; spans keeps the first and last
// act of each token above it.
type holdFence struct {
	permits int // a semaphore's; zero for a read-write lock

	floor uint64
	spans map[uint64]span

	highestWrite, highestAny uint64 // of a read-write lock: the greatest tokens that acted
}

// span is the first and last act of a hold the referee accepted.
type span struct{ first, last int64 }

func newHoldFence(permits int) *holdFence {
	return &holdFence{permits: permits, spans: map[uint64]span{}}
}

// admit judges an act of the hold of token (of mode) at time at, and records it if it
// is not stale.
func (f *holdFence) admit(token uint64, mode string, at int64) bool {
	if f.permits == 0 {
		if token < f.highestWrite || exclusive(mode) && token < f.highestAny {
			return false
		}
		f.highestAny = max(f.highestAny, token)
		if exclusive(mode) {
			f.highestWrite = max(f.highestWrite, token)
		}
		return true
	}
	if token <= f.floor {
		return false
	}
	sp, ok := f.spans[token]
	if !ok {
		sp.first = at
	}
	sp.last = at
	f.spans[token] = sp
	f.raiseFloor()
	return true
}

// raiseFloor raises the floor to just below the N-th greatest token acting at any
// instant: the instants to look at are the first acts, where a span begins.
func (f *holdFence) raiseFloor() {
	tokens := slices.Sorted(maps.Keys(f.spans))
	for _, t := range tokens {
		x := f.spans[t].first
		n := 0
		for i := len(tokens) - 1; i >= 0; i-- { // greatest first
			u := tokens[i]
			if sp := f.spans[u]; sp.first <= x && x <= sp.last {
				if n++; n == f.permits {
					f.floor = max(f.floor, u-1)
					break
				}
			}
		}
	}
	for t := range f.spans {
		if t <= f.floor {
			delete(f.spans, t)
		}
	}
}
