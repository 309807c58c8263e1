-- stop: records that the contention whose nonces begin with ARGV[1] has stopped while one
-- of its acquire calls went unanswered: that call may still reach the server (it waited
-- in a socket buffer, or on a slow path, after its caller gave it up), and acquire.lua
-- then takes nothing for it. The stopped key keeps the latest 8 such prefixes, for ARGV[2]
-- ms after the latest. Such a call may also have arrived already, after the contention's
-- release: the answer tells of a tenure its contender ID has.
--
-- KEYS     see prelude.lua
-- ARGV[1]  prefix  the contention's nonce prefix, "<8 characters>-"
-- ARGV[2]  px      how long to keep the record, ms
-- ARGV[3]  id      the contender ID
-- Returns the token of the tenure the ID has ('0' when the token key does not show it),
-- or '' when it owns nothing.
recordStop(stoppedKey, ARGV[1], ARGV[2])
local owner, fence = readOwner()
if owner ~= ARGV[3] then
  return ''
end
return (tokenOf(owner, fence))
