package jdbc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// TestConnectionBudget (issue 15, item 7): an application whose pool is 10 connections
// holds 20 mutexes at once through Mutexes, and 20 more goroutines of another process
// wait for them. The hand-over holds at most its budget of connections (2 by default) in
// each process, every acquisition succeeds, and the application's own queries still get
// connections.
func TestConnectionBudget(t *testing.T) {
	const names = 20
	app, other := openDB(t), openDB(t)
	app.SetMaxOpenConns(10)
	other.SetMaxOpenConns(10)
	prefix := mutexName(t) + "-"
	var leases []*simba.Lease
	holders := make(map[string]*simba.Mutexes)
	for _, db := range []string{"app", "other"} {
		pool := app
		if db == "other" {
			pool = other
		}
		b, err := jdbc.New(pool)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		m, err := simba.NewMutexes(b, simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		holders[db] = m
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range names {
		lease, err := holders["app"].Acquire(ctx, fmt.Sprint(prefix, i))
		require.NoError(t, err, "mutex %d", i)
		leases = append(leases, lease)
	}
	// The other process waits for every one of them.
	var wg sync.WaitGroup
	got := make(chan *simba.Lease, names)
	for i := range names {
		wg.Go(func() {
			lease, err := holders["other"].Acquire(ctx, fmt.Sprint(prefix, i))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			got <- lease
		})
	}
	waitUntil(t, 10*time.Second, "the waiters to wait", func() bool {
		return holders["other"].Len() == names
	})
	// Each waiter's first attempts borrow a connection of the pool for a statement; once
	// they are over, the hand-over waits on its budget's connections (2), and a waiter's
	// poll has at most one statement in flight.
	waitUntil(t, 20*time.Second, "the waiters to settle on the budget's connections", func() bool {
		n := other.Stats().InUse
		return n >= 2 && n <= 2+1
	})
	t.Logf("connections in use: %d by the owners, %d by the waiters", app.Stats().InUse, other.Stats().InUse)
	assert.LessOrEqual(t, app.Stats().InUse, 2, "connections the owners hold")
	qctx, qcancel := context.WithTimeout(t.Context(), time.Second)
	defer qcancel()
	var one int
	require.NoError(t, app.QueryRowContext(qctx, "SELECT 1").Scan(&one), "the application gets a connection")

	for _, l := range leases {
		require.NoError(t, l.Release(t.Context()))
	}
	for range names {
		select {
		case l := <-got:
			require.NoError(t, l.Release(t.Context()))
		case <-ctx.Done():
			t.Fatal("not every waiter acquired")
		}
	}
	wg.Wait()
}

// A pool no larger than the hand-over's budget: the default budget (2) pinned both
// connections of a pool of 2, and the owner of the first mutex, whose renewals borrow
// from the pool, lost its lease while a second mutex waited for a connection until its
// deadline. The hand-over now leaves the pool's last
// connection to the statements: both mutexes are held, through renewals, and Close leaves
// no connection checked out.
func TestHandOverLeavesThePoolAConnection(t *testing.T) {
	const ttl, transition = time.Second, 500 * time.Millisecond
	db := openDB(t)
	db.SetMaxOpenConns(2)
	b, err := jdbc.New(db)
	require.NoError(t, err)
	m, err := simba.NewMutexes(b, simba.WithTTL(ttl), simba.WithTransition(transition))
	require.NoError(t, err)
	prefix := mutexName(t) + "-"
	first, err := m.Acquire(t.Context(), prefix+"0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	second, err := m.Acquire(ctx, prefix+"1")
	require.NoError(t, err, "a second mutex on a pool of 2 with the default budget")
	renewed := time.After(2 * ttl)
	select {
	case <-first.Done():
		t.Fatalf("the first lease was lost: %v", context.Cause(first.Context()))
	case <-second.Done():
		t.Fatalf("the second lease was lost: %v", context.Cause(second.Context()))
	case <-renewed: // both renewed twice
	}
	require.NoError(t, first.Release(t.Context()))
	require.NoError(t, second.Release(t.Context()))
	require.NoError(t, m.Close())
	require.NoError(t, b.Close())
	assert.Zero(t, db.Stats().InUse, "connections left checked out after Close")
}
