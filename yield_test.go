package simba_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// events records a contender's callbacks in the order they were delivered.
type events struct {
	mu   sync.Mutex
	log  []string
	next chan string
}

func newEvents() *events { return &events{next: make(chan string, 64)} }

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
	e.next <- s
}

func (e *events) await(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-e.next:
		require.Equal(t, want, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", want)
	}
}

func contenderOf(mutex, id string, e *events, tokens chan<- uint64) simba.ContenderFuncs {
	return simba.ContenderFuncs{MutexName: mutex, ID: id,
		Acquired: func(_ context.Context, s simba.State) {
			e.add(id + " acquired")
			if tokens != nil {
				tokens <- s.After.Token
			}
		},
		Released: func(simba.State) { e.add(id + " released") },
	}
}

// TestYieldHandsOverAndContendsOn: a leader that yields steps down (OnReleased before the
// waiter's OnAcquired), the waiter leads at once, and the yielder goes on contending:
// it leads again once the other stops, with a larger token.
func TestYieldHandsOverAndContendsOn(t *testing.T) {
	store := memory.NewStore()
	ba, _ := memory.New(store)
	bb, _ := memory.New(store)
	e := newEvents()
	tokens := make(chan uint64, 8)
	a, err := simba.NewService(ba, contenderOf("y", "a", e, tokens))
	require.NoError(t, err)
	defer a.Close()
	b, err := simba.NewService(bb, contenderOf("y", "b", e, tokens))
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, a.Start(t.Context()))
	e.await(t, "a acquired")
	first := <-tokens
	require.NoError(t, b.Start(t.Context()))

	assert.ErrorIs(t, b.Yield(t.Context()), simba.ErrNotOwner, "b does not lead")
	require.NoError(t, a.Yield(t.Context()))
	e.await(t, "a released")
	e.await(t, "b acquired")
	second := <-tokens
	assert.Greater(t, second, first)
	assert.Equal(t, simba.StatusRunning, a.Status(), "the yielder goes on contending")
	assert.False(t, a.IsOwner())

	require.NoError(t, b.Stop(t.Context()))
	e.await(t, "b released")
	e.await(t, "a acquired")
	assert.Greater(t, <-tokens, second)
}

// TestYieldFromACallback: a contender that yields from inside OnAcquired does not wait for
// itself, and the next waiter leads.
func TestYieldFromACallback(t *testing.T) {
	store := memory.NewStore()
	ba, _ := memory.New(store)
	bb, _ := memory.New(store)
	e := newEvents()
	yielded := make(chan error, 1)
	var a *simba.Service
	a, err := simba.NewService(ba, simba.ContenderFuncs{MutexName: "y", ID: "a",
		Acquired: func(ctx context.Context, _ simba.State) {
			e.add("a acquired")
			select {
			case yielded <- a.Yield(ctx):
			default:
			}
		},
		Released: func(simba.State) { e.add("a released") }})
	require.NoError(t, err)
	defer a.Close()
	b, err := simba.NewService(bb, contenderOf("y", "b", e, nil))
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Start(t.Context()))
	e.await(t, "b acquired")
	require.NoError(t, a.Start(t.Context()))
	require.NoError(t, b.Stop(t.Context()))
	e.await(t, "b released")
	e.await(t, "a acquired")
	select {
	case err := <-yielded:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Yield from the callback did not return")
	}
	e.await(t, "a released")
}

// TestSchedulerYield: a Scheduler that yields, or hands off, stops its work as a loss
// does, and another Scheduler leads (its first run is an hour after a's, the slot a ran
// being recorded: its leader hook tells).
func TestSchedulerYield(t *testing.T) {
	for name, stepDown := range map[string]func(context.Context, *simba.Scheduler) error{
		"yield":    func(ctx context.Context, s *simba.Scheduler) error { return s.Yield(ctx) },
		"hand-off": func(ctx context.Context, s *simba.Scheduler) error { return s.HandOff(ctx, "b") },
	} {
		t.Run(name, func(t *testing.T) {
			store := memory.NewStore()
			ba, _ := memory.New(store)
			bb, _ := memory.New(store)
			type run struct {
				who string
				ctx context.Context
			}
			runs := make(chan run, 16)
			work := func(who string) func(context.Context, simba.Owner) {
				return func(ctx context.Context, _ simba.Owner) {
					select {
					case runs <- run{who, ctx}:
					default:
					}
					<-ctx.Done()
				}
			}
			schedule := simba.Schedule{Period: time.Hour}
			a, err := simba.NewScheduler(ba, "ys", schedule, work("a"), simba.WithContenderID("a"))
			require.NoError(t, err)
			defer a.Close()
			bLeads := func(ctx context.Context, _ simba.Owner) { runs <- run{"b", ctx} }
			b, err := simba.NewScheduler(bb, "ys", schedule, work("b"), simba.WithContenderID("b"), simba.WithLeaderHooks(bLeads, nil))
			require.NoError(t, err)
			defer b.Close()
			require.NoError(t, a.Start(t.Context()))
			first := <-runs
			require.Equal(t, "a", first.who)
			require.NoError(t, b.Start(t.Context()))
			awaitWaiting(t, store, "ys", "b")
			require.NoError(t, stepDown(t.Context(), a))
			assert.ErrorIs(t, first.ctx.Err(), context.Canceled, "the work stopped before the mutex went back")
			select {
			case r := <-runs:
				assert.Equal(t, "b", r.who)
			case <-time.After(10 * time.Second):
				t.Fatal("b did not lead")
			}
			assert.True(t, errors.Is(stepDown(t.Context(), a), simba.ErrNotOwner))
		})
	}
}
