-- waiting (OthersWaiting): reports whether a contender other than the caller waits for
-- the mutex. Waiters found gone on the way (their registration expired, or nobody
-- listens on their channel although they would: see silenceMeansGone) are dropped, so
-- that they do not count. At most 16 waiters are looked at; if all of them are gone and
-- more wait behind, the answer is 1.
--
-- KEYS     see prelude.lua
-- ARGV[1]  id     the contender ID
-- ARGV[2]  exact  '1' if subscriber counts are exact (see silenceMeansGone)
-- Returns 1 if someone else waits, 0 otherwise.
local id = ARGV[1]
local exact = ARGV[2] == '1'

local now = millis(redis.call('time'))
local first = redis.call('zrange', waitKey, 0, 15)
for _, waiter in ipairs(first) do
  if waiter ~= id then
    local reg, known = registration(waiter)
    local gone = reg ~= nil and reg.untilMs < now
    if not gone and silenceMeansGone(exact, reg, known, now) then
      gone = redis.call('pubsub', 'numsub', ownerKey .. ':' .. waiter)[2] == 0
    end
    if not gone then
      return 1
    end
    redis.call('zrem', waitKey, waiter)
    if known then
      redis.call('hdel', grantKey, waiter)
    end
  end
end
if #first == 16 then
  return 1
end
return 0
