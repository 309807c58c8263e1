-- release: ARGV[1] the contender ID; ARGV[2] '0' if the contender is not in the waiting
-- set ('1' or '2' if it may be, see acquire.lua); ARGV[3], optional, a fencing token to raise the contender's fence to first (a
-- Quorum whose tenure ends before its first renewal).
-- Returns 1 if the contender owned the mutex and released it, 0 otherwise.
-- A non-owner only leaves the waiting set. The owner takes the oldest waiter off the
-- waiting set and then either
--   - grants it the mutex, if it registered for grants at its latest attempt and that
--     registration is recent enough to leave a tenth of its ttl: the owner key names the
--     waiter, expiring a lease after the registration; the waiter hears
--     'granted@@<nonce>@@<token>@@<releaser>' on simba:{mutex}:<waiter> and everyone
--     'acquired@@<waiter>' on simba:{mutex}. The waiter believes from the send time of
--     the attempt with that nonce, which came before the registration; or
--   - deletes its key and tells the waiter 'released@@<releaser>' on
--     simba:{mutex}:<waiter>, as JVM Simba does (a JVM waiter, or a stale registration).
local id, listed = ARGV[1], ARGV[2] ~= '0'

if ARGV[3] and redis.call('hget', fenceKey, 'owner') == id then
  local current = redis.call('hget', fenceKey, 'token')
  if not current or isGreater(ARGV[3], current) then
    redis.call('hset', fenceKey, 'token', ARGV[3])
  end
end
if listed then
  redis.call('zrem', waitKey, id)
  redis.call('hdel', grantKey, id)
end
if redis.call('get', ownerKey) ~= id then
  return 0
end
local oldest = redis.call('zrange', waitKey, 0, 0)[1]
if not oldest then
  redis.call('del', ownerKey)
  redis.call('publish', releaseChannel, 'released@@' .. id)
  return 1
end
redis.call('zrem', waitKey, oldest)
local registration = redis.call('hget', grantKey, oldest)
if registration then
  redis.call('hdel', grantKey, oldest)
  local nonce, at, lease, ttl = string.match(registration, '^([^@]+)@@(%d+)@@(%d+)@@(%d+)$')
  if nonce then
    local age = millis(redis.call('time')) - tonumber(at)
    if age >= 0 and age * 10 < tonumber(ttl) * 9 then
      local left = string.format('%.0f', tonumber(lease) - age)
      redis.call('set', ownerKey, oldest, 'px', left)
      local token = newToken(oldest, left)
      redis.call('publish', ownerKey .. ':' .. oldest, table.concat({ 'granted', nonce, token, id }, '@@'))
      redis.call('publish', ownerKey, 'acquired@@' .. oldest)
      return 1
    end
  end
end
redis.call('del', ownerKey)
redis.call('publish', ownerKey .. ':' .. oldest, 'released@@' .. id)
redis.call('publish', releaseChannel, 'released@@' .. id .. '@@' .. oldest)
return 1
