package redis

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// grantLog records what a contention passes to simba.
type grantLog struct {
	wakes  int
	grants []backend.Record
	sent   []time.Time
}

func grantedContention(t *testing.T) (*contention, *grantLog) {
	t.Helper()
	cfg, err := newConfig(nil)
	require.NoError(t, err)
	cfg.logger = slog.New(slog.DiscardHandler)
	log := &grantLog{}
	c := newContention(newBackend(nil, cfg), backend.Participant{
		Mutex: "m", ContenderID: "me", TTL: 10 * time.Second, Transition: 6 * time.Second,
		Wake: func() { log.wakes++ },
		Grant: func(r backend.Record, sent time.Time) {
			log.grants = append(log.grants, r)
			log.sent = append(log.sent, sent)
		},
	})
	return c, log
}

// A grant names one of the latest two attempts; anything else makes the contender
// contend instead.
func TestGrantMatchesRecentAttempts(t *testing.T) {
	c, log := grantedContention(t)
	first, _ := c.nextNonce()
	second, seq := c.nextNonce()
	third, _ := c.nextNonce()
	c.granted(first, 7) // too old: not one of the latest two
	assert.Equal(t, 1, log.wakes)
	assert.Empty(t, log.grants)
	c.granted("XXXXXXXX-"+third[len(c.nonces):], 7) // another contention's nonce
	assert.Equal(t, 2, log.wakes)
	c.granted(second, 7)
	require.Len(t, log.grants, 1)
	assert.Equal(t, backend.Record{Owner: "me", TTL: 10 * time.Second, Transition: 16 * time.Second, Token: 7}, log.grants[0])
	assert.Equal(t, c.attempts[0].sent, log.sent[0], "from the send time of the attempt granted")
	assert.Equal(t, seq, c.grantedSeq)
	assert.True(t, c.owner.Load(), "the next attempt renews")
}

// An answer naming the former owner to an attempt the grant already answered changes
// nothing: the contender still renews next, keeps the grant's token, and no token
// regression is reported.
func TestStaleAnswerAfterGrant(t *testing.T) {
	c, _ := grantedContention(t)
	nonce, seq := c.nextNonce()
	c.granted(nonce, 9)
	rec := c.record(answer{owner: "former", left: 5 * time.Second, token: 3}, seq)
	assert.Equal(t, "former", rec.Owner, "passed on for simba to drop")
	assert.True(t, c.owner.Load())
	assert.Equal(t, uint64(9), c.token)
	assert.Zero(t, c.b.regressions.Load())

	// An answer to a later attempt is news.
	_, later := c.nextNonce()
	c.record(answer{owner: "other", left: 5 * time.Second, token: 11}, later)
	assert.False(t, c.owner.Load())
	assert.Zero(t, c.token)
}

// A grant that answers a hand-off's registration before the hand-off's own answer is
// applied (the waiter handed the mutex released it at once) is not undone by that answer:
// the contender renews next, with the grant's token.
func TestGrantBeforeTheHandOffAnswer(t *testing.T) {
	c, log := grantedContention(t)
	c.owner.Store(true)
	c.token = 5
	nonce, seq := c.nextNonce() // the hand-off's registration
	c.granted(nonce, 9)
	require.Len(t, log.grants, 1)
	c.handedOff(seq)
	assert.True(t, c.owner.Load())
	assert.Equal(t, uint64(9), c.token)

	// Without that grant, the contender waits after the hand-off.
	_, seq = c.nextNonce()
	c.handedOff(seq)
	assert.False(t, c.owner.Load())
	assert.Zero(t, c.token)
}
