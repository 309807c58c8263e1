package simba_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe"
)

// handOffGroup is a set of services contending for one mutex, each on a backend of its own
// on one memory store, whose callbacks check that no two ever believe at once.
type handOffGroup struct {
	t        *testing.T
	store    *memory.Store
	e        *events
	tokens   chan uint64
	mu       sync.Mutex
	services map[string]*simba.Service
	backends map[string]*memory.Backend
	overlaps chan string // a callback that found another believing
}

func newHandOffGroup(t *testing.T) *handOffGroup {
	return &handOffGroup{t: t, store: memory.NewStore(), e: newEvents(), tokens: make(chan uint64, 16),
		services: map[string]*simba.Service{}, backends: map[string]*memory.Backend{}, overlaps: make(chan string, 16)}
}

// add creates (not starts) contender id with opts; its callbacks log to g.e.
func (g *handOffGroup) add(id string, opts ...simba.ServiceOption) *simba.Service {
	b, err := memory.New(g.store)
	require.NoError(g.t, err)
	c := simba.ContenderFuncs{MutexName: "h", ID: id,
		Acquired: func(_ context.Context, s simba.State) {
			g.checkAlone(id)
			g.e.add(id + " acquired")
			g.tokens <- s.After.Token
		},
		Released: func(simba.State) {
			g.checkAlone("")
			g.e.add(id + " released")
		},
	}
	svc, err := simba.NewService(b, c, opts...)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { _ = svc.Close() })
	g.mu.Lock()
	g.services[id], g.backends[id] = svc, b
	g.mu.Unlock()
	return svc
}

// checkAlone records an overlap if a service other than self believes it leads.
func (g *handOffGroup) checkAlone(self string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, s := range g.services {
		if id != self && s.IsOwner() {
			select {
			case g.overlaps <- fmt.Sprintf("%s believes while %q's callback runs", id, self):
			default: // one is enough to fail
			}
		}
	}
}

// awaitWaiting waits until the store lists id among those waiting for mutex.
func awaitWaiting(t *testing.T, store *memory.Store, mutex, id string) {
	t.Helper()
	b, err := memory.New(store)
	require.NoError(t, err)
	c, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, Wake: func() {}})
	require.NoError(t, err)
	defer c.StopContend(t.Context())
	require.Eventually(t, func() bool {
		waiters, err := c.(backend.HandOffer).Waiters(t.Context())
		return assert.NoError(t, err) && slices.ContainsFunc(waiters, func(w backend.Waiter) bool { return w.ID == id })
	}, 10*time.Second, time.Millisecond)
}

// lead starts leader and, once it leads, the waiters, each once the store lists it as
// waiting. It returns the leader's token.
func (g *handOffGroup) lead(leader string, waiters ...string) uint64 {
	g.t.Helper()
	require.NoError(g.t, g.services[leader].Start(g.t.Context()))
	g.e.await(g.t, leader+" acquired")
	token := <-g.tokens
	for _, id := range waiters {
		require.NoError(g.t, g.services[id].Start(g.t.Context()))
		awaitWaiting(g.t, g.store, "h", id)
	}
	return token
}

// moved waits until from's OnReleased, then to's OnAcquired, have run, and returns to's
// token, which must be greater than was.
func (g *handOffGroup) moved(from, to string, was uint64) uint64 {
	g.t.Helper()
	g.e.await(g.t, from+" released")
	g.e.await(g.t, to+" acquired")
	token := <-g.tokens
	assert.Greater(g.t, token, was)
	return token
}

func (g *handOffGroup) noOverlap() {
	select {
	case o := <-g.overlaps:
		g.t.Fatal(o)
	default:
	}
}

// TestHandOffToAWaiter: the leader's OnReleased runs, then the named waiter's OnAcquired
// (not the first come's), with a greater token; the old leader waits behind, so the new
// one can hand leadership back.
func TestHandOffToAWaiter(t *testing.T) {
	g := newHandOffGroup(t)
	a, b, c := g.add("a"), g.add("b"), g.add("c")
	first := g.lead("a", "b", "c")

	assert.ErrorIs(t, b.HandOff(t.Context(), "c"), simba.ErrNotOwner, "b does not lead")
	require.NoError(t, a.HandOff(t.Context(), "c"))
	second := g.moved("a", "c", first)
	assert.Equal(t, simba.StatusRunning, a.Status(), "a goes on contending")
	assert.Equal(t, "c", c.Owner().ID)

	require.NoError(t, c.HandOff(t.Context(), "a"), "a waits")
	g.moved("c", "a", second)
	g.noOverlap()
}

// TestHandOffToANonWaiter: belief has ended when the store refuses; the service goes on
// contending as after a yield, and, no one else waiting, leads again.
func TestHandOffToANonWaiter(t *testing.T) {
	g := newHandOffGroup(t)
	a := g.add("a")
	first := g.lead("a")
	err := a.HandOff(t.Context(), "nobody")
	require.ErrorIs(t, err, simba.ErrNotWaiting)
	assert.Contains(t, err.Error(), "nobody")
	g.moved("a", "a", first)
	g.noOverlap()
}

// TestHandOffRefusals: what a hand-off refuses before belief ends changes nothing.
func TestHandOffRefusals(t *testing.T) {
	g := newHandOffGroup(t)
	a := g.add("a")
	assert.ErrorIs(t, a.HandOff(t.Context(), "b"), simba.ErrNotRunning)
	g.lead("a")
	for _, to := range []string{"", " b", "a", "b\n"} {
		assert.ErrorIs(t, a.HandOff(t.Context(), to), simba.ErrInvalidArgument, "%q", to)
	}
	//lint:ignore SA1012 a nil context is what is tested
	assert.ErrorIs(t, a.HandOff(nil, "b"), simba.ErrInvalidArgument) //nolint:staticcheck
	assert.True(t, a.IsOwner())

	// A store whose contentions cannot hand off.
	_, f := newFaultyStore()
	s, err := simba.NewService(f, contenderOf("u", "a", newEvents(), nil))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Start(t.Context()))
	require.Eventually(t, s.IsOwner, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, s.HandOff(t.Context(), "b"), errors.ErrUnsupported)
	assert.True(t, s.IsOwner(), "nothing happened")
	g.noOverlap()
}

// TestHandOffToAContenderThatDies: the named contender dies (its process: its backend is
// closed, nothing released) right after the hand-off, or right before, when the store
// still lists it as waiting; its tenure lapses as any dead owner's, and another contender
// leads, with a greater token, once it has.
func TestHandOffToAContenderThatDies(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before=%v", before), func(t *testing.T) {
			g := newHandOffGroup(t)
			opts := []simba.ServiceOption{simba.WithTTL(time.Second), simba.WithTransition(200 * time.Millisecond)}
			a := g.add("a", opts...)
			g.add("b", opts...)
			g.add("c", opts...)
			last := g.lead("a", "b", "c")
			if before {
				require.NoError(t, g.backends["b"].Close())
			}
			require.NoError(t, a.HandOff(t.Context(), "b"))
			if before {
				g.e.await(t, "a released") // b never learns of its tenure
				last++                     // b's token: the store counts tokens up by one
			} else {
				last = g.moved("a", "b", last)
				require.NoError(t, g.backends["b"].Close())
				g.e.await(t, "b released") // its renewals fail: belief ends at its local TTL end
			}
			var next string
			select {
			case next = <-g.e.next:
			case <-time.After(10 * time.Second):
				t.Fatal("no one leads after b's tenure lapsed")
			}
			assert.Contains(t, []string{"a acquired", "c acquired"}, next)
			assert.Greater(t, <-g.tokens, last)
			g.noOverlap()
		})
	}
}

// TestPreference: a leader whose value the preference rejects hands leadership to a
// waiter whose value it accepts, which keeps it across renewals, though another waiter's
// value is as good.
func TestPreference(t *testing.T) {
	g := newHandOffGroup(t)
	renewed := make(chan struct{}, 1) // b renewed
	obs := simba.WithObserver(observe.Funcs{Call: func(c observe.Call) {
		if c.Op == observe.OpRenew && c.Err == nil && c.Contender == "b" {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	}})
	prefer := simba.WithPreference(func(v string) bool { return v == "v2" })
	opts := func(v string) []simba.ServiceOption {
		return []simba.ServiceOption{simba.WithOwnerValue(v), prefer, obs, simba.WithTTL(300 * time.Millisecond)}
	}
	a, b, c := g.add("a", opts("v1")...), g.add("b", opts("v2")...), g.add("c", opts("v2")...)
	first := g.lead("a")
	require.NoError(t, b.Start(t.Context()))
	g.moved("a", "b", first)
	assert.Equal(t, "v2", b.Owner().Value)
	require.NoError(t, c.Start(t.Context()))
	awaitWaiting(t, g.store, "h", "c")
	awaitWaiting(t, g.store, "h", "a")
	select {
	case <-renewed: // from before c waited
	default:
	}
	for range 3 {
		select {
		case <-renewed:
		case <-time.After(10 * time.Second):
			t.Fatal("b does not renew")
		}
	}
	select {
	case ev := <-g.e.next:
		t.Fatalf("leadership moved on: %s", ev)
	default:
	}
	assert.True(t, b.IsOwner())
	assert.Equal(t, simba.StatusRunning, a.Status())
	g.noOverlap()
}

// TestPreferenceIsRequired: a nil preference is refused at construction.
func TestPreferenceIsRequired(t *testing.T) {
	b, _ := memory.New(memory.NewStore())
	_, err := simba.NewService(b, contenderOf("p", "a", newEvents(), nil), simba.WithPreference(nil))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewScheduler(b, "p", simba.Schedule{Period: time.Hour}, func(context.Context, simba.Owner) {}, simba.WithPreference(nil))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// TestPreferenceThatPanics: a preference that panics prefers no one: the leader keeps
// leading, renews, and the panic is logged, not raised in the service's goroutine.
func TestPreferenceThatPanics(t *testing.T) {
	g := newHandOffGroup(t)
	logs := &syncBuffer{}
	opts := []simba.ServiceOption{simba.WithOwnerValue("v1"), simba.WithTTL(300 * time.Millisecond),
		simba.WithPreference(func(v string) bool { panic("bad preference") }),
		simba.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}
	a, b := g.add("a", opts...), g.add("b", opts...)
	g.lead("a")
	require.NoError(t, b.Start(t.Context()))
	awaitWaiting(t, g.store, "h", "b")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "bad preference") }, 10*time.Second, 10*time.Millisecond)
	assert.True(t, a.IsOwner())
	g.noOverlap()
}
