-- hand_off (HandOff): the owner gives the mutex to a waiter it names, with a new tenure,
-- and goes to the back of the waiting set, registered as an attempt of acquire.lua
-- registers. See the package doc, "Hand-offs".
--
-- KEYS     see prelude.lua
-- ARGV[1]  id      the contender ID
-- ARGV[2]  tenure  the token of the caller's tenure ('0': one whose token the store
--                  does not show)
-- ARGV[3]  to      the waiter to hand the mutex to
-- ARGV[4]  exact   '1' if subscriber counts are exact (see silenceMeansGone)
-- ARGV[5]  nonce   the caller's registration, as acquire.lua's ARGV of the same names
-- ARGV[6]  lease
-- ARGV[7]  ttl
-- ARGV[8]  heard
-- ARGV[9]  value
-- Returns 1 if it handed the mutex to `to`, 0 if the caller does not own it (that tenure
-- of it), -1 if `to` does not wait; only 1 changes anything.
local id, tenure, to = ARGV[1], ARGV[2], ARGV[3]
local exact = ARGV[4] == '1'

local owner, fence = readOwner()
if owner ~= id or tokenOf(id, fence) ~= tenure then
  return 0
end
if to == id or not redis.call('zscore', waitKey, to) then
  return -1
end
local now = redis.call('time')
local nowMs = millis(now)
local reg, known = registration(to)
if not reg or reg.untilMs < nowMs then
  -- A JVM waiter or an older version's, which would not know it owns (see Waiters), or
  -- one gone: releases pass it by.
  return -1
end

local unheardIsGone = silenceMeansGone(exact, reg, known, nowMs)
local px
if grantable(reg, nowMs) then
  px = grant(id, to, reg, fence, now, nowMs, unheardIsGone)
elseif wake(id, to, unheardIsGone) then
  -- A registration too old for a grant: `to` owns from now for a lease, and its next
  -- attempt, which the message asks for, finds it the owner and renews (acquire.lua).
  px = reg.lease
  beginTenure(to, px, newToken(fence, now), nowMs, reg.value)
end
if not px then
  return -1 -- nobody heard, although `to` would have: it is gone
end
leave(to)
enqueue(id, now, nowMs, true)
register(id, nowMs, ARGV[5], ARGV[6], ARGV[7], px, ARGV[8], ARGV[9])
return 1
