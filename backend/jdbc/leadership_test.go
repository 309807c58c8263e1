package jdbc_test

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

// leaders records who leads a mutex, from its services' callbacks.
type leaders struct {
	mu      sync.Mutex
	holder  string   // who leads now; "" none
	tokens  []uint64 // every tenure's token, in order
	overlap bool     // a service was told it leads while another believed
	changed chan struct{}
}

func newLeaders() *leaders { return &leaders{changed: make(chan struct{}, 1)} }

// service starts a service of mutex for id, with owner value id, on a backend of s's own.
func (l *leaders) service(t *testing.T, s dialectStore, mutex, id string, opts ...simba.ServiceOption) *simba.Service {
	t.Helper()
	opts = append([]simba.ServiceOption{simba.WithTTL(2 * time.Second), simba.WithTransition(time.Second),
		simba.WithOwnerValue(id)}, opts...)
	svc, err := simba.NewService(s.backend(t), simba.ContenderFuncs{
		MutexName: mutex, ID: id,
		Acquired: func(_ context.Context, st simba.State) {
			l.mu.Lock()
			if l.holder != "" {
				l.overlap = true
			}
			l.holder = id
			l.tokens = append(l.tokens, st.After.Token)
			l.mu.Unlock()
			l.notify()
		},
		Released: func(simba.State) {
			l.mu.Lock()
			if l.holder == id {
				l.holder = ""
			}
			l.mu.Unlock()
			l.notify()
		},
	}, opts...)
	require.NoError(t, err)
	require.NoError(t, svc.Start(t.Context()))
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func (l *leaders) notify() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// await waits until id leads, failing the test after 15s.
func (l *leaders) await(t *testing.T, id string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		l.mu.Lock()
		h := l.holder
		l.mu.Unlock()
		if h == id {
			return
		}
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("%s does not lead (%q does)", id, h)
		}
	}
}

// check fails the test when two services led at once or a token did not grow.
func (l *leaders) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.False(t, l.overlap, "two leaders at once")
	for i := 1; i < len(l.tokens); i++ {
		assert.Greater(t, l.tokens[i], l.tokens[i-1], "tenure %d's token", i)
	}
}

// waiterIDs returns the IDs Waiters lists for mutex, asked through a contention of a
// backend of its own.
func waiterIDs(t *testing.T, h backend.HandOffer) []string {
	t.Helper()
	w, err := h.Waiters(t.Context())
	require.NoError(t, err)
	var ids []string
	for _, x := range w {
		ids = append(ids, x.ID)
	}
	return ids
}

// TestServiceHandOff: Service.HandOff on SQL: the named waiter leads next, not the one that
// waited longest, with a greater token, never beside the former leader, who queues behind
// the others and leads again when they are gone.
func TestServiceHandOff(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		l := newLeaders()
		a := l.service(t, s, mutex, "a")
		l.await(t, "a")
		b := l.service(t, s, mutex, "b")
		c := l.service(t, s, mutex, "c")
		reader := party(t, s.backend(t), mutex, "reader", "")
		require.Eventually(t, func() bool { return len(waiterIDs(t, reader)) == 2 }, 15*time.Second, 10*time.Millisecond,
			"b and c wait")

		require.NoError(t, a.HandOff(t.Context(), "c"))
		l.await(t, "c")
		assert.Equal(t, "c", c.Owner().Value, "the new leader's value")
		assert.Equal(t, []string{"b", "a"}, waiterIDs(t, reader), "a queues behind b")
		assert.ErrorIs(t, a.HandOff(t.Context(), "b"), simba.ErrNotOwner, "a no longer leads")
		require.NoError(t, c.Stop(t.Context()))
		l.await(t, "b")
		require.NoError(t, b.Stop(t.Context()))
		l.await(t, "a")
		l.check(t)
	})
}

// TestPreferenceHandsOff: WithPreference on SQL: a leader whose value the preference
// rejects hands off to the first waiter whose value it accepts, which keeps leading.
func TestPreferenceHandsOff(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		l := newLeaders()
		prefer := simba.WithPreference(func(v string) bool { return v == "v2" })
		l.service(t, s, mutex, "v1", prefer)
		l.await(t, "v1")
		l.service(t, s, mutex, "other", prefer)
		reader := party(t, s.backend(t), mutex, "reader", "")
		require.Eventually(t, func() bool { return len(waiterIDs(t, reader)) == 1 }, 15*time.Second, 10*time.Millisecond,
			"other waits")
		l.service(t, s, mutex, "v2", prefer)
		l.await(t, "v2")
		l.check(t)
	})
}

// TestSchedulerRecordsSlots: a Scheduler on SQL claims each slot: a new leader after a Stop
// starts after the slot claimed last, so no slot runs twice, and the slot record holds the
// last run's slot and token.
func TestSchedulerRecordsSlots(t *testing.T) {
	eachStore(t, func(t *testing.T, s dialectStore) {
		mutex := mutexName(t)
		type run struct {
			who   string
			at    time.Time
			token uint64
		}
		var (
			mu   sync.Mutex
			runs []run
		)
		ran := make(chan struct{}, 1)
		scheduler := func(who string) *simba.Scheduler {
			sch, err := simba.NewScheduler(s.backend(t), mutex, simba.Schedule{Period: 50 * time.Millisecond},
				func(ctx context.Context, leader simba.Owner) {
					at, ok := simba.ScheduledAt(ctx)
					assert.True(t, ok)
					mu.Lock()
					runs = append(runs, run{who, at, leader.Token})
					mu.Unlock()
					select {
					case ran <- struct{}{}:
					default:
					}
				}, simba.WithContenderID(who), simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
			require.NoError(t, err)
			require.NoError(t, sch.Start(t.Context()))
			t.Cleanup(func() { _ = sch.Close() })
			return sch
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
		awaitRuns := func(who string) {
			deadline := time.After(15 * time.Second)
			for count(who) < 3 {
				select {
				case <-ran:
				case <-deadline:
					t.Fatalf("%s ran %d slots", who, count(who))
				}
			}
		}
		a := scheduler("a")
		awaitRuns("a")
		b := scheduler("b")
		require.NoError(t, a.Stop(t.Context()))
		awaitRuns("b")
		require.NoError(t, b.Stop(t.Context()))

		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < len(runs); i++ {
			assert.True(t, runs[i].at.After(runs[i-1].at), "run %d of %s at %v, after %s's at %v", i, runs[i].who, runs[i].at, runs[i-1].who, runs[i-1].at)
			assert.GreaterOrEqual(t, runs[i].token, runs[i-1].token)
		}
		last := runs[len(runs)-1]
		slot, err := slotRecorder(t, s.backend(t), mutex, "reader").LastSlot(t.Context())
		require.NoError(t, err)
		assert.True(t, slot.At.Equal(last.at), "slot record at %v, last run at %v", slot.At, last.at)
		assert.Equal(t, last.token, slot.Token)
	})
}
