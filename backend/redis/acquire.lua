-- acquire: ARGV[1] the contender ID, ARGV[2] the lease in ms (ttl + transition), ARGV[3]
-- '0' if the contender is not in the waiting set, '1' if it may be, '2' for the first call
-- of a contention (an entry of the ID may be left from an earlier lifecycle: an owner
-- takes it off, a waiter goes to the back of the queue), ARGV[4] the nonce of this call or
-- '' for a contender that takes no grants, ARGV[5] the contender's ttl in ms, ARGV[6] '1'
-- if the contender's channel was subscribed when it sent the call.
-- Takes a free mutex (SET NX PX) and announces it on simba:{mutex}; otherwise records the
-- contender as waiting (ZADD NX keeps its place in the queue) and answers the owner.
-- Beyond JVM Simba: a contender that finds itself the owner (its earlier acquire went
-- through but the answer was lost, or a release granted it the mutex) renews instead of
-- waiting; a new owner leaves the waiting set, so that its own release cannot pick it as
-- the next waiter; waiting scores carry microseconds, so that the queue is first come,
-- first served; and a waiter registers (see the prelude), for a grant if it takes them
-- (see release.lua). The registration expires when the waiter would have tried again
-- long since, and the waiting set and the registrations expire together once no
-- registration is live: a waiter that died does not stay.
local id, lease, listed, fresh, nonce, ttl, heard = ARGV[1], ARGV[2], ARGV[3] ~= '0', ARGV[3] == '2', ARGV[4], ARGV[5], ARGV[6]

local function leaveQueue()
  if listed then
    redis.call('zrem', waitKey, id)
    redis.call('hdel', grantKey, id)
  end
end

if redis.call('set', ownerKey, id, 'nx', 'px', lease) then
  local token = newToken(id, lease)
  leaveQueue()
  redis.call('publish', ownerKey, 'acquired@@' .. id)
  return { id .. '@@' .. lease, token }
end

local owner = redis.call('get', ownerKey)
if owner == id then
  redis.call('set', ownerKey, id, 'xx', 'px', lease)
  keepFence(id, lease)
  leaveQueue()
  return { id .. '@@' .. lease, tokenOf(id) }
end

local now = redis.call('time')
local score = now[1] .. '.' .. string.format('%06d', tonumber(now[2]))
if fresh then
  redis.call('zadd', waitKey, score, id)
else
  redis.call('zadd', waitKey, 'nx', score, id)
end
local left = redis.call('pttl', ownerKey)
register(id, millis(now), nonce, tonumber(lease), ttl, left, heard)
return { owner .. '@@' .. left, tokenOf(owner) }
