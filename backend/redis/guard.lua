-- guard (renew): extends the caller's lease while it owns the mutex (SET XX PX), and
-- otherwise answers the owner, or '@@' when there is none. It never acquires: an owner
-- whose key has lapsed learns that its tenure ended.
--
-- KEYS     see prelude.lua
-- ARGV[1]  id     the contender ID
-- ARGV[2]  lease  ttl + transition in ms: the owner key's PX
-- Returns {'<owner>@@<remaining ms>' or '@@', '<token>', '<value>'} (see prelude.lua).
local id = ARGV[1]
local lease = ARGV[2]

local owner, fence = readOwner()
if not owner then
  return { '@@', '0', '' }
end
if owner == id then
  local token, value = renew(id, lease, fence)
  return { id .. '@@' .. lease, token, value }
end
local token, _, value = tokenOf(owner, fence)
return { owner .. '@@' .. redis.call('pttl', ownerKey), token, value }
