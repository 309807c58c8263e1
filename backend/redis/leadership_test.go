package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// leadershipService returns a started service of mutex for id, on a backend of its own,
// with the owner value id and the extra options, recording into r.
func leadershipService(t *testing.T, r *recorder, addr, mutex, id string, opts ...simba.ServiceOption) *simba.Service {
	t.Helper()
	opts = append([]simba.ServiceOption{simba.WithTTL(testTTL), simba.WithTransition(testTransition), simba.WithOwnerValue(id)}, opts...)
	s, err := simba.NewService(newBackend(t, newClient(t, addr)), r.contender(mutex, id), opts...)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitersOf returns the IDs Waiters lists for mutex, read by a contention of its own.
func waitersOf(t *testing.T, h backend.HandOffer) []string {
	t.Helper()
	w, err := h.Waiters(t.Context())
	require.NoError(t, err)
	var ids []string
	for _, x := range w {
		ids = append(ids, x.ID)
	}
	return ids
}

// Service.HandOff on Redis: the named waiter leads next, not the one that waited longest,
// with a greater token and never beside the former leader; the former leader queues
// behind and leads again when the others are gone.
func TestServiceHandOff(t *testing.T) {
	srv := server(t)
	m := newHandOffMutex(t, srv)
	mutex := m.name
	r := newRecorder()
	a := leadershipService(t, r, srv.Addr(), mutex, "a")
	await(t, &r.sig, "a leads", func() bool { return r.holder() == "a" })
	b := leadershipService(t, r, srv.Addr(), mutex, "b")
	c := leadershipService(t, r, srv.Addr(), mutex, "c")
	reader := m.contender(t, "reader", "").offer()
	poll(t, "b and c wait", func() bool { return len(waitersOf(t, reader)) == 2 })

	require.NoError(t, a.HandOff(t.Context(), "c"))
	await(t, &r.sig, "c leads", func() bool { return r.holder() == "c" })
	assert.Equal(t, []string{"b", "a"}, waitersOf(t, reader), "a queues behind b")
	assert.ErrorIs(t, a.HandOff(t.Context(), "b"), simba.ErrNotOwner, "a no longer leads")
	require.NoError(t, c.Stop(t.Context()))
	await(t, &r.sig, "b leads", func() bool { return r.holder() == "b" })
	require.NoError(t, b.Stop(t.Context()))
	await(t, &r.sig, "a leads again", func() bool { return r.holder() == "a" })
	assert.NoError(t, r.tokenCheck())
	assert.Zero(t, r.overlap(), "two leaders at once")
}

// WithPreference on Redis: a leader whose value the preference rejects hands off to the
// first waiter whose value it accepts, which then keeps leading.
func TestPreferenceHandsOff(t *testing.T) {
	srv := server(t)
	m := newHandOffMutex(t, srv)
	mutex := m.name
	r := newRecorder()
	prefer := simba.WithPreference(func(v string) bool { return v == "v2" })
	leadershipService(t, r, srv.Addr(), mutex, "v1", prefer)
	await(t, &r.sig, "v1 leads", func() bool { return r.holder() == "v1" })
	leadershipService(t, r, srv.Addr(), mutex, "other", prefer)
	reader := m.contender(t, "reader", "").offer()
	poll(t, "other waits", func() bool { return len(waitersOf(t, reader)) == 1 })
	leadershipService(t, r, srv.Addr(), mutex, "v2", prefer)
	await(t, &r.sig, "v2 leads", func() bool { return r.holder() == "v2" })
	assert.Zero(t, r.acquisitions("other"), "the preference passes the waiter it rejects by")
	assert.NoError(t, r.tokenCheck())
	assert.Zero(t, r.overlap(), "two leaders at once")
}

// A Scheduler on Redis claims each slot: a new leader after a Stop starts after the slot
// claimed last, so no slot runs twice, and the slot record holds the last run's slot and
// token.
func TestSchedulerRecordsSlots(t *testing.T) {
	srv := server(t)
	m := newHandOffMutex(t, srv)
	schedulerRecordsSlots(t, m.name, func() simba.Backend { return newBackend(t, newClient(t, srv.Addr())) },
		func() backend.SlotRecorder {
			return m.contender(t, "reader", "").LeaseContention.(backend.SlotRecorder)
		})
}

// schedulerRecordsSlots runs a Scheduler "a" of mutex, then "b" that leads after a's Stop,
// each on a backend newBackend returns, and checks that their runs have ever later slots
// and tokens not less, and that the recorder reader returns reads the last run's slot.
func schedulerRecordsSlots(t *testing.T, mutex string, newBackend func() simba.Backend, reader func() backend.SlotRecorder) {
	t.Helper()
	type run struct {
		who   string
		at    time.Time
		token uint64
	}
	var (
		mu   sync.Mutex
		runs []run
		sig  signal
	)
	scheduler := func(who string) *simba.Scheduler {
		s, err := simba.NewScheduler(newBackend(), mutex, simba.Schedule{Period: 50 * time.Millisecond},
			func(ctx context.Context, leader simba.Owner) {
				at, ok := simba.ScheduledAt(ctx)
				assert.True(t, ok)
				mu.Lock()
				runs = append(runs, run{who, at, leader.Token})
				mu.Unlock()
				sig.notify()
			}, simba.WithContenderID(who), simba.WithTTL(testTTL), simba.WithTransition(testTransition))
		require.NoError(t, err)
		require.NoError(t, s.Start(t.Context()))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	count := func(who string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range runs {
			if r.who == who {
				n++
			}
		}
		return n
	}
	a := scheduler("a")
	await(t, &sig, "a's runs", func() bool { return count("a") >= 3 })
	b := scheduler("b")
	require.NoError(t, a.Stop(t.Context()))
	await(t, &sig, "b's runs", func() bool { return count("b") >= 3 })
	require.NoError(t, b.Stop(t.Context()))

	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(runs); i++ {
		assert.True(t, runs[i].at.After(runs[i-1].at), "run %d of %s at %v, after %s's at %v", i, runs[i].who, runs[i].at, runs[i-1].who, runs[i-1].at)
		assert.GreaterOrEqual(t, runs[i].token, runs[i-1].token)
	}
	last := runs[len(runs)-1]
	slot, err := reader().LastSlot(t.Context())
	require.NoError(t, err)
	assert.True(t, slot.At.Equal(last.at), "slot record at %v, last run at %v", slot.At, last.at)
	assert.Equal(t, last.token, slot.Token)
}
