package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// The stop and watch scripts run by EVALSHA too (Redis before 7), each with the
// prelude's declarations it uses: stop answers the token of the ID's tenure, watch the
// owner, marking the mutex watched; a hold's stop answers ” for an ID that holds nothing.
func TestStopAndWatchRunByEvalsha(t *testing.T) {
	_, b, admin := renewalServer(t)
	b.scripts.byEval.Store(true)
	c := owning(t, b, "m")

	held, err := b.scripts.run(t.Context(), stopScript, c.keys, "ABCDEFGH-", "1000", c.id).Text()
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatUint(c.token, 10), held, "the token of me's tenure")
	assert.Equal(t, "ABCDEFGH-", admin.Get(t.Context(), "simba:{m}:stopped").Val(), "the stop recorded")

	v, err := b.scripts.run(t.Context(), watchScript, c.keys, watchedFor.Milliseconds()).Result()
	require.NoError(t, err)
	a, err := parseAnswer(v)
	require.NoError(t, err)
	assert.Equal(t, "me", a.owner)
	assert.EqualValues(t, 1, admin.Exists(t.Context(), "simba:{m}:retrievers").Val(), "the mutex marked watched")

	keys := holdKeys(backend.Semaphore, "m")
	held, err = b.scripts.run(t.Context(), holdsStopScript, keys, "ABCDEFGH-", "p", "1000", c.id).Text()
	require.NoError(t, err)
	assert.Empty(t, held)
	assert.Equal(t, "ABCDEFGH-", admin.Get(t.Context(), "simba:sem:{m}:stopped").Val(), "the hold's stop recorded")
}

// A retriever that hears releases marks the mutex as it looks up; on a server out of
// memory, which refuses a function that may write, it still reads the owner.
func TestRetrieverLooksUpOutOfMemory(t *testing.T) {
	_, b, admin := renewalServer(t)
	owning(t, b, "m")
	opened, err := b.StartContend(t.Context(), backend.Participant{Mutex: "m", TTL: 10 * time.Second, Transition: 6 * time.Second, Wake: func() {}})
	require.NoError(t, err)
	r := opened.(*contention)
	t.Cleanup(func() { _ = r.StopContend(context.Background()) })
	require.Eventually(t, func() bool { return b.hub.hears(r.releases) }, 10*time.Second, time.Millisecond, "the retriever's channels confirmed")

	rec, err := r.Lookup(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "me", rec.Owner)
	assert.EqualValues(t, 1, admin.Exists(t.Context(), "simba:{m}:retrievers").Val(), "the mutex marked watched")

	require.NoError(t, admin.Del(t.Context(), "simba:{m}:retrievers").Err())
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "1").Err())
	rec, err = r.Lookup(t.Context())
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "0").Err())
	require.NoError(t, err, "a lookup out of memory")
	assert.Equal(t, "me", rec.Owner)
	assert.Zero(t, admin.Exists(t.Context(), "simba:{m}:retrievers").Val(), "nothing written out of memory")
}
