package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
)

// renewalServer starts a redis-server of the test's own and returns a backend on it and
// an admin client.
func renewalServer(t *testing.T) (*testserver.Server, *Backend, *goredis.Client) {
	t.Helper()
	srv, err := testserver.Redis(t.TempDir())
	testserver.Need(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	testserver.Need(t, srv.Start(ctx))
	t.Cleanup(func() { _ = srv.Stop() })
	client := func() *goredis.Client {
		c := goredis.NewClient(&goredis.Options{
			Addr: srv.Addr(), DisableIdentity: true, ContextTimeoutEnabled: true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	b, err := New(client())
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return srv, b, client()
}

// owning opens a contention of contender "me" for mutex on b and acquires the mutex.
func owning(t *testing.T, b *Backend, mutex string) *contention {
	t.Helper()
	opened, err := b.StartContend(t.Context(), backend.Participant{Mutex: mutex, ContenderID: "me", TTL: 10 * time.Second, Transition: 6 * time.Second})
	require.NoError(t, err)
	c := opened.(*contention)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	rec, err := c.Acquire(t.Context())
	require.NoError(t, err)
	require.Equal(t, "me", rec.Owner)
	return c
}

// One call renews many mutexes, and each gets the reply its own guard call would get: a
// mutex taken over, or with another program's data under its token key, fails no other.
func TestRenewManyRepliesPerMutex(t *testing.T) {
	_, b, admin := renewalServer(t)
	kept, foreign, taken := owning(t, b, "kept"), owning(t, b, "foreign"), owning(t, b, "taken")
	require.NoError(t, admin.Del(t.Context(), "simba:{foreign}:token").Err())
	require.NoError(t, admin.HSet(t.Context(), "simba:{foreign}:token", "f", "v").Err())
	require.NoError(t, admin.Set(t.Context(), "simba:{taken}", "other", time.Minute).Err())
	admin.PExpire(t.Context(), "simba:{kept}", time.Second) // the renewal sets it back

	batch := make([]*renewal, 3)
	for i, c := range []*contention{kept, foreign, taken} {
		batch[i] = &renewal{ctx: t.Context(), keys: c.keys, id: c.id, lease: c.lease, done: make(chan renewed, 1)}
	}
	b.renewals.send(t.Context(), batch)
	replies := make([]renewed, len(batch))
	for i, r := range batch {
		replies[i] = <-r.done
	}

	require.NoError(t, replies[0].err)
	a, err := parseAnswer(replies[0].v)
	require.NoError(t, err)
	assert.Equal(t, "me", a.owner)
	assert.Equal(t, 16*time.Second, a.left)
	assert.Greater(t, admin.PTTL(t.Context(), "simba:{kept}").Val(), 15*time.Second, "renewed on the server")

	var reply goredis.Error
	require.ErrorAs(t, replies[1].err, &reply)
	assert.Contains(t, reply.Error(), "WRONGTYPE")
	assert.True(t, refuses(b.client, replies[1].err), "a refusal, as the guard call's own reply")

	require.NoError(t, replies[2].err)
	a, err = parseAnswer(replies[2].v)
	require.NoError(t, err)
	assert.Equal(t, "other", a.owner)

	// Through Acquire: the same outcomes.
	rec, err := kept.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "me", rec.Owner)
	_, err = foreign.Acquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrRefused)
	rec, err = taken.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "other", rec.Owner)
}

// A renewal keeps its caller's deadline while its batch waits for a stalled server, and
// Close ends the batch in flight at once: its renewals fail with ErrClosed.
func TestRenewalsKeepDeadlinesAndClose(t *testing.T) {
	srv, b, _ := renewalServer(t)
	c := owning(t, b, "m")
	require.NoError(t, srv.Pause())
	t.Cleanup(func() { _ = srv.Resume() })

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx)
		failed <- err
	}()
	require.NoError(t, b.Close()) // wherever the renewal is, it ends
	select {
	case err := <-failed:
		assert.ErrorIs(t, err, simba.ErrClosed)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "ended by Close, not by its deadline: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a renewal outlived Close")
	}
}
