-- acquire: ARGV[1] the contender ID, ARGV[2] the lease in ms (ttl + transition), ARGV[3]
-- '0' if the contender is not in the waiting set, '1' if it may be, '2' for the first call
-- of a contention (an entry of the ID may be left from an earlier lifecycle: an owner
-- takes it off, a waiter goes to the back of the queue), ARGV[4] the nonce of this call or
-- '' for a contender that takes no grants, ARGV[5] the contender's ttl in ms, ARGV[6] '1'
-- if the contender's channel was subscribed when it sent the call.
-- Takes a free mutex (GET, then SET PX: one script, so no one comes between, as with
-- JVM Simba's SET NX PX) and announces it on simba:{mutex}; otherwise records the
-- contender as waiting (ZADD NX keeps its place in the queue) and answers the owner.
-- Beyond JVM Simba: a contender that finds itself the owner (its earlier acquire went
-- through but the answer was lost, or a release granted it the mutex) renews instead of
-- waiting, and begins a new tenure when that is the first call of its contention; a new owner leaves the waiting set, so that its own release cannot pick it as
-- the next waiter; waiting scores carry microseconds, so that the queue is first come,
-- first served, JVM waiters included (see below); and a waiter registers (see the
-- prelude), for a grant if it takes them (see release.lua). The registration expires
-- when the waiter would have tried again long since, and the waiting set and the
-- registrations expire together once no registration is live: a waiter that died does
-- not stay.
local id, lease, listed, fresh, nonce, ttl, heard = ARGV[1], ARGV[2], ARGV[3] ~= '0', ARGV[3] == '2', ARGV[4], ARGV[5], ARGV[6]

local function leaveQueue()
  if listed then
    redis.call('zrem', waitKey, id)
    redis.call('hdel', grantKey, id)
  end
end

-- The owner is read first: under contention most attempts find the mutex owned.
local owner = redis.call('get', ownerKey)
if not owner then
  redis.call('set', ownerKey, id, 'px', lease)
  local token = newToken(id, lease)
  leaveQueue()
  redis.call('publish', ownerKey, 'acquired@@' .. id)
  return { id .. '@@' .. lease, token }
end
if owner == id then
  redis.call('set', ownerKey, id, 'xx', 'px', lease)
  leaveQueue()
  if fresh then
    -- A new contention that finds its own ID owning: a key an earlier lifecycle left, or
    -- one a failover brought back after later tenures were lost. Either way a new
    -- tenure begins, with a new token: the old tenure's may be smaller than a lost
    -- successor's, who may still believe.
    local token = newToken(id, lease)
    redis.call('publish', ownerKey, 'acquired@@' .. id)
    return { id .. '@@' .. lease, token }
  end
  keepFence(id, lease)
  return { id .. '@@' .. lease, tokenOf(id) }
end

-- First come, first served with JVM Simba, which scores a waiter with the server's time
-- in whole seconds: s for any time within second s. A Go waiter that comes at s + f is
-- scored s - 1 + f, before every JVM waiter that comes later within second s (score s)
-- and after every waiter of earlier seconds; the JVM waiters that came earlier within
-- second s, which are in the set with score s now, are moved to just before it.
local now = redis.call('time')
local sec, us = tonumber(now[1]), tonumber(now[2])
local score = string.format('%d.%06d', sec - 1, us)
local added
if fresh then
  added = redis.call('zadd', waitKey, 'ch', score, id)
else
  added = redis.call('zadd', waitKey, 'nx', score, id)
end
if added == 1 then
  local earlier = redis.call('zrangebyscore', waitKey, sec, sec)
  if #earlier > 0 then
    local before = string.format('%d.%06d', sec - 1, math.max(us - 1, 0))
    for _, waiter in ipairs(earlier) do
      redis.call('zadd', waitKey, 'xx', before, waiter)
    end
  end
end
local left = redis.call('pttl', ownerKey)
register(id, millis(now), nonce, tonumber(lease), ttl, left, heard)
return { owner .. '@@' .. left, tokenOf(owner) }
