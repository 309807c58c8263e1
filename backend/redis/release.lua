-- release: ARGV[1] the contender ID; ARGV[2] '0' if the contender is not in the waiting
-- set ('1' or '2' if it may be, see acquire.lua); ARGV[3] '1' if subscriber counts are
-- exact (see hearsAlways); ARGV[4], optional ('' for none), a fencing token to raise the
-- contender's fence to first (a Quorum whose tenure ends before its first renewal);
-- ARGV[5], optional, the token of the tenure to release ('0': a tenure whose token the
-- store does not show), for a release in the name of an owner that was looked up: the
-- contender's other tenures are left alone.
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
--     simba:{mutex}:<waiter>, as JVM Simba does (a JVM waiter, or a stale registration),
--     and every Go subscriber 'released@@<releaser>@@<waiter>' on simba:{mutex}:@@released.
-- A waiter that is gone is passed by, and its entry dropped: its registration expired, or
-- nobody heard the message addressed to it although it would have (see hearsAlways); a
-- grant made to it is then void, as nobody heard of it. With nobody left to serve, the
-- owner deletes its key and tells every Go subscriber 'released@@<releaser>'.
local id, listed, exact, raiseTo, tenure = ARGV[1], ARGV[2] ~= '0', ARGV[3] == '1', ARGV[4] or '', ARGV[5]

if tenure and redis.call('get', ownerKey) ~= id then
  return 0 -- and no fence raised for a tenure that does not hold the mutex
end
if raiseTo ~= '' and redis.call('hget', fenceKey, 'owner') == id then
  local current = redis.call('hget', fenceKey, 'token')
  if not current or isGreater(raiseTo, current) then
    redis.call('hset', fenceKey, 'token', raiseTo)
  end
end
if tenure and tokenOf(id) ~= tenure then
  return 0
end
if redis.call('get', ownerKey) ~= id then
  if listed then
    redis.call('zrem', waitKey, id)
    redis.call('hdel', grantKey, id)
  end
  return 0
end
-- An owner is not in the waiting set: acquiring, renewing and being granted the mutex
-- took it off.

local now, nowMs -- the server's time, read once a waiter is found

-- serve hands the mutex to waiter, or wakes it, and reports whether it was heard.
local function serve(waiter, reg, known)
  local channel = ownerKey .. ':' .. waiter
  local tell = hearsAlways(exact, reg, known, nowMs)
  if reg and reg.nonce ~= '' then
    local age = nowMs - reg.at
    if age >= 0 and age * 10 < reg.ttl * 9 then
      local left = string.format('%.0f', reg.lease - age)
      local token = newToken(waiter, left, now)
      if redis.call('publish', channel, table.concat({ 'granted', reg.nonce, token, id }, '@@')) == 0 and tell then
        return false
      end
      redis.call('set', ownerKey, waiter, 'px', left)
      redis.call('publish', ownerKey, 'acquired@@' .. waiter)
      return true
    end
  end
  if redis.call('publish', channel, 'released@@' .. id) == 0 and tell then
    return false
  end
  redis.call('del', ownerKey)
  redis.call('publish', releaseChannel, 'released@@' .. id .. '@@' .. waiter)
  return true
end

-- At most 16 waiters are looked at, so that a release stays short; gone ones further
-- back are dropped by later releases, or expire.
for _ = 1, 16 do
  local waiter = redis.call('zrange', waitKey, 0, 0)[1]
  if not waiter then
    break
  end
  if not now then
    now = redis.call('time')
    nowMs = millis(now)
  end
  redis.call('zrem', waitKey, waiter)
  local reg, known = registration(waiter)
  if known then
    redis.call('hdel', grantKey, waiter)
  end
  if waiter ~= id and not (reg and reg.untilMs < nowMs) and serve(waiter, reg, known) then
    return 1
  end
end
redis.call('del', ownerKey)
redis.call('publish', releaseChannel, 'released@@' .. id)
return 1
