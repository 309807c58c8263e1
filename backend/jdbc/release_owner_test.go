package jdbc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
)

// TestReleaseOwner: an administrator's release (storeurl.Release) frees the mutex only if
// the row still holds the tenure a lookup found. It used to acquire in the owner's name
// and release: if the same contender had released and acquired again in between, that
// freed its new tenure (issue 33, item 8). ReleaseOwner frees only the row's write the
// lookup read: a new tenure since the lookup leaves the row alone (the tenure looked up is
// over), and so does a renewal, which fails with ErrChangedSinceLookup (look again).
func TestReleaseOwner(t *testing.T) {
	for _, dialect := range []string{"mysql", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			newB := func() *jdbc.Backend { return newBackend(t, jdbc.WithHandOver(false)) }
			if dialect == "postgres" {
				newB = func() *jdbc.Backend { return newPGBackend(t, jdbc.WithHandOver(false)) }
			}
			admin := newB()
			lookup := func(mutex string) simba.Owner {
				t.Helper()
				o, err := simba.Lookup(t.Context(), admin, mutex)
				require.NoError(t, err)
				return o
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			// A transition of an odd number of milliseconds, too: a renewal is told from a
			// new tenure by the parity of transition_at - ttl_at.
			for _, transition := range []time.Duration{time.Second, 1001 * time.Millisecond} {
				t.Run(fmt.Sprintf("a new tenure since the lookup, transition %s", transition), func(t *testing.T) {
					mutex := mutexName(t)
					l, err := simba.NewLocker(newB(), mutex, simba.WithContenderID("a"), simba.WithTransition(transition))
					require.NoError(t, err)
					lease, err := l.Acquire(ctx)
					require.NoError(t, err)
					o := lookup(mutex)
					require.Equal(t, "a", o.ID)

					require.NoError(t, lease.Release(ctx))
					lease, err = l.Acquire(ctx) // the same Locker, a new tenure
					require.NoError(t, err)
					t.Cleanup(func() { _ = lease.Release(context.Background()) })

					require.NoError(t, admin.ReleaseOwner(ctx, mutex, o), "the tenure looked up is over: nothing to do")
					now := lookup(mutex)
					assert.Equal(t, "a", now.ID, "the new tenure is still held")
					assert.NoError(t, lease.Context().Err(), "and its holder still believes")
				})

				t.Run(fmt.Sprintf("a renewal since the lookup, transition %s", transition), func(t *testing.T) {
					mutex := mutexName(t)
					c, err := newB().StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "a", TTL: 2 * time.Second,
						Transition: transition, Wake: func() {}})
					require.NoError(t, err)
					t.Cleanup(func() { _ = c.StopContend(context.Background()) })
					l := c.(backend.LeaseContention)
					first := acquire(t, l)
					require.Equal(t, "a", first.Owner)
					o := lookup(mutex)
					renewed := acquire(t, l)
					require.Equal(t, "a", renewed.Owner)
					require.Equal(t, first.Token, renewed.Token, "a renewal")
					err = admin.ReleaseOwner(ctx, mutex, o)
					require.ErrorIs(t, err, jdbc.ErrChangedSinceLookup)
					assert.Contains(t, err.Error(), "renewed since the lookup: look again")
					assert.Equal(t, "a", lookup(mutex).ID)
					o = lookup(mutex)
					require.Equal(t, "a", acquire(t, l).Owner, "renews again")
					require.ErrorIs(t, admin.ReleaseOwner(ctx, mutex, o), jdbc.ErrChangedSinceLookup, "looked up after a renewal")
				})
			}

			t.Run("another owner since the lookup", func(t *testing.T) {
				mutex := mutexName(t)
				a := leaseOf(t, newB(), mutex, "a")
				require.Equal(t, "a", acquire(t, a).Owner)
				o := lookup(mutex)
				require.NoError(t, a.Release(ctx))
				b := leaseOf(t, newB(), mutex, "b")
				require.Equal(t, "b", acquire(t, b).Owner)
				require.NoError(t, admin.ReleaseOwner(ctx, mutex, o), "nothing to do")
				assert.Equal(t, "b", lookup(mutex).ID)
			})

			t.Run("the tenure looked up", func(t *testing.T) {
				mutex := mutexName(t)
				a := leaseOf(t, newB(), mutex, "a")
				first := acquire(t, a)
				require.Equal(t, "a", first.Owner)
				o := lookup(mutex)
				require.NoError(t, admin.ReleaseOwner(ctx, mutex, o))
				assert.True(t, lookup(mutex).IsZero(), "released")
				next := acquire(t, leaseOf(t, newB(), mutex, "b"))
				assert.Equal(t, "b", next.Owner, "at once")
				assert.Greater(t, next.Token, first.Token)
				require.NoError(t, admin.ReleaseOwner(ctx, mutex, o), "released already: nothing to do")
				assert.Equal(t, "b", lookup(mutex).ID)
			})

			t.Run("an owner no lookup of the backend reported", func(t *testing.T) {
				mutex := mutexName(t)
				a := leaseOf(t, newB(), mutex, "a")
				require.Equal(t, "a", acquire(t, a).Owner)
				o, err := simba.Lookup(t.Context(), newB(), mutex) // another backend's lookup
				require.NoError(t, err)
				require.ErrorIs(t, admin.ReleaseOwner(ctx, mutex, o), simba.ErrInvalidArgument)
				forged := lookup(mutex)
				forged.TransitionAt = forged.TransitionAt.Add(time.Millisecond)
				require.ErrorIs(t, admin.ReleaseOwner(ctx, mutex, forged), simba.ErrInvalidArgument)
				assert.Equal(t, "a", lookup(mutex).ID)
				other := lookup(mutex)
				other.ID = "someone-else"
				require.NoError(t, admin.ReleaseOwner(ctx, mutex, other), "no tenure of someone-else's was looked up: nothing to do")
				assert.Equal(t, "a", lookup(mutex).ID)
				require.NoError(t, admin.ReleaseOwner(ctx, mutex, simba.Owner{}), "no owner: nothing to do")
				assert.ErrorIs(t, admin.ReleaseOwner(ctx, "", o), simba.ErrInvalidArgument)
			})
		})
	}
}
