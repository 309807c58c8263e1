package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The reference lock on Redis: NOT a product and not simba. It exists only to measure,
// in the contended figure, the floor of what simba's guarantees cost on Redis: waiters
// served first come, first served (a list), the mutex handed to the next waiter by the
// release (a push grant: the release names the new owner and publishes its fencing token
// on the waiter's channel, as simba's grant does), and a fencing token per tenure. It
// leaves out everything else simba does: no renewal, no dead-waiter handling (a waiter
// that died keeps its place and is granted the lock for a ttl), no JVM Simba format, and
// its token is an INCR that a Redis restarting empty resets (simba's survives that).
// Two scripts, one per call; a waiter waits on one PubSub channel of its client.

// referenceAcquireLua takes the lock when it is free, or queues the caller. A retry
// (ARGV[3] "1", after a wait that saw no grant) first leaves the queue and takes the lock
// if its grant was lost. Returns the token, or 0 when queued.
const referenceAcquireLua = `
local lock, queue, token = KEYS[1], KEYS[2], KEYS[3]
local id, ttl = ARGV[1], ARGV[2]
if ARGV[3] == '1' then
  if redis.call('get', lock) == id then
    return tonumber(redis.call('get', token))
  end
  redis.call('lrem', queue, 0, id)
end
if redis.call('set', lock, id, 'nx', 'px', ttl) then
  return redis.call('incr', token)
end
redis.call('rpush', queue, id)
return 0
`

// referenceReleaseLua hands the lock to the oldest waiter, with a new token on its
// channel, or frees it; a caller that does not own it only leaves the queue.
const referenceReleaseLua = `
local lock, queue, token = KEYS[1], KEYS[2], KEYS[3]
local id, ttl = ARGV[1], ARGV[2]
if redis.call('get', lock) ~= id then
  redis.call('lrem', queue, 0, id)
  return 0
end
local next = redis.call('lpop', queue)
if not next then
  redis.call('del', lock)
  return 1
end
redis.call('set', lock, next, 'px', ttl)
redis.call('publish', lock .. ':' .. next, redis.call('incr', token))
return 1
`

var (
	referenceAcquire = goredis.NewScript(referenceAcquireLua)
	referenceRelease = goredis.NewScript(referenceReleaseLua)
)

// referenceRetry is how long a waiter of the reference lock waits for its grant before it
// asks again (an owner that died without releasing: its lock expires).
const referenceRetry = time.Second

// referenceRedis is the reference lock's library.
func referenceRedis() library {
	return library{
		id: "reference-redis", name: "reference (not a product)", store: storeRedis, process: true,
		settings: "the benchmark's own reference lock, the floor of simba's guarantees on Redis: two Lua scripts (first-come queue, push grant on the waiter's channel, INCR fencing token); no renewal, no dead-waiter handling, no JVM format; lock TTL 10s; one go-redis client and PubSub per client",
		open: func(ctx context.Context, e *env, mutex string, o openOptions) (client, error) {
			key := "reference:{" + mutex + "}"
			return openReference(ctx, e, o, referenceLock{
				acquire: referenceAcquire, release: referenceRelease,
				keys:    []string{key, key + ":queue", key + ":token"},
				channel: key + ":",
				heard:   referenceGrant,
			})
		},
		bound: failoverLease + referenceRetry,
	}
}

// referenceGrant reads a grant of the reference lock: the new tenure's token.
func referenceGrant(payload string) (uint64, bool, error) {
	token, err := strconv.ParseUint(payload, 10, 64)
	return token, err == nil, err
}

// referenceLock is one of the bench's reference locks on Redis, as its clients run it:
// acquire(keys, id, ttl, retry) answers the token, or 0 when it queued the caller;
// release(keys, id, ttl) answers 1 when the caller owned the lock.
type referenceLock struct {
	acquire, release *goredis.Script
	keys             []string
	channel          string // a waiter's channel is channel + its ID
	// heard reads a message on a waiter's channel: the token of a grant, or granted false
	// for a message that asks the waiter to try again at once.
	heard func(payload string) (token uint64, granted bool, err error)
}

// referenceClient is a client of a reference lock: its own go-redis client and a PubSub
// subscribed to its channel from the start.
type referenceClient struct {
	giveUpCounter
	lock   referenceLock
	rc     *goredis.Client
	ps     *goredis.PubSub
	grants <-chan *goredis.Message
	id     string
	ttl    string
	queued atomic.Bool
	token  atomic.Uint64 // of the latest tenure, for the tests
}

var referenceIDs atomic.Int64

func openReference(ctx context.Context, e *env, o openOptions, lock referenceLock) (*referenceClient, error) {
	rc := newRedisClient(e.Redis)
	rc.AddHook(&commands{}) // as on the other libraries' clients
	ttl := lockTTL
	if o.failover {
		ttl = failoverLease
	}
	id := fmt.Sprintf("%d:%d@reference", referenceIDs.Add(1), os.Getpid())
	ps := rc.Subscribe(ctx, lock.channel+id)
	if _, err := ps.Receive(ctx); err != nil { // the confirmation: grants are heard from now on
		_ = ps.Close()
		_ = rc.Close()
		return nil, fmt.Errorf("reference: subscribe: %w", err)
	}
	return &referenceClient{
		lock: lock, rc: rc, ps: ps, grants: ps.Channel(), id: id,
		ttl: strconv.FormatInt(ttl.Milliseconds(), 10),
	}, nil
}

func (c *referenceClient) acquire(ctx context.Context) (func(context.Context) error, error) {
	for retry := "0"; ; retry = "1" {
		c.drain()
		token, err := c.lock.acquire.Run(ctx, c.rc, c.lock.keys, c.id, c.ttl, retry).Uint64()
		if err != nil {
			return nil, c.leave(ctx, fmt.Errorf("reference: acquire: %w", err))
		}
		if token > 0 {
			c.token.Store(token)
			return c.release, nil
		}
		c.queued.Store(true)
		t := time.NewTimer(referenceRetry)
		select {
		case m := <-c.grants:
			t.Stop()
			c.queued.Store(false)
			token, granted, err := c.lock.heard(m.Payload)
			if err != nil {
				return nil, c.leave(ctx, fmt.Errorf("reference: message %q: %w", m.Payload, err))
			}
			if granted {
				c.token.Store(token)
				return c.release, nil
			}
		case <-t.C:
			c.n.Add(1)
		case <-ctx.Done():
			t.Stop()
			return nil, c.leave(ctx, ctx.Err())
		}
	}
}

// drain drops grants of an earlier wait that ended before they came.
func (c *referenceClient) drain() {
	for {
		select {
		case <-c.grants:
		default:
			return
		}
	}
}

// leave gives up a wait: out of the queue, or, if granted meanwhile, the lock handed on.
func (c *referenceClient) leave(ctx context.Context, err error) error {
	c.queued.Store(false)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(err, c.lock.release.Run(rctx, c.rc, c.lock.keys, c.id, c.ttl).Err())
}

func (c *referenceClient) release(ctx context.Context) error {
	owned, err := c.lock.release.Run(ctx, c.rc, c.lock.keys, c.id, c.ttl).Int()
	if err != nil {
		return fmt.Errorf("reference: release: %w", err)
	}
	if owned != 1 {
		return errors.New("reference: release: lock was not held")
	}
	return nil
}

func (c *referenceClient) armWait(context.Context) error { return nil }

// waiting: the last attempt queued the client, which listens on its channel.
func (c *referenceClient) waiting(context.Context) (bool, error) { return c.queued.Load(), nil }

func (c *referenceClient) close() error { return errors.Join(c.ps.Close(), c.rc.Close()) }
