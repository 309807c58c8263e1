-- waiting: ARGV[1] the contender ID; ARGV[2] '1' if subscriber counts are exact (see
-- hearsAlways). Returns 1 if a contender other than this one waits for the mutex, 0
-- otherwise. Waiters found gone on the way (their registration expired, or nobody
-- listens on the channel they listened on when they registered) are dropped, so that
-- they do not count. At most 16 waiters are looked at; if all of them are gone and more
-- wait behind, the answer is 1.
local id, exact = ARGV[1], ARGV[2] == '1'

local now = millis(redis.call('time'))
local first = redis.call('zrange', waitKey, 0, 15)
for _, waiter in ipairs(first) do
  if waiter ~= id then
    local reg, known = registration(waiter)
    local gone = reg ~= nil and reg.untilMs < now
    if not gone and hearsAlways(exact, reg, known, now) then
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
