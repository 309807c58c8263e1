-- lookup: answers the owner without contending (for retrievers).
--
-- KEYS  see prelude.lua
-- ARGV  none
-- Returns {'<owner>@@<remaining ms>' or '@@', '<token>'} (see prelude.lua).
local owner, fence = readOwner()
if not owner then
  return { '@@', '0' }
end
return { owner .. '@@' .. redis.call('pttl', ownerKey), (tokenOf(owner, fence)) }
