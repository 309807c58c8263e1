package etcd_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/etcd"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A contender's later acquisitions put the key of its earlier ones again, once that is
// deleted: etcd keeps every key name ever put under a mutex's prefix in its index until the
// history is compacted, and every read of the mutex scans them all, so new names at every
// acquisition would slow each read down with the number of acquisitions since. Two
// contentions of one backend that overlap still have keys of their own.
func TestAcquisitionsReuseTheirKeys(t *testing.T) {
	b := newBackend(t)
	dir := b.MutexPrefix("reuse")
	l := newLocker(t, b, "reuse", "a")
	var seen []string
	for range 3 {
		lease, err := l.Acquire(t.Context())
		require.NoError(t, err)
		keys, _, _ := contenders(t, b.client, dir)
		require.Len(t, keys, 1)
		seen = append(seen, keys[0])
		require.NoError(t, lease.Release(t.Context()))
	}
	assert.Equal(t, []string{seen[0], seen[0], seen[0]}, seen, "the keys of three acquisitions in a row")

	first, err := l.Acquire(t.Context())
	require.NoError(t, err)
	other := acquire(t, newLocker(t, b, "reuse", "b"))
	awaitKeys(t, b.client, dir, 2)
	keys, _, _ := contenders(t, b.client, dir)
	assert.NotEqual(t, keys[0], keys[1], "two contentions at once")
	require.NoError(t, first.Release(t.Context()))
	require.NoError(t, await(t, other, "b's acquisition").Release(t.Context()))
}

// A contention that stops while it joins again (its key was deleted: by a hand-off that
// passed it over, by ReleaseOwner) leaves no key behind: a join that StopContend cut short
// on the client could still be applied after the delete, and its key stand until the
// lease ends, ahead of every later contender.
func TestStopWhileJoiningAgainLeavesNoKey(t *testing.T) {
	b := newBackend(t)
	etcd.SetOwnWatchDelay(b.Backend, 0) // each round waits for the owner to see its key gone
	const mutex = "stop-rejoining"
	dir := b.MutexPrefix(mutex)
	for i := range 150 {
		c := startContention(t, b, mutex, "a", "")
		rec := c.owns(t, "a")
		require.NoError(t, b.ReleaseOwner(t.Context(), mutex, simba.Owner{ID: "a", Token: rec.Token}))
		c.await(t, "the key seen gone", func(r backend.Record) bool { return r.Owner == "" }) // it joins again now
		require.NoError(t, c.StopContend(t.Context()), "stop %d", i)
		awaitKeys(t, b.client, dir, 0)
	}
}
