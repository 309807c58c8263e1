package storeurl_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// openHolds opens raw, with the hold table on SQL stores.
func openHolds(t *testing.T, raw string) *storeurl.Store {
	t.Helper()
	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.CreateTable(t.Context()))
	return s
}

// holderOf returns the holder of lease among list.
func holderOf(t *testing.T, list []storeurl.Holder, lease *simba.Lease) storeurl.Holder {
	t.Helper()
	for _, h := range list {
		if h.ID == lease.Owner().ID {
			return h
		}
	}
	t.Fatalf("no holder %q in %+v", lease.Owner().ID, list)
	return storeurl.Holder{}
}

// TestHolders lists the holders of semaphores and read-write locks on every store, with
// their kind, IDs, read or write holds, tokens and, where the store keeps them, instants.
func TestHolders(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s := openHolds(t, raw)
			opts := []simba.LockerOption{simba.WithTTL(10 * time.Second), simba.WithTransition(5 * time.Second)}
			sem, err := simba.NewSemaphore(s.Backend(), "permits-"+scheme, 2, opts...)
			require.NoError(t, err)
			defer sem.Close()
			rw, err := simba.NewRWMutex(s.Backend(), "table-"+scheme, opts...)
			require.NoError(t, err)
			defer rw.Close()
			other, err := simba.NewRWMutex(s.Backend(), "other-"+scheme, opts...)
			require.NoError(t, err)
			defer other.Close()

			var permits []*simba.Lease
			for range 2 {
				l, err := sem.Acquire(t.Context())
				require.NoError(t, err)
				permits = append(permits, l)
			}
			r1, err := rw.RLock(t.Context())
			require.NoError(t, err)
			r2, err := rw.RLock(t.Context())
			require.NoError(t, err)
			w, err := other.Lock(t.Context())
			require.NoError(t, err)

			list, err := s.Holders(t.Context(), backend.Semaphore, "permits-"+scheme)
			require.NoError(t, err)
			require.Len(t, list, 2)
			for _, l := range permits {
				h := holderOf(t, list, l)
				assert.Equal(t, backend.Semaphore, h.Kind)
				assert.Equal(t, "permits-"+scheme, h.Name)
				assert.False(t, h.Shared)
				assert.Equal(t, l.Token(), h.Token, "the token")
				if !h.TTLAt.IsZero() { // ZooKeeper keeps no TTL
					assert.WithinDuration(t, time.Now().Add(10*time.Second), h.TTLAt, 5*time.Second)
					assert.WithinDuration(t, h.TTLAt.Add(5*time.Second), h.TransitionAt, time.Second)
					assert.WithinDuration(t, time.Now(), h.AcquiredAt, 5*time.Second)
				}
			}

			all, err := s.Holders(t.Context(), backend.RWLock, "")
			require.NoError(t, err)
			var mine []storeurl.Holder
			for _, h := range all {
				if h.Name == "table-"+scheme || h.Name == "other-"+scheme {
					mine = append(mine, h)
				}
			}
			require.Len(t, mine, 3, "%+v", all)
			for _, l := range []*simba.Lease{r1, r2} {
				h := holderOf(t, mine, l)
				assert.Equal(t, "table-"+scheme, h.Name)
				assert.True(t, h.Shared, "a read hold")
				assert.Equal(t, l.Token(), h.Token)
			}
			h := holderOf(t, mine, w.Lease)
			assert.Equal(t, "other-"+scheme, h.Name)
			assert.False(t, h.Shared, "a write hold")
			assert.Equal(t, w.Token(), h.Token)

			none, err := s.Holders(t.Context(), backend.Semaphore, "table-"+scheme)
			require.NoError(t, err)
			assert.Empty(t, none, "the kinds of a name are apart")
		})
	}
}

// TestReleaseHolderLeavesLaterTenure: ReleaseHolder frees the hold it was given and no
// later hold of the same ID, which the same Locker of a semaphore takes again.
func TestReleaseHolderLeavesLaterTenure(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s := openHolds(t, raw)
			name := "stuck-" + scheme
			sem, err := simba.NewSemaphore(s.Backend(), name, 1, simba.WithContenderID("same-"+scheme),
				simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
			require.NoError(t, err)
			defer sem.Close()
			first, err := sem.Acquire(t.Context())
			require.NoError(t, err)
			list, err := s.Holders(t.Context(), backend.Semaphore, name)
			require.NoError(t, err)
			old := holderOf(t, list, first)
			require.NoError(t, first.Release(t.Context()))
			second, err := sem.Acquire(t.Context())
			require.NoError(t, err)
			require.Equal(t, first.Owner().ID, second.Owner().ID, "the same Locker, the same ID")
			require.Greater(t, second.Token(), old.Token, "a new tenure")

			released, err := s.ReleaseHolder(t.Context(), old)
			require.NoError(t, err)
			assert.False(t, released, "the tenure listed has ended")
			list, err = s.Holders(t.Context(), backend.Semaphore, name)
			require.NoError(t, err)
			now := holderOf(t, list, second)
			assert.Equal(t, second.Token(), now.Token, "the later tenure still holds")
			assert.NoError(t, second.Context().Err())

			released, err = s.ReleaseHolder(t.Context(), now)
			require.NoError(t, err)
			assert.True(t, released)
			list, err = s.Holders(t.Context(), backend.Semaphore, name)
			require.NoError(t, err)
			assert.Empty(t, list)
			// Another process gets the permit at once: nobody holds it on the store.
			b, err := simba.NewSemaphore(s.Backend(), name, 1, simba.WithContenderID("next-"+scheme))
			require.NoError(t, err)
			defer b.Close()
			next, err := b.TryAcquire(t.Context())
			require.NoError(t, err)
			assert.NoError(t, next.Release(t.Context()))
		})
	}
}

// TestHoldersBadInput: a mutex kind, a name the store refuses and a hold without a token
// are bad input, and a store that lists no holds says so.
func TestHoldersBadInput(t *testing.T) {
	testserver.Need(t, storesErr)
	s := openHolds(t, stores.URLs()["redis"])
	ctx := t.Context()
	for _, err := range []error{
		func() error { _, err := s.Holders(ctx, backend.Mutex, ""); return err }(),
		func() error { _, err := s.Holders(ctx, backend.Kind(7), ""); return err }(),
		func() error { _, err := s.Holders(ctx, backend.Semaphore, "a{b}"); return err }(),
		func() error { _, err := s.Holders(ctx, backend.Semaphore, "bad\nname"); return err }(),
		func() error {
			_, err := s.ReleaseHolder(ctx, storeurl.Holder{Kind: backend.Semaphore, Name: "n", ID: "x"})
			return err
		}(),
		func() error {
			_, err := s.ReleaseHolder(ctx, storeurl.Holder{Kind: backend.Mutex, Name: "n", ID: "x", Token: 1})
			return err
		}(),
	} {
		require.ErrorIs(t, err, simba.ErrInvalidArgument)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Holders(ctx, backend.Semaphore, "")
	assert.ErrorIs(t, err, context.Canceled)
}
