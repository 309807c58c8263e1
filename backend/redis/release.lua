-- release: ARGV[1] the contender ID; ARGV[2], optional, a fencing token to raise the
-- contender's fence to first (a Quorum whose tenure ends before its first renewal).
-- Returns 1 if the contender owned the mutex and released it, 0 otherwise.
-- An owner deletes its key, takes the oldest waiter off the waiting set and tells it on
-- simba:{mutex}:<waiter id>. A non-owner only leaves the waiting set; so does the owner,
-- so that it never picks itself.
local id = ARGV[1]

if ARGV[2] and redis.call('hget', fenceKey, 'owner') == id then
  local current = redis.call('hget', fenceKey, 'token')
  if not current or isGreater(ARGV[2], current) then
    redis.call('hset', fenceKey, 'token', ARGV[2])
  end
end
redis.call('zrem', waitKey, id)
if redis.call('get', ownerKey) ~= id then
  return 0
end
redis.call('del', ownerKey)
local oldest = redis.call('zrange', waitKey, 0, 0)
if oldest[1] then
  redis.call('zrem', waitKey, oldest[1])
  redis.call('publish', ownerKey .. ':' .. oldest[1], 'released@@' .. id)
end
return 1
