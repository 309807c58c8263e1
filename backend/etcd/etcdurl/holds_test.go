package etcdurl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// An etcd store lists the holders of semaphores and read-write locks, and ReleaseHolder frees the hold listed and no later one of the same ID.
func TestHolders(t *testing.T) {
	testserver.Need(t, serverErr)
	s, err := storeurl.Open("etcd://" + server.Addr() + "/app/holds?lease_ttl=5s&dial_timeout=2s")
	require.NoError(t, err)
	defer s.Close()
	sem, err := simba.NewSemaphore(s.Backend(), "jobs-a", 2, simba.WithContenderID("same"))
	require.NoError(t, err)
	defer sem.Close()
	rw, err := simba.NewRWMutex(s.Backend(), "table", simba.WithContenderID("rw"))
	require.NoError(t, err)
	defer rw.Close()
	first, err := sem.Acquire(t.Context())
	require.NoError(t, err)
	read, err := rw.RLock(t.Context())
	require.NoError(t, err)

	list, err := s.Holders(t.Context(), backend.Semaphore, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	old := list[0]
	assert.Equal(t, storeurl.Holder{Kind: backend.Semaphore, Name: "jobs-a", ID: first.Owner().ID, Token: first.Token()}, old)
	list, err = s.Holders(t.Context(), backend.RWLock, "table")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, storeurl.Holder{Kind: backend.RWLock, Name: "table", ID: read.Owner().ID, Shared: true, Token: read.Token()}, list[0])

	require.NoError(t, first.Release(t.Context()))
	second, err := sem.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, old.ID, second.Owner().ID, "the same Locker, the same ID")
	released, err := s.ReleaseHolder(t.Context(), old)
	require.NoError(t, err)
	assert.False(t, released, "the tenure listed has ended")
	assert.NoError(t, second.Context().Err(), "the later tenure goes on")

	list, err = s.Holders(t.Context(), backend.Semaphore, "jobs-a")
	require.NoError(t, err)
	require.Len(t, list, 1)
	released, err = s.ReleaseHolder(t.Context(), list[0])
	require.NoError(t, err)
	assert.True(t, released)
	select {
	case <-second.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not see its hold go")
	}
	list, err = s.Holders(t.Context(), backend.Semaphore, "jobs-a")
	require.NoError(t, err)
	assert.Empty(t, list)
}
