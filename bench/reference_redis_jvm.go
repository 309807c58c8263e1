package main

import (
	"context"
	"errors"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The reference lock in JVM Simba's Redis format: NOT a product and not simba. It is the
// least a lock can do that keeps that format and simba's hand-over guarantees, the floor
// those set in the contended figure: a JVM Simba contender of the same mutex sees its
// owner in simba:{mutex} (SET NX PX, the contender ID, expiring a lease later) and its
// waiters in simba:{mutex}:contender (ZADD NX, scored by the server's clock), hears
// "acquired@@<id>" on simba:{mutex} when one of them takes the mutex, and, waiting
// oldest, is woken as JVM Simba wakes it. Beyond the format, as the reference lock does:
// waiters served first come, first served, the mutex granted by the release to the
// oldest waiter (with its token, on the waiter's channel), and a fencing token per
// tenure, here one that survives a Redis restarting empty as simba's does: the server's
// clock in microseconds, or the previous token + 1 if that is not smaller, kept in a key
// of its own. Nothing else: no renewal, no dead-waiter handling (a waiter that died is
// granted the mutex for a lease), no owner value.
//
// A waiter's score is the server's time in seconds with its microseconds and a final 5
// as decimals, never whole: JVM Simba scores whole seconds, so the release tells the
// waiters it may grant the mutex from JVM ones by the score alone, and wakes a JVM one
// JVM Simba's way (DEL, "released@@<id>" on its channel). A JVM waiter that comes later
// within a second is served before the Go ones of that second (simba keeps the order,
// with a ZRANGEBYSCORE per queued waiter). The token key is written with SET GET (Redis
// 6.2 or later).

// referenceJVMAcquireLua takes the mutex when it is free (JVM Simba's SET NX PX and
// message), with a new token, or queues the caller (ZADD NX keeps the place of a retry,
// ARGV[3] "1", which also takes the mutex if its grant was lost). Returns the token, or
// 0 when queued.
const referenceJVMAcquireLua = `
local owner, queue, fence = KEYS[1], KEYS[2], KEYS[3]
local id, lease = ARGV[1], ARGV[2]
local now = redis.call('time')
if not redis.call('set', owner, id, 'nx', 'px', lease) then
  if ARGV[3] == '1' and redis.call('get', owner) == id then
    return redis.call('get', fence)
  end
  redis.call('zadd', queue, 'nx', now[1] .. '.' .. string.sub('00000' .. now[2], -6) .. '5', id)
  return 0
end
if ARGV[3] == '1' then
  redis.call('zrem', queue, id)
end
redis.call('publish', owner, 'acquired@@' .. id)
` + referenceJVMTokenLua + `
return token
`

// referenceJVMReleaseLua grants the mutex to the oldest waiter, with a new token on its
// channel, or wakes it when it is a JVM one, or frees the mutex; a caller that does not
// own it only leaves the queue.
const referenceJVMReleaseLua = `
local owner, queue, fence = KEYS[1], KEYS[2], KEYS[3]
local id, lease = ARGV[1], ARGV[2]
if redis.call('get', owner) ~= id then
  redis.call('zrem', queue, id)
  return 0
end
local oldest = redis.call('zpopmin', queue)
local next, score = oldest[1], oldest[2]
if not next or not string.find(score, '.', 1, true) then
  redis.call('del', owner)
  if next then
    redis.call('publish', owner .. ':' .. next, 'released@@' .. id)
  end
  return 1
end
local now = redis.call('time')
` + referenceJVMTokenLua + `
redis.call('set', owner, next, 'px', lease)
redis.call('publish', owner .. ':' .. next, 'granted@@' .. token)
redis.call('publish', owner, 'acquired@@' .. next)
return 1
`

// referenceJVMTokenLua makes a new tenure's token, a string of digits, and keeps it in
// the token key: the server's clock (now, a TIME reply) in microseconds, or the previous
// token + 1 if that is not smaller. Strings, not Lua numbers: formatting a number cost
// Redis more than the comparison of digits (callgrind, about 4 % of a section).
const referenceJVMTokenLua = `
local token = now[1] .. string.sub('00000' .. now[2], -6)
local last = redis.call('set', fence, token, 'px', lease, 'get')
if last and (#last > #token or (#last == #token and last >= token)) then
  token = string.format('%.0f', last + 1)
  redis.call('set', fence, token, 'px', lease)
end`

var (
	referenceJVMAcquire = goredis.NewScript(referenceJVMAcquireLua)
	referenceJVMRelease = goredis.NewScript(referenceJVMReleaseLua)
)

// referenceRedisJVM is the JVM-format reference lock's library.
func referenceRedisJVM() library {
	return library{
		id: "reference-redis-jvm", name: "reference, JVM format (not a product)", store: storeRedis, process: true,
		settings: "the benchmark's own reference lock in JVM Simba's Redis format, the floor of that format and simba's hand-over guarantees: two Lua scripts (owner key SET NX PX, waiting set ZADD NX, acquired message, JVM waiters woken JVM Simba's way; first-come queue, push grant on the waiter's channel, fencing token from the server's clock and the previous token); no renewal, no dead-waiter handling; lock TTL 10s; one go-redis client and PubSub per client",
		open: func(ctx context.Context, e *env, mutex string, o openOptions) (client, error) {
			owner := "simba:{" + mutex + "}"
			return openReference(ctx, e, o, referenceLock{
				acquire: referenceJVMAcquire, release: referenceJVMRelease,
				keys:    []string{owner, owner + ":contender", "reference:{" + mutex + "}:token"},
				channel: owner + ":",
				heard:   referenceJVMMessage,
			})
		},
		bound: failoverLease + referenceRetry,
	}
}

// referenceJVMMessage reads a message on a waiter's channel: "granted@@<token>", or JVM
// Simba's "released@@<id>", after which the waiter tries again at once.
func referenceJVMMessage(payload string) (uint64, bool, error) {
	if token, ok := strings.CutPrefix(payload, "granted@@"); ok {
		t, err := strconv.ParseUint(token, 10, 64)
		return t, err == nil, err
	}
	if strings.HasPrefix(payload, "released@@") {
		return 0, false, nil
	}
	return 0, false, errors.New("neither a grant nor a release")
}
