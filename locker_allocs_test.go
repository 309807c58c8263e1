package simba_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// Issue 35: a Locker's uncontended Acquire and Release on the memory backend allocated 45
// objects, of which the start-up's closure and participant, the release's detached context,
// the dispatcher's panic handler, the lease's release closure and the owner changes queued
// for hooks a Locker does not have served no acquisition. Issue 36: 38, of which the claim's
// key, the channel that tells rounds already over have ended and the tenure's context boxed
// apart from its tenure served none either; nor did making anew the renewals' timer and the
// local TTL end's timer that the previous cycle stopped (31).
func TestLockerCycleAllocations(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	l, err := simba.NewLocker(b, "allocs")
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()
	cycle := func() {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // the first makes what later ones reuse
	// One over the 31 a cycle makes: AllocsPerRun counts the process's allocations, and an
	// earlier test's lifecycle may still be finishing in the background.
	assert.LessOrEqual(t, testing.AllocsPerRun(200, cycle), 32.0)
}
