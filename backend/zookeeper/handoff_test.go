package zookeeper_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/zookeeper"
)

// reporter is a contention whose reports the test keeps.
type reporter struct {
	backend.Contention
	id string

	mu      sync.Mutex
	last    backend.Record
	owned   []uint64 // the tokens of the tenures it was reported the owner of
	changed chan struct{}
}

// startReporter starts a contention of id on mutex, on a backend of its own.
func startReporter(t *testing.T, mutex, id, value string, waitsOnly bool, opts ...zookeeper.Option) *reporter {
	t.Helper()
	r := &reporter{id: id, changed: make(chan struct{}, 1)}
	con, err := newBackend(t, opts...).StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: id, Value: value,
		WaitsOnly: waitsOnly, TTL: time.Second, Wake: func() {}, Report: r.report})
	require.NoError(t, err)
	t.Cleanup(func() { _ = con.StopContend(context.Background()) })
	r.Contention = con
	return r
}

func (r *reporter) report(rec backend.Record, _ time.Time) {
	r.mu.Lock()
	r.last = rec
	if rec.Owner == r.id {
		r.owned = append(r.owned, rec.Token)
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds of the last report.
func (r *reporter) waitFor(t *testing.T, what string, cond func(backend.Record) bool) backend.Record {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		rec := r.last
		r.mu.Unlock()
		if cond(rec) {
			return rec
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("%s: timed out waiting for %s; last report %+v", r.id, what, rec)
		}
	}
}

func (r *reporter) ownedTokens() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.owned)
}

// waitersOf waits until con lists the waiters want, and returns them.
func waitersOf(t *testing.T, con backend.Contention, want func([]backend.Waiter) bool) []backend.Waiter {
	t.Helper()
	var ws []backend.Waiter
	eventually(t, 10*time.Second, "the waiters", func() bool {
		var err error
		ws, err = con.(backend.HandOffer).Waiters(t.Context())
		require.NoError(t, err)
		return want(ws)
	})
	return ws
}

func ids(ws []backend.Waiter) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

// The owner a hands the mutex to c, behind b; d waits behind c. In one multi, the nodes
// of a and b go: c owns, with a greater token and its value, and b, then a, join again at
// the back, behind d, before HandOff returns. Neither b nor d is ever reported the
// owner, and a's contention has stopped believing when HandOff returns.
func TestHandOff(t *testing.T) {
	for name, opts := range map[string][]zookeeper.Option{"queue": nil, "per node": {perNode}} {
		t.Run(name, func(t *testing.T) {
			mutex := mutexName(t)
			a := startReporter(t, mutex, "a", "va", false, opts...)
			held := a.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == "a" })
			b := startReporter(t, mutex, "b", "", true, opts...) // a Locker's waiter
			c := startReporter(t, mutex, "c", "vc", false, opts...)
			d := startReporter(t, mutex, "d", "vd", true, opts...)
			ws := waitersOf(t, a.Contention, func(ws []backend.Waiter) bool { return len(ws) == 3 })
			assert.Equal(t, []backend.Waiter{{ID: "b"}, {ID: "c", Value: "vc"}, {ID: "d", Value: "vd"}}, ws)

			require.NoError(t, a.Contention.(backend.HandOffer).HandOff(t.Context(), "c"))
			a.mu.Lock()
			assert.NotEqual(t, "a", a.last.Owner, "a's contention believes after the hand-off")
			a.mu.Unlock()
			// HandOff returns once a joined again, after b: a is behind those waiting.
			ws, err := c.Contention.(backend.HandOffer).Waiters(t.Context())
			require.NoError(t, err)
			assert.Equal(t, []string{"d", "b", "a"}, ids(ws), "b, then a, joined again at the back")
			rec := c.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == "c" })
			assert.Greater(t, rec.Token, held.Token, "c's tenure token")
			assert.Equal(t, "vc", rec.Value)
			// a's service sees c own (a is a service's contention: told the owner).
			a.waitFor(t, "seeing c own", func(r backend.Record) bool { return r.Owner == "c" && r.Value == "vc" })
			assert.Empty(t, b.ownedTokens(), "b was reported the owner")
			assert.Empty(t, d.ownedTokens(), "d was reported the owner")
			assert.Equal(t, []uint64{held.Token}, a.ownedTokens(), "a's tenures")
		})
	}
}

// A hand-off whose check fails changes nothing: from a contender that does not own, to
// one that does not wait, to the caller itself.
func TestHandOffRefused(t *testing.T) {
	mutex := mutexName(t)
	a := startReporter(t, mutex, "a", "", false)
	a.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == "a" })
	b := startReporter(t, mutex, "b", "", false)
	waitersOf(t, a.Contention, func(ws []backend.Waiter) bool { return len(ws) == 1 })
	c := startReporter(t, mutex, "c", "", false)
	waitersOf(t, a.Contention, func(ws []backend.Waiter) bool { return len(ws) == 2 })

	assert.ErrorIs(t, b.Contention.(backend.HandOffer).HandOff(t.Context(), "c"), simba.ErrNotOwner)
	assert.ErrorIs(t, a.Contention.(backend.HandOffer).HandOff(t.Context(), "x"), simba.ErrNotWaiting)
	assert.ErrorIs(t, a.Contention.(backend.HandOffer).HandOff(t.Context(), "a"), simba.ErrNotWaiting)
	ws, err := c.Contention.(backend.HandOffer).Waiters(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, ids(ws), "nothing changed")
	a.waitFor(t, "owning still", func(r backend.Record) bool { return r.Owner == "a" })
}

// A Curator LeaderLatch waits between the Go owner a and c, to whom a hands the mutex: its
// node goes in the multi with a's, the deletion of the node before its own wakes it, it
// does not find its node and resets, with a new node at the back; it is never the leader
// meanwhile, and becomes it once the Go contenders are gone.
func TestCuratorLatchHandOff(t *testing.T) {
	cp := curatorClasspath(t)
	for name, opts := range map[string][]zookeeper.Option{"queue": nil, "per node": {perNode}} {
		t.Run(name, func(t *testing.T) {
			mutex := mutexName(t)
			a := startReporter(t, mutex, "a", "", false, opts...)
			a.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == "a" })
			j := startCurator(t, cp, "latch", "/simba/"+mutex, "j")
			j.expect("connected")
			j.expect("started")
			waitersOf(t, a.Contention, func(ws []backend.Waiter) bool { return len(ws) == 1 })
			c := startReporter(t, mutex, "c", "", false, opts...)
			ws := waitersOf(t, a.Contention, func(ws []backend.Waiter) bool { return len(ws) == 2 })
			require.Equal(t, []string{"j", "c"}, ids(ws))

			require.NoError(t, a.Contention.(backend.HandOffer).HandOff(t.Context(), "c"))
			c.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == "c" })
			ws, err := c.Contention.(backend.HandOffer).Waiters(t.Context())
			require.NoError(t, err)
			assert.Equal(t, []string{"j", "a"}, ids(ws), "the latch, then a, joined again")
			j.quiet("after the hand-off")

			require.NoError(t, c.StopContend(t.Context()))
			require.NoError(t, a.StopContend(t.Context()))
			j.expect("leader")
			j.release()
		})
	}
}

// Rounds of hand-offs among five services, each to the last waiter, so that every other
// waiter's node goes too: each tenure's token is greater than the one before, and a
// contender is reported the owner only of the tenures handed to it (or the first).
func TestHandOffRounds(t *testing.T) {
	for name, opts := range map[string][]zookeeper.Option{"queue": nil, "per node": {perNode}} {
		t.Run(name, func(t *testing.T) {
			mutex := mutexName(t)
			byID := map[string]*reporter{}
			var all []*reporter
			for i := range 5 {
				id := string(rune('a' + i))
				r := startReporter(t, mutex, id, "v"+id, false, opts...)
				byID[id] = r
				all = append(all, r)
			}
			owner := all[0]
			rec := owner.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == owner.id })
			granted := map[string][]uint64{owner.id: {rec.Token}}
			for round := range 12 {
				ws := waitersOf(t, owner.Contention, func(ws []backend.Waiter) bool { return len(ws) == 4 })
				to := byID[ws[len(ws)-1].ID]
				require.NoError(t, owner.Contention.(backend.HandOffer).HandOff(t.Context(), to.id), "round %d", round)
				next := to.waitFor(t, "owning", func(r backend.Record) bool { return r.Owner == to.id && r.Token > rec.Token })
				assert.Equal(t, "v"+to.id, next.Value)
				granted[to.id] = append(granted[to.id], next.Token)
				owner, rec = to, next
			}
			for _, r := range all {
				assert.Subset(t, granted[r.id], r.ownedTokens(), "%s was reported the owner of tenures not handed to it", r.id)
				assert.Subset(t, r.ownedTokens(), granted[r.id], "%s was not reported the owner of tenures handed to it", r.id)
			}
		})
	}
}
