package redis

import (
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// The client's bookkeeping of a contended section, without its two store calls: a
// Locker's contention opens, joins its channels, still subscribed from its last section,
// names an attempt, takes the grant its hub routes to it, and stops. It allocated 25
// objects a section, the message and its payload (go-redis's) included; now the
// contention, its nonce prefix, its closing entry, its routes and its attempt's nonce.
func TestSectionBookkeepingAllocations(t *testing.T) {
	cfg, err := newConfig(nil)
	require.NoError(t, err)
	cfg.logger = slog.New(slog.DiscardHandler)
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer func() { _ = client.Close() }()
	b := newBackend(client, cfg)
	p := backend.Participant{
		Mutex: "m", ContenderID: "a", TTL: time.Second, Transition: time.Second, WaitsOnly: true,
		Wake: func() {}, Grant: func(backend.Record, time.Time) {}, Closed: func() {}, Logger: cfg.logger,
	}
	b.hub.mu.Lock()
	for _, ch := range []string{"simba:{m}:@@released", "simba:{m}:a"} {
		b.hub.confirmed[ch] = true // the last section's subscriptions
	}
	b.hub.mu.Unlock()
	granted := 0
	p.Grant = func(backend.Record, time.Time) { granted++ }
	section := func() {
		c := b.open(p)
		require.Equal(t, any("1"), c.hearing())
		nonce, _ := c.nextNonce()
		c.listed = unlisted // its release's answer
		b.hub.route(&goredis.Message{Channel: c.inbox, Payload: "granted@@" + nonce + "@@7@@b"})
		require.NoError(t, c.StopContend(t.Context()))
	}
	section()
	require.Equal(t, 1, granted)
	allocs := testing.AllocsPerRun(100, section)
	assert.LessOrEqual(t, allocs, 7.0)
}
