-- acquire: ARGV[1] the contender ID, ARGV[2] the lease in ms (ttl + transition).
-- Takes a free mutex (SET NX PX) and announces it on simba:{mutex}; otherwise records the
-- contender as waiting (ZADD NX keeps its place in the queue) and answers the owner.
-- Beyond JVM Simba: a contender that finds itself the owner (its earlier acquire went
-- through but the answer was lost) renews instead of waiting, and a new owner leaves the
-- waiting set, so that its own release cannot pick it as the next waiter.
local id, lease = ARGV[1], ARGV[2]

if redis.call('set', ownerKey, id, 'nx', 'px', lease) then
  local token = newToken(id, lease)
  redis.call('zrem', waitKey, id)
  redis.call('publish', ownerKey, 'acquired@@' .. id)
  return { id .. '@@' .. lease, token }
end

local owner = redis.call('get', ownerKey)
if owner == id then
  redis.call('set', ownerKey, id, 'xx', 'px', lease)
  keepFence(id, lease)
  redis.call('zrem', waitKey, id)
  return { id .. '@@' .. lease, tokenOf(id) }
end

redis.call('zadd', waitKey, 'nx', redis.call('time')[1], id)
return { owner .. '@@' .. redis.call('pttl', ownerKey), tokenOf(owner) }
