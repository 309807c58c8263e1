package simba_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// contendedRing is n Lockers on one memory store that take turns on one mutex, each
// section contended: a holder releases only once every other Locker waits (its last
// attempt found the mutex owned), and a Locker that released acquires again only once the
// next section began, so no acquisition finds the mutex free.
type contendedRing struct {
	lockers []*simba.Locker

	mu       sync.Mutex
	changed  sync.Cond
	waiting  int // Lockers whose last attempt found another owner
	sections int // sections begun
	left     int // sections still to run; 0: the Lockers stop
	err      error
}

func newContendedRing(t testing.TB, n int) *contendedRing {
	r := &contendedRing{}
	r.changed.L = &r.mu
	store := memory.NewStore()
	for i := range n {
		b, err := memory.New(store)
		require.NoError(t, err)
		l, err := simba.NewLocker(waitCounting{b, r}, "contended", simba.WithContenderID(fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		r.lockers = append(r.lockers, l)
	}
	return r
}

// run runs sections sections, the Lockers on goroutines of their own.
func (r *contendedRing) run(sections int) error {
	r.mu.Lock()
	r.left, r.err = sections, nil
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range r.lockers {
		wg.Go(func() { r.take(l) })
	}
	wg.Wait()
	return r.err
}

// take runs l's sections until the ring stops.
func (r *contendedRing) take(l *simba.Locker) {
	ctx := context.Background()
	for {
		lease, err := l.Acquire(ctx)
		if err != nil {
			r.stop(err)
			return
		}
		r.mu.Lock()
		r.sections++
		mine := r.sections
		r.left--
		if r.left <= 0 {
			r.left = 0
		}
		r.changed.Broadcast()
		for r.left > 0 && r.waiting < len(r.lockers)-1 {
			r.changed.Wait()
		}
		r.mu.Unlock()
		if err := lease.Release(ctx); err != nil {
			r.stop(err)
			return
		}
		r.mu.Lock()
		for r.left > 0 && r.sections == mine {
			r.changed.Wait()
		}
		over := r.left == 0
		r.mu.Unlock()
		if over {
			return
		}
	}
}

func (r *contendedRing) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left, r.err = 0, errors.Join(r.err, err)
	r.changed.Broadcast()
}

// waitCounting is a backend on which the ring counts the Lockers waiting; it keeps
// deadlines as the memory backend does.
type waitCounting struct {
	*memory.Backend
	ring *contendedRing
}

func (w waitCounting) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := w.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return &countedContention{LeaseContention: c.(backend.LeaseContention), id: p.ContenderID, ring: w.ring}, nil
}

// countedContention tells the ring when its contender begins or ends waiting.
type countedContention struct {
	backend.LeaseContention
	id      string
	ring    *contendedRing
	waiting bool
}

func (c *countedContention) Acquire(ctx context.Context) (backend.Record, error) {
	rec, err := c.LeaseContention.Acquire(ctx)
	c.wait(err == nil && rec.Owner != "" && rec.Owner != c.id)
	return rec, err
}

func (c *countedContention) StopContend(ctx context.Context) error {
	c.wait(false)
	return c.LeaseContention.StopContend(ctx)
}

// wait records whether the contender waits.
func (c *countedContention) wait(waiting bool) {
	if c.waiting == waiting {
		return
	}
	c.waiting = waiting
	r := c.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	if waiting {
		r.waiting++
	} else {
		r.waiting--
	}
	r.changed.Broadcast()
}

// Issue 35: a contended section (an acquisition that finds the mutex owned and waits to be
// woken, an empty section, a release) allocated 41 objects, the memory backend's five and
// the test backend's contention included. Of these, the context.WithTimeout of each of the
// four store calls (start-up, first attempt, the attempt after the wake, release) made
// three or four, and a lifecycle's method value for its rounds and the owner change queued
// for a retriever it does not have one each: 25 now.
func TestContendedSectionAllocations(t *testing.T) {
	r := newContendedRing(t, 2)
	require.NoError(t, r.run(20)) // the first sections make what later ones reuse
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const sections = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	require.NoError(t, r.run(sections))
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / sections
	t.Logf("%.2f allocations a section", allocs)
	// One over: the count is the process's, and an earlier test may still be finishing.
	assert.LessOrEqual(t, allocs, 26.0)
}
