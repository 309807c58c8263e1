-- lookup: answers the owner without contending (for retrievers).
--
-- KEYS  see prelude.lua
-- ARGV  none
-- Returns {'<owner>@@<remaining ms>' or '@@', '<token>', '<value>'} (see prelude.lua).
local owner, fence = readOwner()
if not owner then
  return { '@@', '0', '' }
end
local token, _, value = tokenOf(owner, fence)
return { owner .. '@@' .. redis.call('pttl', ownerKey), token, value }
