-- The prelude of the scripts of semaphores and read-write locks (holds_*.lua), which
-- holds.go appends to prelude.lua. The keys and what each holds: the package doc,
-- "Semaphores and read-write locks". Every script gets the same KEYS (holdKeys), all
-- in the slot of the hash tag {name}:
--
-- KEYS[1]  holders  sorted set: holder ID -> server time (ms) its transition ends
-- KEYS[2]  holds    hash: holder ID -> '<token>@@<ttl end ms>@@<admitted at ms>';
--                   '@@writer' -> a read-write lock's write holder;
--                   '<waiter ID>@@grant' -> the waiter's registration (see registration)
-- KEYS[3]  queue    sorted set: waiter ID -> arrival (server time in µs)
-- KEYS[4]  alive    sorted set: waiter ID -> server time (ms) after which it is gone
-- KEYS[5]  writers  sorted set: a read-write lock's waiting writers -> arrival
-- KEYS[6]  permits  string: a semaphore's permit count
-- KEYS[7]  fence    string: the latest token; it outlives every hold of the name
-- KEYS[8]  stopped  string: the contentions that stopped with an acquire call unanswered
--                   (see stop.lua, whose record this is for holds)
--
-- The hold's mode (ARGV[2] of every script) is 'p' for a semaphore's permit, 's' for a
-- read hold, 'x' for a write hold.

local holdersKey, holdsKey, queueKey, aliveKey, writersKey, permitsKey, holdFenceKey, holdStoppedKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
-- The keys that expire with the name's last hold or waiter: a semaphore has no writers, a
-- read-write lock no permit count.
local groupKeys = { holdersKey, holdsKey, queueKey, aliveKey, permitsKey }
if ARGV[2] ~= 'p' then
  groupKeys[5] = writersKey
end
-- The channel of the name: its keys' common prefix, which names no key.
local holdChannel = string.sub(holdersKey, 1, -#':holders' - 1)
-- A field of the holds hash that no holder ID can be (IDs never contain '@@').
local writerField = '@@writer'
-- The end of a waiter's field of the holds hash that holds its registration.
local grantSuffix = '@@grant'
-- A release admits or names at most this many waiters; more wakes everyone listening.
local wakeLimit = 64

local nowTime = redis.call('time')
local nowMs = millis(nowTime)

-- dropHolder takes id's hold away and reports whether it held.
local function dropHolder(id)
  if redis.call('zrem', holdersKey, id) == 0 then
    return false
  end
  redis.call('hdel', holdsKey, id)
  if redis.call('hget', holdsKey, writerField) == id then
    redis.call('hdel', holdsKey, writerField)
  end
  return true
end

-- dropWaiter takes id off the queue, with its deadline and registration, and reports
-- whether it waited. (A waiter's entries are written together: one that is not queued
-- has none.)
local function dropWaiter(id)
  if redis.call('zrem', queueKey, id) == 0 then
    return false
  end
  redis.call('zrem', aliveKey, id)
  redis.call('zrem', writersKey, id)
  redis.call('hdel', holdsKey, id .. grantSuffix)
  return true
end

-- prune drops the holds whose transition window has ended and the waiters that have not
-- asked for longer than a live one can (see alive), and reports whether it dropped any.
local function prune()
  local dropped = false
  for _, id in ipairs(redis.call('zrangebyscore', holdersKey, '-inf', nowMs)) do
    dropped = dropHolder(id) or dropped
  end
  for _, id in ipairs(redis.call('zrangebyscore', aliveKey, '-inf', nowMs)) do
    dropped = dropWaiter(id) or dropped
  end
  return dropped
end

local function writerHolds()
  return redis.call('hexists', holdsKey, writerField) == 1
end

-- firstWriter returns the rank in the queue of the first waiting writer, or nil.
local function firstWriter()
  local w = redis.call('zrange', writersKey, 0, 0)[1]
  if w then
    return redis.call('zrank', queueKey, w)
  end
  return nil
end

-- fits reports whether the waiter at rank (from 0) fits beside the holders together with
-- every waiter ahead of it: first come, first served.
local function fits(rank, mode)
  local holders = redis.call('zcard', holdersKey)
  if mode == 'p' then
    return holders + rank + 1 <= tonumber(redis.call('get', permitsKey) or '0')
  end
  if writerHolds() then
    return false
  end
  if mode == 'x' then
    return holders == 0 and rank == 0
  end
  local w = firstWriter()
  return w == nil or w > rank
end

-- fitting returns the waiters that fit now, oldest first, at most wakeLimit + 1.
local function fitting(mode)
  local n
  if mode == 'p' then
    n = tonumber(redis.call('get', permitsKey) or '0') - redis.call('zcard', holdersKey)
  elseif writerHolds() then
    n = 0
  else
    local w = firstWriter()
    if w == 0 then
      n = redis.call('zcard', holdersKey) == 0 and 1 or 0
    else
      n = w or redis.call('zcard', queueKey)
    end
  end
  n = math.min(n, wakeLimit + 1)
  if n <= 0 then
    return {}
  end
  return redis.call('zrange', queueKey, 0, n - 1)
end

-- keep makes the keys of the name expire when the last hold or waiter would be dropped,
-- or deletes them when there is none.
local function keep()
  local last = nowMs
  local h = redis.call('zrange', holdersKey, -1, -1, 'withscores')
  if h[2] then
    last = math.max(last, tonumber(h[2]))
  end
  local w = redis.call('zrange', aliveKey, -1, -1, 'withscores')
  if w[2] then
    last = math.max(last, tonumber(w[2]))
  end
  if last <= nowMs then
    redis.call('del', unpack(groupKeys))
    return
  end
  for _, k in ipairs(groupKeys) do
    redis.call('pexpire', k, decimal(last - nowMs))
  end
end

-- newHoldToken returns a new token: the server clock in µs, or the latest token + 1 if
-- that is not smaller (as newToken does for a mutex).
local function newHoldToken()
  local token = nowTime[1] .. string.format('%06d', tonumber(nowTime[2]))
  local last = redis.call('get', holdFenceKey)
  if last and string.match(last, '^[1-9]%d*$') and not isGreater(token, last) then
    redis.call('incr', holdFenceKey)
    token = redis.call('get', holdFenceKey)
  else
    redis.call('set', holdFenceKey, token)
  end
  return token
end

-- keepHoldFence makes the fence live at least lease ms, past the holds it fences.
local function keepHoldFence(lease)
  if redis.call('pttl', holdFenceKey) < lease then
    redis.call('pexpire', holdFenceKey, decimal(lease))
  end
end

-- writeHold records id's hold: its token, its admission (ms, a string), and the server
-- times (ms) at which its ttl and its transition end.
local function writeHold(id, token, since, ttlEnd, leaseEnd)
  redis.call('zadd', holdersKey, decimal(leaseEnd), id)
  redis.call('hset', holdsKey, id, table.concat({ token, decimal(ttlEnd), since }, '@@'))
  keepHoldFence(leaseEnd - nowMs)
end

-- registration returns what waiter id's latest attempt registered for a grant: the
-- attempt's nonce, the server time (ms) and the waiter's lease and ttl (ms); or nil.
local function registration(id)
  local nonce, at, lease, ttl = string.match(redis.call('hget', holdsKey, id .. grantSuffix) or '',
    '^([^@]+)@@(%d+)@@(%d+)@@(%d+)$')
  if not nonce then
    return nil
  end
  return { nonce = nonce, at = tonumber(at), lease = tonumber(lease), ttl = tonumber(ttl) }
end

-- grant admits waiter id, which fits, with a new token and returns its entry of the
-- admitted message, '<id>@@<nonce>@@<token>'; or returns nil, leaving it queued, when it
-- registered for no grant or too long ago. The waiter believes for its ttl from the send
-- time of the attempt that registered, which came before the registration: it is granted
-- the hold only while more than a tenth of that ttl is left, and the hold's ttl and
-- transition end a ttl and a lease after the registration, so that a grant nobody heard
-- lapses as any hold does.
local function grant(id, mode)
  local reg = registration(id)
  if not reg then
    return nil
  end
  local age = nowMs - reg.at
  if age < 0 or age * 10 >= reg.ttl * 9 then
    return nil
  end
  local writer = mode ~= 'p' and redis.call('zscore', writersKey, id)
  dropWaiter(id)
  local token = newHoldToken()
  writeHold(id, token, decimal(nowMs), reg.at + reg.ttl, reg.at + reg.lease)
  if writer then
    redis.call('hset', holdsKey, writerField, id)
  end
  return table.concat({ id, reg.nonce, token }, '@@')
end

-- wake admits the waiters that now fit (at most wakeLimit), oldest first, and tells them
-- on the name's channel that by left or released: 'admitted@@<by>@@<entry>@@<entry>...'
-- for those granted their holds (see grant), 'released@@<by>@@<waiter>@@<waiter>...' for
-- those that fit but registered for no grant, and 'released@@<by>' (everyone) when more
-- than wakeLimit fit.
local function wake(by, mode)
  local list = fitting(mode)
  if #list == 0 then
    return
  end
  local granted, woken = {}, {}
  for i = 1, math.min(#list, wakeLimit) do
    local entry = grant(list[i], mode)
    if entry then
      table.insert(granted, entry)
    else
      table.insert(woken, list[i])
    end
  end
  if #granted > 0 then
    redis.call('publish', holdChannel, 'admitted@@' .. by .. '@@' .. table.concat(granted, '@@'))
  end
  if #list > wakeLimit then
    redis.call('publish', holdChannel, 'released@@' .. by)
  elseif #woken > 0 then
    redis.call('publish', holdChannel, 'released@@' .. by .. '@@' .. table.concat(woken, '@@'))
  end
end

-- answer returns the reply naming holder id: {'<id>@@<ms to its transition end>',
-- '<token>', '<ms to its ttl end>', '<ms held>'}, or the reply of no holder.
local noHolder = { '@@', '0', '0', '0' }

local function answer(id)
  local at = redis.call('zscore', holdersKey, id)
  local token, ttlAt, since = string.match(redis.call('hget', holdsKey, id) or '', '^(%d+)@@(%d+)@@(%d+)$')
  if not at or not token then
    return noHolder
  end
  return { id .. '@@' .. decimal(tonumber(at) - nowMs), token, decimal(tonumber(ttlAt) - nowMs), decimal(nowMs - tonumber(since)) }
end

-- soonest answers a waiter: the hold whose transition ends first, or none.
local function soonest()
  local first = redis.call('zrangebyscore', holdersKey, '(' .. nowMs, '+inf', 'limit', 0, 1)[1]
  if first then
    return answer(first)
  end
  return noHolder
end
