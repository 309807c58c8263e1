-- release: the owner hands the mutex to the oldest live waiter (a grant, for a waiter
-- registered for one) or deletes its key and wakes that waiter; a caller that does not
-- own the mutex only leaves the waiting set. Waiters that are gone are passed by and
-- dropped. See the package doc, "Hand-over, end to end".
--
-- KEYS     see prelude.lua
-- ARGV[1]  id       the contender ID
-- ARGV[2]  listed   '1' if the caller may be in the waiting set (see acquire.lua)
-- ARGV[3]  exact    '1' if subscriber counts are exact (see silenceMeansGone)
-- ARGV[4]  raiseTo  optional, '' for none: a fencing token to raise the caller's token
--                   to first (a Quorum's tenure that ends before its first renewal)
-- ARGV[5]  tenure   optional: the token of the tenure to release ('0': one whose token
--                   the store does not show), for a release in the name of an owner that
--                   was looked up (ReleaseOwner): the ID's other tenures are left alone
-- Returns 1 if the caller owned the mutex and released it, 0 otherwise.
local id = ARGV[1]
local listed = ARGV[2] == '1'
local exact = ARGV[3] == '1'
local raiseTo = ARGV[4] or ''
local tenure = ARGV[5]

local owner, fence, watched = readOwner(retrieversKey)
if tenure and owner ~= id then
  return 0 -- and no token raised for a tenure that does not hold the mutex
end
if raiseTo ~= '' then
  fence = raiseFence(id, fence, raiseTo) or fence
end
if tenure and tokenOf(id, fence) ~= tenure then
  return 0
end
if owner ~= id then
  if listed then
    leave(id)
  end
  return 0
end
-- An owner is not in the waiting set: acquiring, renewing and being granted the mutex
-- took it off.

local now, nowMs -- the server's time, read once a waiter is found

-- serve grants waiter the mutex, or wakes it, and reports whether it was heard: false
-- when nobody heard the message although the waiter would have (see silenceMeansGone),
-- which makes a grant void: nobody got its token, and nothing of it is written.
local function serve(waiter, reg, known)
  local unheardIsGone = silenceMeansGone(exact, reg, known, nowMs)
  if grantable(reg, nowMs) then
    return grant(id, waiter, reg, fence, now, nowMs, unheardIsGone) ~= nil
  end
  -- JVM Simba's hand-over, for a waiter that cannot be granted the mutex: a JVM one, a
  -- Quorum's, or one whose registration is too old (or unreadable).
  if not wake(id, waiter, unheardIsGone) then
    return false
  end
  redis.call('del', ownerKey)
  redis.call('publish', releaseChannel, 'released@@' .. id .. '@@' .. waiter)
  return true
end

-- oldest takes the oldest waiter off the waiting set, or returns nil. ZRANGE and ZREM,
-- not ZPOPMIN: with the waiting set's fractional scores, ZPOPMIN cost Redis 7.0 more than
-- both (6 to 11 µs against 3 to 7 in a contended benchmark, INFO commandstats), and the
-- range's bounds are strings, which Redis would otherwise format from Lua numbers.
local function oldest()
  local waiter = redis.call('zrange', waitKey, '0', '0')[1]
  if waiter then
    redis.call('zrem', waitKey, waiter)
  end
  return waiter
end

-- At most 16 waiters are looked at, so that a release stays short; gone ones further
-- back are dropped by later releases, or expire.
local passed = false -- a waiter was taken off and passed by
for _ = 1, 16 do
  local waiter = oldest()
  if not waiter then
    break
  end
  passed = true
  if not now then
    now = redis.call('time')
    nowMs = millis(now)
  end
  local reg, known = registration(waiter)
  if known then
    redis.call('hdel', grantKey, waiter)
  end
  if waiter ~= id and not (reg and reg.untilMs < nowMs) and serve(waiter, reg, known) then
    return 1
  end
end
redis.call('del', ownerKey)
-- Only Go subscribers hear this: retrievers, which mark the mutex watched while they run
-- (watch.lua), and a waiter passed by above whose registration had lapsed but which may
-- still listen. With neither, nobody would act on it.
if watched or passed then
  redis.call('publish', releaseChannel, 'released@@' .. id)
end
return 1
